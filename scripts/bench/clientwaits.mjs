// The TypeScript half of scripts/bench/clientwaits.py: N waiters on one key in
// one process through the client on ioredis; prints one JSON line.
//
//   node scripts/bench/clientwaits.mjs <port> <n>   (run in clients/typescript)

import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";
import { resolve } from "node:path";

const require = createRequire(resolve("package.json"));
const { Redis } = require("ioredis");
const { Lock } = await import(pathToFileURL(resolve("dist/src/index.js")).href);

const port = Number(process.argv[2]);
const n = Number(process.argv[3]);
const app = new Redis({ port, host: "127.0.0.1" });
const watch = new Redis({ port, host: "127.0.0.1" });
const clients = async () => String(await watch.call("CLIENT", "LIST")).trim().split("\n").length;
await app.ping();
const base = await clients();
const owner = new Lock(app, "hot", { ttl: 60_000 });
await owner.acquire();
const pings = [];
let stop = false;
const pinger = (async () => {
  while (!stop) {
    const t0 = performance.now();
    await app.ping();
    pings.push(performance.now() - t0);
    await new Promise((r) => setTimeout(r, 1));
  }
})();
const order = [];
globalThis.gc?.();
const before = process.memoryUsage().heapUsed;
const waits = [];
for (let i = 0; i < n; i++) {
  const lock = new Lock(app, "hot", { ttl: 60_000 });
  waits.push(lock.acquire().then(async () => {
    order.push(i);
    await lock.release();
  }));
}
const queued = async () => {
  const raw = await watch.call("LOCK.INFO", "hot");
  return Number(raw[raw.indexOf("waiters") + 1]);
};
while ((await queued()) < n) await new Promise((r) => setTimeout(r, 10));
globalThis.gc?.();
const mem = (process.memoryUsage().heapUsed - before) / n;
const conns = (await clients()) - base;
const t0 = performance.now();
await owner.release();
await Promise.all(waits);
const served = (performance.now() - t0) / 1000;
stop = true;
await pinger;
pings.sort((a, b) => a - b);
const pct = (p) => pings[Math.min(pings.length - 1, Math.floor(pings.length * p))] ?? 0;
let fifo = order.length === n;
for (let i = 0; fifo && i < n; i++) fifo = order[i] === i;
console.log(JSON.stringify({
  client: "TypeScript (ioredis)", waiters: n, connections: conns, fifo,
  ping_p50_ms: pct(0.5), ping_p99_ms: pct(0.99), bytes_per_waiter: mem, served_s: served,
}));
app.disconnect();
watch.disconnect();
process.exit(0);
