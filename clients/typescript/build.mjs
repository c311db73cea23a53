// `npm install ./clients/typescript` links this folder and runs `prepare`:
// build with this package's own TypeScript, fetching its dev packages into
// this folder first when they are missing (a fresh checkout).
import { execSync } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const run = (cmd) => execSync(cmd, { cwd: here, stdio: "inherit" });
if (!existsSync(`${here}/node_modules/.bin/tsc`)) {
  run("npm ci --ignore-scripts --no-audit --no-fund --loglevel=error");
}
run("node_modules/.bin/tsc -p tsconfig.json");
