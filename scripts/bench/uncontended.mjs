// The TypeScript half of scripts/bench/uncontended.py: an uncontended
// acquire + release through the client on ioredis, and SET NX PX + DEL
// through the same ioredis, interleaved; prints one JSON line (µs, medians).
//
//   node scripts/bench/uncontended.mjs <port> <n>   (run in clients/typescript)

import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";
import { resolve } from "node:path";

const require = createRequire(resolve("package.json"));
const { Redis } = require("ioredis");
const { Lock } = await import(pathToFileURL(resolve("dist/src/index.js")).href);

const port = Number(process.argv[2]);
const n = Number(process.argv[3]);
const app = new Redis({ port, host: "127.0.0.1" });
const lock = new Lock(app, "uncontended:ts", { ttl: 5000 });
const median = (xs) => xs.sort((a, b) => a - b)[xs.length >> 1] * 1000;
const base = [];
const padlock = [];
for (let i = 0; i < n + 500; i++) {
  let t = performance.now();
  await app.set("uncontended:set", "v", "PX", 5000, "NX");
  await app.del("uncontended:set");
  const b = performance.now() - t;
  t = performance.now();
  await lock.acquire();
  await lock.release();
  const p = performance.now() - t;
  if (i >= 500) {
    base.push(b);
    padlock.push(p);
  }
}
console.log(JSON.stringify({ base: median(base), padlock: median(padlock) }));
app.disconnect();
process.exit(0);
