// Holders from the caller's context (the seeds' nested reentry inside
// `withHolder`), leases without renewal, renewal bounded by maxHold.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Redis } from "ioredis";
import { Lock, NotAcquiredError, NotHeldError, ReadWriteLock, currentHolder, withHolder } from "../src/index.js";
import { LEFT_MAX, hasLeftovers, leftOver, leftover } from "../src/holders.js";
import { TestServer, sleep, useServer } from "./server.js";


let server: TestServer;
let r: Redis;
useServer((s, c) => {
  server = s;
  r = c;
});

async function count(key: string): Promise<number> {
  const raw = (await r.call("LOCK.INFO", key)) as unknown[] | null;
  return raw === null ? 0 : Number(raw[raw.indexOf("count") + 1]);
}

test("a nested function reenters the lock its caller holds, inside withHolder", async () => {
  const seen: number[] = [];
  async function validateInventory(order: number): Promise<void> {
    const lock = new Lock(r, `order:${order}`, { ttl: 5000, blockingTimeout: 1000 });
    await lock.using(async () => {
      seen.push(await count(`order:${order}`));
    });
  }
  async function processOrder(order: number): Promise<void> {
    const lock = new Lock(r, `order:${order}`, { ttl: 5000 });
    await lock.using(async () => {
      await validateInventory(order);
      seen.push(await count(`order:${order}`));
    });
  }
  await withHolder(() => processOrder(1001), "request-1");
  assert.deepEqual(seen, [2, 1]);
  assert.equal(await r.exists("order:1001"), 0);
});

test("two scopes, or two objects outside any scope, do not share a hold", async () => {
  assert.equal(currentHolder(), undefined);
  const a = new Lock(r, "k", { ttl: 5000 });
  await a.acquire();
  assert.equal(await new Lock(r, "k", { ttl: 5000 }).acquire({ blocking: false }), null);
  const inScope = withHolder(() => new Lock(r, "k", { ttl: 5000 }).acquire({ blocking: false }));
  assert.equal(await inScope, null);
  await a.release();
  // Concurrent scopes each keep their own.
  const [x, y] = await Promise.all([
    withHolder(async () => {
      const l = new Lock(r, "s", { ttl: 5000 });
      const f = await l.acquire({ blocking: false });
      await sleep(50);
      await l.release();
      return f;
    }),
    withHolder(async () => {
      await sleep(10);
      return new Lock(r, "s", { ttl: 5000 }).acquire({ blocking: false });
    }),
  ]);
  assert.ok(x !== null);
  assert.equal(y, null);
});

test("an explicit holder wins over the scope", async () => {
  await withHolder(async () => {
    const mine = new Lock(r, "e", { ttl: 5000 });
    await mine.acquire();
    const other = new Lock(r, "e", { ttl: 5000, holder: "someone-else", blockingTimeout: 100 });
    await assert.rejects(other.using(async () => undefined), NotAcquiredError);
    await mine.release();
  });
});

test("a read-write lock's modes take the scope's holder", async () => {
  await withHolder(async () => {
    const rw = new ReadWriteLock(r, "rw", { ttl: 5000 });
    await rw.read().acquire();
    const other = new ReadWriteLock(r, "rw", { ttl: 5000 });
    assert.ok((await other.write().acquire({ timeout: 1000 })) !== null, "the same holder upgrades");
    assert.equal(other.holder, rw.holder);
    await other.write().release();
    await rw.read().release();
  }, "rw-scope");
  assert.equal(await r.exists("rw"), 0);
});

test("renew: false is a plain lease", async () => {
  const lock = new Lock(r, "plain", { ttl: 400, renew: false });
  await lock.acquire();
  await sleep(600);
  assert.equal(await r.exists("plain"), 0);
  assert.equal(lock.held, false);
});

async function keepOf(key: string): Promise<number | undefined> {
  const raw = (await r.call("LOCK.INFO", key)) as unknown[] | null;
  return raw === null ? undefined : Number(raw[raw.indexOf("keep") + 1]);
}

test("stopRenewing lets the lease run out and leaves the other holds bound", async () => {
  // redis-semaphore's stopRefresh: the binding moves to a connection that
  // then closes; the other holds on the shared connection stay kept.
  const a = new Lock(r, "stop-a", { ttl: 600 });
  const b = new Lock(r, "stop-b", { ttl: 600 });
  await a.acquire();
  await b.acquire();
  assert.equal(await keepOf("stop-a"), 1);
  await a.stopRenewing();
  for (let i = 0; i < 50 && (await keepOf("stop-a")) !== 0; i++) await sleep(10);
  assert.equal(await keepOf("stop-a"), 0, "the binding ended");
  assert.ok(a.held, "the lease runs a ttl from the unbinding");
  assert.ok(await a.renew());
  assert.equal(await keepOf("stop-a"), 0, "a renewal by hand binds nothing");
  await sleep(900);
  assert.equal(await r.exists("stop-a"), 0);
  assert.equal(a.held, false);
  assert.ok(b.held);
  assert.equal(await keepOf("stop-b"), 1);
  await assert.rejects(a.release(), NotHeldError);
  await a.acquire();
  assert.equal(await keepOf("stop-a"), 1, "a fresh acquire renews again");
  await a.release();
  await b.release();
});

test("maxHold bounds renewal and reports the loss", async () => {
  let lostAt = 0;
  const start = performance.now();
  const lock = new Lock(r, "bounded", { ttl: 600, maxHold: 1500, onLost: () => (lostAt = performance.now()) });
  await lock.acquire();
  await sleep(1000);
  assert.ok(lock.held && (await r.exists("bounded")) === 1, "renewed within the bound");
  for (let i = 0; i < 150 && lostAt === 0; i++) await sleep(20);
  assert.ok(lostAt > 0 && lostAt - start <= 1500 + 300, `lost after ${lostAt - start} ms`);
  assert.equal(lock.held, false);
  assert.ok(lock.signal.aborted);
});

test("a hold collected without release stops renewing and closes its connection", async () => {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc === undefined) return; // node without --expose-gc
  const c = server.ioredis();
  await (async () => {
    const lock = new Lock(c, "dropped", { ttl: 600 });
    await lock.acquire();
  })();
  for (let i = 0; i < 5; i++) {
    gc();
    await sleep(20);
  }
  await sleep(1200);
  assert.equal(await r.exists("dropped"), 0, "no watcher, no KEEP: the lease ran out");
  c.disconnect();
});

test("a kept lease is watched by one PING: no reads, no writes", async () => {
  const c = server.ioredis();
  const lock = new Lock(c, "kept", { ttl: 600 });
  await lock.acquire();
  await r.config("RESETSTAT");
  await sleep(1500);
  const stats = String(await r.info("commandstats"));
  assert.ok(!stats.includes("cmdstat_lock.extend"), "no EXTEND while the server keeps the lease");
  assert.ok(!stats.includes("cmdstat_lock.info"), "losses are mailed: no reads");
  assert.ok(/cmdstat_ping:calls=([3-9]|\d\d)/.test(stats), stats);
  assert.ok(lock.held);
  await lock.release();
  assert.equal(await r.exists("kept"), 0);
  c.disconnect();
});

test("holds left over are bounded in number", () => {
  // A holder never seen again (an object's own) leaves its leftover behind:
  // past the bound the oldest are dropped.
  for (let i = 0; i < LEFT_MAX + 5; i++) leftOver(`bound:${i}`, "h", ["LOCK.RELEASE", `bound:${i}`, "h"], 1000);
  assert.equal(leftover("bound:0", "h"), undefined);
  const last = LEFT_MAX + 4;
  assert.deepEqual(leftover(`bound:${last}`, "h"), ["LOCK.RELEASE", `bound:${last}`, "h"]);
  for (let i = 0; i <= last; i++) leftover(`bound:${i}`, "h");
  assert.equal(hasLeftovers(), false);
});
