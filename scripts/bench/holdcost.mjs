// The Node half of scripts/bench/holdcost.py: N holds on N keys, then N
// waiters on one held key, in one process, through padlock's TypeScript
// client and through redis-semaphore's Mutex (both on ioredis, as their
// READMEs show). Prints one JSON line per library.
//
//   node scripts/bench/holdcost.mjs <port> <n>   (run in scripts/bench/node)

import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";
import { resolve } from "node:path";

const here = resolve("package.json");
const require = createRequire(here);
const { Redis } = require("ioredis");
const { Mutex } = require("redis-semaphore");
const { Lock } = await import(pathToFileURL(resolve("../../../clients/typescript/dist/src/index.js")).href);

const port = Number(process.argv[2]);
const n = Number(process.argv[3]);
const IDLE_MS = 6000;
const TTL = 3000;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const watch = new Redis({ port, host: "127.0.0.1" });
const clients = async () => String(await watch.call("CLIENT", "LIST")).trim().split("\n").length;
const calls = async () => {
  const text = String(await watch.call("INFO", "commandstats"));
  let sum = 0;
  for (const m of text.matchAll(/calls=(\d+)/g)) sum += Number(m[1]);
  return sum;
};

// Each library: how to make a hold on a key with the app's client, and its
// acquire / release. `wait(h)` blocks until held (up to 60 s).
const libraries = [
  {
    name: "padlock TypeScript (ioredis)",
    make: (app, key) => new Lock(app, key, { ttl: TTL }),
    take: (h) => h.acquire({ blocking: false }),
    wait: (h) => h.acquire({ timeout: 60_000 }),
    give: (h) => h.release(),
    queue: true,
  },
  {
    name: "redis-semaphore Mutex (ioredis)",
    make: (app, key) => new Mutex(app, key, { lockTimeout: TTL, acquireTimeout: 60_000 }),
    take: (h) => h.tryAcquire(),
    wait: (h) => h.acquire(),
    give: (h) => h.release(),
    queue: false,
  },
];

for (const lib of libraries) {
  await watch.flushall();
  // The library before's connections are gone first (padlock's close a
  // moment after the application's client ends).
  for (let t = 0; t < 150 && (await clients()) > 1; t++) await sleep(100);
  const app = new Redis({ port, host: "127.0.0.1" });
  await app.ping();
  const base = await clients();
  const holds = [];
  for (let i = 0; i < n; i++) {
    const h = lib.make(app, `h:${i}`);
    await lib.take(h);
    holds.push(h);
  }
  await sleep(TTL); // every hold's first round has run
  const holdConns = (await clients()) - base;
  const before = await calls();
  await sleep(IDLE_MS);
  const idleRate = Math.max(0, ((await calls()) - before - 1) / (IDLE_MS / 1000));
  await Promise.all(holds.map((h) => lib.give(h)));

  const owner = lib.make(app, "hot");
  await lib.take(owner);
  const order = [];
  const waits = [];
  for (let i = 0; i < n; i++) {
    const h = lib.make(app, "hot");
    waits.push(
      lib.wait(h).then(async (got) => {
        if (got !== null && got !== false) order.push(i);
        await lib.give(h);
      }),
    );
  }
  await sleep(500); // all asked
  const waitingFrom = await calls();
  await sleep(2000);
  const waitRate = Math.max(0, ((await calls()) - waitingFrom - 1) / 2);
  const waitConns = (await clients()) - base;
  await lib.give(owner);
  await Promise.allSettled(waits);
  const fifo = lib.queue ? order.every((v, i) => i === 0 || v > order[i - 1]) : null;
  app.disconnect();
  console.log(JSON.stringify({ client: lib.name, hold_conns: holdConns, idle_rate: idleRate, wait_conns: waitConns,
    wait_rate: waitRate,
    acquired: order.length, fifo }));
}
watch.disconnect();
process.exit(0);
