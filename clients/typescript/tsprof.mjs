import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";
import { resolve } from "node:path";
const require = createRequire(resolve("package.json"));
const { Redis } = require("ioredis");
const { Lock } = await import(pathToFileURL(resolve("dist/src/index.js")).href);
const port = Number(process.argv[2]);
const app = new Redis({ port, host: "127.0.0.1" });
const lock = new Lock(app, "u:ts", { ttl: 5000 });
const base = process.env.BASE;
for (let i = 0; i < Number(process.env.N ?? 30000); i++) { if (base) { await app.set("u:set", "v", "PX", 5000, "NX"); await app.del("u:set"); } else { await lock.acquire(); await lock.release(); } }
app.disconnect(); process.exit(0);
