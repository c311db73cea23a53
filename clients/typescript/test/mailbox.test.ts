// Issue 39 in the TypeScript client: waits and losses through one mailbox
// per client, so any number of holds and waits cost two connections, a
// loss is heard at once, and an aborted wait leaves the server's queue.

import { test } from "node:test";
import assert from "node:assert/strict";
import { Redis } from "ioredis";
import { Lock, Semaphore } from "../src/index.js";
import { TestServer, sleep, useServer } from "./server.js";

let server: TestServer;
let r: Redis;
useServer((s, c) => {
  server = s;
  r = c;
});

async function queued(key: string): Promise<number> {
  const raw = (await r.call("LOCK.INFO", key)) as unknown[] | null;
  return raw === null ? 0 : Number(raw[raw.indexOf("waiters") + 1]);
}

async function connections(): Promise<number> {
  return String(await r.call("CLIENT", "LIST")).trim().split("\n").length;
}

async function until(pred: () => Promise<boolean>, ms = 5000): Promise<boolean> {
  for (const end = Date.now() + ms; Date.now() < end; await sleep(5)) if (await pred()) return true;
  return pred();
}

test("two thousand waiters: two connections of padlock's own, served in order", async () => {
  const client = server.ioredis();
  const owner = new Lock(client, "hot", { ttl: 10_000 });
  await owner.acquire();
  const before = await connections();
  const order: number[] = [];
  const waits: Promise<void>[] = [];
  for (let i = 0; i < 2000; i++) {
    const lock = new Lock(client, "hot", { ttl: 10_000 });
    waits.push(lock.using(async () => void order.push(i)));
    if (i % 100 === 99) assert.ok(await until(async () => (await queued("hot")) === i + 1), `${i + 1} queued in order`);
  }
  const info = String(await r.call("INFO", "padlock"));
  assert.match(info, /padlock_blocked_clients:0\r?\n/, "no blocked client per wait");
  assert.ok((await connections()) - before <= 1, "the mailman's connection, no more");
  await owner.release();
  await Promise.all(waits);
  assert.deepEqual(order, Array.from({ length: 2000 }, (_, i) => i));
  client.disconnect();
});

test("a deleted hold is reported within milliseconds", async () => {
  let lostAt = 0;
  const lock = new Lock(r, "gone", { ttl: 30_000, onLost: () => (lostAt = performance.now()) });
  await lock.acquire();
  await sleep(100);
  const deleted = performance.now();
  await r.del("gone");
  assert.ok(await until(async () => lostAt > 0, 2000), "reported");
  assert.ok(lostAt - deleted < 1000, `after ${lostAt - deleted} ms (a read per interval would take 10 s)`);
  assert.equal(lock.held, false);
});

test("a try-acquired semaphore binds its mailbox on its first round", async () => {
  const sem = new Semaphore(r, "tried", 2, { ttl: 600 });
  assert.ok((await sem.acquire({ blocking: false })) !== null);
  await sleep(400);
  await r.del("tried");
  assert.ok(await until(async () => sem.lost, 500));
  assert.equal(sem.held, false);
});

test("an aborted wait leaves the queue before it rejects, and is never granted", async () => {
  for (let i = 0; i < 20; i++) {
    const owner = new Lock(r, "busy", { ttl: 10_000 });
    await owner.acquire();
    const waiter = new Lock(r, "busy", { ttl: 10_000 });
    const signal = AbortSignal.timeout(10);
    await assert.rejects(waiter.acquire({ signal }));
    assert.equal(await queued("busy"), 0, "taken out with LOCK.CANCEL");
    await owner.release();
    assert.equal(await r.exists("busy"), 0, "not granted to the aborted waiter");
    assert.equal(waiter.held, false);
  }
});

test("a timed-out wait is answered by the server in time", async () => {
  const owner = new Lock(r, "slow", { ttl: 10_000 });
  await owner.acquire();
  const t0 = performance.now();
  assert.equal(await new Lock(r, "slow").acquire({ timeout: 300 }), null);
  const took = performance.now() - t0;
  assert.ok(took > 280 && took < 800, `${took} ms`);
  assert.equal(await queued("slow"), 0);
  await owner.release();
});

test("queued waits survive a killed shared connection", async () => {
  const client = server.ioredis();
  await r.call("LOCK.ACQUIRE", "k", "other", 10_000);
  const waits = Array.from({ length: 20 }, () => {
    const lock = new Lock(client, "k", { ttl: 10_000 });
    return lock.acquire({ timeout: 20_000 }).then(async (fence) => {
      await lock.release();
      return fence;
    });
  });
  assert.ok(await until(async () => (await queued("k")) === 20));
  const list = String(await r.call("CLIENT", "LIST")).trim().split("\n");
  for (const line of list) {
    if (/ cmd=lock\./.test(line)) await r.call("CLIENT", "KILL", "ID", /id=(\d+)/.exec(line)?.[1] ?? "0");
  }
  assert.equal(await queued("k"), 0, "the server dropped them with their connection");
  assert.ok(await until(async () => (await queued("k")) === 20), "sent again on a new one");
  await r.call("LOCK.RELEASE", "k", "other");
  const fences = await Promise.all(waits);
  assert.ok(fences.every((f) => f !== null));
  client.disconnect();
});

test("an abort that races the grant never leaves a hold (both orders, twenty times)", async () => {
  for (let i = 0; i < 20; i++) {
    const owner = new Lock(r, "race", { ttl: 10_000 });
    await owner.acquire();
    const lock = new Lock(r, "race", { ttl: 10_000, holder: `w${i}` });
    const ctl = new AbortController();
    const waiting = lock.acquire({ signal: ctl.signal }).then(
      (f) => f,
      () => null,
    );
    assert.ok(await until(async () => (await queued("race")) === 1));
    if (i % 2) {
      await owner.release();
      await sleep(i % 5);
      ctl.abort();
    } else {
      ctl.abort();
      await owner.release();
    }
    const got = await waiting;
    if (got !== null) {
      assert.ok(lock.held);
      await lock.release();
    }
    assert.equal(lock.held, false);
    assert.equal(await r.exists("race"), 0, `round ${i}`);
  }
});

test("an onLost that throws is reported as an uncaught exception, and the watching goes on", async () => {
  const { execFileSync } = await import("node:child_process");
  const index = new URL("../src/index.js", import.meta.url).href;
  const script = `
    import { Redis } from "ioredis";
    const { Lock } = await import(${JSON.stringify(index)});
    const r = new Redis({ port: ${server.port}, host: "127.0.0.1" });
    const kept = new Lock(r, "thrower-kept", { ttl: 600 });
    await kept.acquire();
    const lost = new Lock(r, "thrower", { ttl: 600, onLost: () => { throw new Error("handler failed"); } });
    await lost.acquire();
    process.on("uncaughtException", async (e) => {
      await new Promise((res) => setTimeout(res, 1000));
      console.log(JSON.stringify({ reported: e.message, kept: kept.held }));
      await kept.release();
      r.disconnect();
      process.exit(0);
    });
    await r.del("thrower");
  `;
  const out = execFileSync(process.execPath, ["--input-type=module", "-e", script], {
    cwd: new URL("../..", import.meta.url),
    timeout: 20_000,
    encoding: "utf8",
  });
  const seen = JSON.parse(out.trim().split("\n").pop() ?? "{}") as { reported?: string; kept?: boolean };
  assert.equal(seen.reported, "handler failed");
  assert.equal(seen.kept, true, "the other hold is still watched");
  assert.equal(await r.exists("thrower-kept"), 0);
});
