import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { Redis } from "ioredis";
import { createClient } from "@redis/client";
import { GlideClient, Logger } from "@valkey/valkey-glide";
import {
  DeadlockError,
  Lock,
  LockLostError,
  MultiLock,
  NotAcquiredError,
  NotHeldError,
  ReadWriteLock,
  Semaphore,
  glide,
  graph,
  toDot,
  top,
} from "../src/index.js";
import { TestServer, sleep, useServer } from "./server.js";


async function until(pred: () => Promise<boolean>, ms = 3000): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await pred()) return true;
    await sleep(10);
  }
  return pred();
}

let server: TestServer;
let r: Redis;
useServer((s, c) => {
  server = s;
  r = c;
});

Logger.setLoggerConfig("off");

for (const flavour of ["ioredis", "node-redis", "glide"] as const) {
  describe(`Lock on ${flavour}`, () => {
    let client: object;
    const connections = async () => String(await r.call("CLIENT", "LIST")).trim().split("\n").length;
    let before_ = 0;
    before(async () => {
      before_ = await connections();
      if (flavour === "ioredis") {
        client = server.ioredis();
      } else if (flavour === "glide") {
        // A Backend: padlock makes the glide clients it needs from this.
        client = glide(GlideClient, { addresses: [{ host: "127.0.0.1", port: server.port }] });
      } else {
        const c = createClient({ socket: { port: server.port, host: "127.0.0.1" } });
        await c.connect();
        client = c;
      }
    });
    after(async () => {
      if (client instanceof Redis) client.disconnect();
      else if (flavour === "node-redis") await (client as { close(): Promise<void> }).close();
      // Glide closes its sockets a moment after `close()`.
      assert.ok(await until(async () => (await connections()) <= before_, 5000), "every connection closed");
    });

    test("acquire, reentry, release, fences increase and stay below 2^53", async () => {
      const lock = new Lock(client, `k-${flavour}`, { ttl: 5000 });
      const f1 = await lock.acquire();
      assert.ok(f1 !== null && f1 > 0n && f1 < 2n ** 53n, "fences are exact bigints below 2^53");
      assert.equal(BigInt(Number(f1)), f1, "and exact as JavaScript numbers too");
      assert.equal(await lock.acquire(), f1, "reentry keeps the fence");
      assert.equal(lock.holder.length, 32);
      assert.ok(await lock.owned());
      await lock.release();
      await lock.release();
      assert.equal(await r.exists(`k-${flavour}`), 0);
      const f2 = await lock.acquire();
      assert.ok(f2 !== null && f2 > f1);
      await lock.release();
      await assert.rejects(lock.release(), NotHeldError);
    });

    test("others wait server-side, with a timeout", async () => {
      const key = `w-${flavour}`;
      const a = new Lock(client, key, { ttl: 5000 });
      const b = new Lock(client, key, { ttl: 5000 });
      await a.acquire();
      assert.equal(await b.acquire({ blocking: false }), null);
      const t0 = Date.now();
      assert.equal(await b.acquire({ timeout: 200 }), null);
      assert.ok(Date.now() - t0 >= 180);
      setTimeout(() => void a.release(), 100);
      const fb = await b.acquire({ timeout: 5000 });
      assert.ok(fb !== null && a.fence !== undefined && fb > a.fence);
      await b.release();
    });

    test("a short lease lives while held (KEEP), loss is noticed and aborts the work", async () => {
      const key = `keep-${flavour}`;
      await new Lock(client, key, { ttl: 300 }).using(async () => {
        await sleep(1000);
        assert.equal(Number((await new Lock(client, key).info()).keep), 1);
      });
      assert.equal(await r.exists(key), 0);
      let seen = 0;
      const lost = new Lock(client, key, { ttl: 300, onLost: () => seen++ });
      await assert.rejects(
        lost.using(async (signal) => {
          await r.del(key);
          // The loss may be noticed before DEL's own reply is read.
          if (!signal.aborted) await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
          assert.ok(signal.aborted);
        }),
        LockLostError,
      );
      assert.equal(seen, 1);
      assert.ok(lost.lost);
    });
  });
}

test("semaphore, multi-lock, read-write lock", async () => {
  const a = new Semaphore(r, "s", 3, { permits: 2, ttl: 5000 });
  assert.equal(await a.acquire(), 2);
  assert.equal(await new Semaphore(r, "s", 3, { permits: 2 }).acquire({ blocking: false }), null);
  await a.release();
  const m = new MultiLock(r, ["{a}1", "{a}2"], { ttl: 5000 });
  assert.equal((await m.acquire())?.length, 2);
  assert.equal(await new Lock(r, "{a}2").acquire({ blocking: false }), null);
  await m.release();
  const rw = new ReadWriteLock(r, "rw", { ttl: 5000 });
  const other = new ReadWriteLock(r, "rw", { ttl: 5000 });
  await rw.read().acquire();
  assert.ok(await other.read().acquire({ blocking: false }));
  assert.equal(await new ReadWriteLock(r, "rw").write().acquire({ blocking: false }), null);
  await other.read().release();
  assert.equal(await rw.write().acquire({ timeout: 1000 }), rw.read().fence, "upgrade keeps the fence");
  await rw.write().release();
  await rw.read().release();
  assert.equal(await r.exists("rw"), 0);
});

test("deadlocks carry the cycle, the graph is data and DOT", async () => {
  const t1 = new Lock(r, "x1", { holder: "t1", ttl: 5000 });
  const t2 = new Lock(r, "x2", { holder: "t2", ttl: 5000 });
  await t1.acquire();
  await t2.acquire();
  const waiter = new Lock(r, "x1", { holder: "t2", ttl: 5000 });
  const waiting = waiter.acquire();
  assert.ok(await until(async () => (await graph(r)).length === 1));
  await assert.rejects(new Lock(r, "x2", { holder: "t1" }).acquire(), (e: unknown) => {
    assert.ok(e instanceof DeadlockError);
    assert.deepEqual(e.cycle, ["t1", "x2", "t2", "x1", "t1"]);
    return true;
  });
  const edges = await graph(r);
  assert.deepEqual(edges.map((e) => [e.waiter, e.key, e.holders]), [["t2", "x1", ["t1"]]]);
  assert.match(toDot(edges), /"t2" -> "key:x1"/);
  await t1.release();
  assert.ok((await waiting) !== null);
  await t2.release();
  await waiter.release();
});

test("a thousand holds share one timer and two connections, and are watched by one PING", async () => {
  const { scheduler } = await import("../src/shared.js");
  // Keepers of earlier tests' clients may still be open, idle.
  const base = String(await r.call("CLIENT", "LIST")).trim().split("\n").length;
  const client = server.ioredis();
  const locks = Array.from({ length: 1000 }, (_, i) => new Lock(client, `many:${i}`, { ttl: 3000 }));
  for (const lock of locks) assert.ok((await lock.acquire({ blocking: false })) !== null);
  assert.equal(scheduler.timers, 1, "one timer for every hold");
  const clients = String(await r.call("CLIENT", "LIST")).trim().split("\n").length - base;
  assert.ok(clients <= 3, `${clients} connections more: the client's own, one shared, none per hold`);
  // Every hold's first round binds it with the mailbox (one EXTEND each);
  // from then on the mailman's PING is all their watching costs.
  await sleep(1500);
  const now = String(await r.call("CLIENT", "LIST")).trim().split("\n").length - base;
  assert.ok(now <= 3, `${now} connections more: the client's own, keeper, mailman`);
  await r.call("CONFIG", "RESETSTAT");
  await sleep(1500);
  const stats = String(await r.call("INFO", "commandstats"));
  // (A hold whose round came late, on a loaded machine, may bind once more.)
  const extends_ = Number(/cmdstat_lock\.extend:calls=(\d+)/.exec(stats)?.[1] ?? 0);
  assert.ok(extends_ < 50, `${extends_} EXTENDs: kept leases are not renewed by the client`);
  assert.ok(!stats.includes("cmdstat_lock.info"), "nor read one by one");
  const pings = Number(/cmdstat_ping:calls=(\d+)/.exec(stats)?.[1] ?? 0);
  assert.ok(pings >= 1 && pings <= 12, `${pings} pings`);
  assert.ok(locks.every((l) => l.held));
  for (const lock of locks) await lock.release();
  assert.equal(await r.dbsize(), 0);
  client.disconnect();
});

test("no connection is opened per acquire", async () => {
  const client = server.ioredis();
  const opened = async () => Number(/total_connections_received:(\d+)/.exec(String(await r.call("INFO", "stats")))?.[1]);
  const lock = new Lock(client, "conns:k", { ttl: 5000 });
  assert.ok((await lock.acquire()) !== null);
  await lock.release();
  const before = await opened();
  for (let i = 0; i < 100; i++) {
    assert.ok((await lock.acquire()) !== null);
    await lock.release();
  }
  // (The test's own INFO is a command on its open connection.)
  assert.equal((await opened()) - before, 0, "the keeper stays open between holds");
});

test("released holds' rounds are dropped from the shared timer in bulk", async () => {
  const { scheduler } = await import("../src/shared.js");
  const client = server.ioredis();
  const lock = new Lock(client, "rounds:k", { ttl: 60_000 });
  // Holds of earlier tests may still be watched: they count as live.
  const before = scheduler.rounds;
  for (let i = 0; i < 5000; i++) {
    assert.ok((await lock.acquire()) !== null);
    await lock.release();
  }
  const bound = 2 * before + 130;
  assert.ok(scheduler.rounds <= bound, `${scheduler.rounds} rounds waiting (${before} before): released holds' are not purged`);
});

test("top lists the keys with the most waiters", async () => {
  const owner = new Lock(r, "hot", { holder: "owner", ttl: 5000 });
  await owner.acquire();
  const waits = ["w1", "w2"].map((h) => {
    const l = new Lock(r, "hot", { holder: h, ttl: 5000 });
    return l.acquire().then(() => l.release());
  });
  const sem = new Semaphore(r, "pool", 1, { holder: "s0", ttl: 5000 });
  await sem.acquire();
  const semWaiter = new Semaphore(r, "pool", 1, { holder: "s1", ttl: 5000 });
  const semWait = semWaiter.acquire().then(() => semWaiter.release());
  assert.ok(await until(async () => (await top(r)).reduce((n, h) => n + h.waiters, 0) === 3));
  const rows = await top(r);
  assert.deepEqual(
    rows.map((h) => [h.key, h.kind, h.waiters, h.holders]),
    [["hot", "lock", 2, 1], ["pool", "sem", 1, 1]],
  );
  assert.ok(rows[0].oldestWaitMs >= 0);
  assert.deepEqual((await top(r, 1)).map((h) => h.key), ["hot"]);
  await owner.release();
  await sem.release();
  await Promise.all([...waits, semWait]);
  assert.equal(await r.exists("hot"), 0, "every hold given back");
});

test("using() gives up after blockingTimeout; await using releases", async () => {
  const holder = new Lock(r, "u", { ttl: 5000 });
  await holder.acquire();
  await assert.rejects(new Lock(r, "u", { blockingTimeout: 100 }).using(async () => 1), NotAcquiredError);
  await holder.release();
  {
    await using lock = new Lock(r, "u", { ttl: 5000 });
    await lock.acquire();
    assert.equal(await r.exists("u"), 1);
  }
  assert.equal(await r.exists("u"), 0);
});

test("restart grace: -TRYAGAIN retried up to the timeout", async () => {
  const graceful = await TestServer.start(["--padlock.restart-grace-ms", "800"]);
  const g = graceful.ioredis();
  try {
    assert.equal(await new Lock(g, "k").acquire({ timeout: 100 }), null);
    const t0 = Date.now();
    const lock = new Lock(g, "k");
    assert.ok((await lock.acquire({ timeout: 5000 })) !== null);
    assert.ok(Date.now() - t0 < 3000);
    await lock.release();
  } finally {
    g.disconnect();
    await graceful.stop();
  }
});

test("a ttl below the KEEP floor is refused before any wait", async () => {
  const other = new Lock(r, "floor", { ttl: 30000, holder: "other" });
  assert.ok(await other.acquire());
  for (const blocking of [false, true]) {
    const lock = new Lock(r, "floor", { ttl: 100 });
    const t0 = Date.now();
    await assert.rejects(lock.acquire({ blocking, timeout: 5000 }), /KEEP must be at least 300/);
    assert.ok(Date.now() - t0 < 1000, "refused up front, not after a wait");
    assert.equal(lock.held, false);
  }
  await other.release();
  await assert.rejects(new Lock(r, "floor", { ttl: 100 }).acquire(), /at least 300/);
  assert.equal(await r.exists("floor"), 0);
});
