// Lost replies, half-open connections, a key replaced by another type, an
// abandoned wait (docs/commands.md, "Retries"): through scripts/faultproxy.py, with
// ioredis, node-redis and valkey-glide.
import { afterEach, beforeEach, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { Redis } from "ioredis";
import { createClient } from "@redis/client";
import { GlideClient, Logger } from "@valkey/valkey-glide";
import { Lock, NotHeldError, ReadWriteLock, Semaphore, glide } from "../src/index.js";
import { FaultProxy } from "./proxy.js";
import { TestServer, sleep, useServer } from "./server.js";


let server: TestServer;
let r: Redis;
let proxy: FaultProxy;
useServer((s, c) => {
  server = s;
  r = c;
});
beforeEach(async () => {
  proxy = await FaultProxy.start(server.port);
  await r.flushall();
});
afterEach(() => proxy.stop());

async function count(key: string): Promise<number> {
  const raw = (await r.call("LOCK.INFO", key)) as unknown[] | null;
  if (raw === null) return 0;
  return Number(raw[raw.indexOf("count") + 1]);
}

Logger.setLoggerConfig("off");

async function via(flavour: string): Promise<{ client: object; close: () => Promise<void> }> {
  if (flavour === "glide") {
    // Glide's client would reconnect through the proxy by itself; padlock's
    // own connections come from the configuration.
    const client = glide(GlideClient, { addresses: [{ host: "127.0.0.1", port: proxy.port }] });
    return { client, close: async () => undefined };
  }
  if (flavour === "ioredis") {
    // As an application may make it: no offline queue.
    const c = new Redis({ port: proxy.port, host: "127.0.0.1", enableOfflineQueue: false });
    await new Promise((ok) => c.once("ready", ok));
    return { client: c, close: async () => c.disconnect() };
  }
  const c = createClient({ socket: { port: proxy.port, host: "127.0.0.1" } });
  await c.connect();
  return { client: c, close: () => c.close() };
}

describe("ioredis' own resend", () => {
  test("without ID it doubles a reentry; with ID it applies once", async () => {
    const c = new Redis({ port: proxy.port, host: "127.0.0.1" });
    await proxy.drop("LOCK.ACQUIRE");
    await c.call("LOCK.ACQUIRE", "plain", "h", 60000);
    assert.equal(await count("plain"), 2);
    await proxy.drop("LOCK.ACQUIRE");
    await c.call("LOCK.ACQUIRE", "with-id", "h", 60000, "ID", "r1");
    assert.equal(await count("with-id"), 1);
    assert.equal(await proxy.dropped(), 2);
    c.disconnect();
  });
});

for (const flavour of ["ioredis", "node-redis", "glide"]) {
  describe(`holds on ${flavour} through lost replies`, () => {
    test("a lost acquire reply and a lost inner release reply", async () => {
      const { client, close } = await via(flavour);
      const lock = new Lock(client, "k", { ttl: 5000 });
      await proxy.drop("LOCK.ACQUIRE");
      const fence = await lock.acquire({ blocking: false });
      assert.ok(fence !== null);
      assert.equal(await count("k"), 1);
      await lock.acquire();
      await proxy.drop("LOCK.RELEASE");
      await lock.release();
      assert.equal(await count("k"), 1, "the outer hold stays");
      assert.ok(lock.held);
      await lock.release();
      assert.equal(await r.exists("k"), 0);
      assert.equal(await proxy.dropped(), 2);
      await close();
    });

    for (const lost of ["LOCK.ACQUIRE", "LOCK.EXTEND"]) {
      test(`a kept lease answered to a resend (${lost}) is bound again`, async () => {
        // The resend is answered from the server's memory of the first
        // sending, which bound the lease to the connection that closed: the
        // client binds it again on the new one, so the hold outlives its ttl.
        const { client, close } = await via(flavour);
        const lock = new Lock(client, "kept", { ttl: 600 });
        if (lost === "LOCK.EXTEND") await lock.acquire();
        await proxy.drop(lost);
        if (lost === "LOCK.ACQUIRE") assert.ok((await lock.acquire({ timeout: 5000 })) !== null);
        else assert.ok(await lock.renew());
        assert.equal(await proxy.dropped(), 1);
        await sleep(1500); // the first connection's binding would have run out
        const raw = (await r.call("LOCK.INFO", "kept")) as unknown[] | null;
        assert.equal(raw === null ? undefined : Number(raw[raw.indexOf("keep") + 1]), 1, "bound on the new connection");
        assert.ok(lock.held && !lock.lost);
        await lock.release();
        await close();
      });
    }

    test("permits and read holds are not doubled or leaked", async () => {
      const { client, close } = await via(flavour);
      const sem = new Semaphore(client, "s", 3, { permits: 1, ttl: 5000 });
      await proxy.drop("SEM.ACQUIRE");
      assert.equal(await sem.acquire({ blocking: false }), 1);
      await sem.release();
      assert.equal(await r.exists("s"), 0);
      const rw = new ReadWriteLock(client, "rw", { ttl: 2000 });
      await proxy.drop("RWLOCK.ACQUIRE");
      await rw.read().using(async () => undefined);
      assert.equal(await r.exists("rw"), 0);
      await close();
    });

    test("held never outlives the lease through a half-open connection", async () => {
      const { client, close } = await via(flavour);
      let lostCalled = false;
      const lock = new Lock(client, "k", { ttl: 900, keep: false, onLost: () => (lostCalled = true) });
      await lock.acquire();
      await proxy.blackhole();
      await sleep(950);
      assert.equal(lock.held, false);
      for (let i = 0; i < 100 && !lostCalled; i++) await sleep(20);
      assert.ok(lostCalled && lock.signal.aborted);
      await close();
    });

    test("a hold lost unanswered is released before its holder takes again", async () => {
      // Its renewals get no answer: reported lost while the server may
      // still count it. The holder's next take is a fresh hold (a new
      // fence), not a reentry of the lost one.
      const { client, close } = await via(flavour);
      const lock = new Lock(client, "k", { ttl: 2000, holder: "h" });
      const old = await lock.acquire();
      await proxy.blackhole();
      for (let i = 0; i < 250 && !lock.lost; i++) await sleep(20);
      assert.ok(lock.lost);
      assert.equal(await count("k"), 1);
      const direct = server.ioredis();
      const again = new Lock(direct, "k", { ttl: 5000, holder: "h" });
      const fence = await again.acquire({ blocking: false });
      assert.ok(fence !== null && old !== null && fence > old, `${old} then ${fence}`);
      assert.equal(await count("k"), 1);
      await again.release();
      assert.equal(await r.exists("k"), 0);
      direct.disconnect();
      await close();
    });
  });
}

test("a key replaced by another type is a loss, and renew/release say so", async () => {
  const c = server.ioredis();
  const lock = new Lock(c, "k", { ttl: 600 });
  await lock.acquire();
  await r.del("k");
  await r.set("k", "x");
  for (let i = 0; i < 100 && !lock.lost; i++) await sleep(20);
  assert.ok(lock.lost && !lock.held && lock.signal.aborted);
  assert.equal(await lock.renew(), false);
  await assert.rejects(lock.release(), NotHeldError);
  c.disconnect();
});

test("renew of a lock not held answers false without asking", async () => {
  const lock = new Lock(r, "idle", { ttl: 1000 });
  assert.equal(await lock.renew(), false);
  await assert.rejects(lock.release(), NotHeldError);
});

test("an AbortSignal cancels a pending server-side wait", async () => {
  await r.call("LOCK.ACQUIRE", "busy", "owner", 60000);
  const c = server.ioredis();
  const lock = new Lock(c, "busy", { ttl: 5000 });
  const ac = new AbortController();
  const pending = lock.acquire({ signal: ac.signal });
  for (let i = 0; i < 100; i++) {
    const info = (await r.call("LOCK.INFO", "busy")) as unknown[];
    if (Number(info[info.indexOf("waiters") + 1]) === 1) break;
    await sleep(10);
  }
  ac.abort(new Error("the caller gave up"));
  await assert.rejects(pending, /the caller gave up/);
  let waiters = -1;
  for (let i = 0; i < 100 && waiters !== 0; i++) {
    const info = (await r.call("LOCK.INFO", "busy")) as unknown[];
    waiters = Number(info[info.indexOf("waiters") + 1]);
    await sleep(10);
  }
  assert.equal(waiters, 0, "the server dropped the wait");
  await r.call("LOCK.RELEASE", "busy", "owner");
  assert.equal(await r.exists("busy"), 0, "and never granted it");
  c.disconnect();
});

test("a process whose hold was lost exits on its own", async () => {
  const index = join(resolve(dirname(fileURLToPath(import.meta.url)), ".."), "src/index.js");
  const script = `
    import { Redis } from "ioredis";
    import { Lock } from ${JSON.stringify(index)};
    const c = new Redis({ port: ${server.port}, host: "127.0.0.1" });
    const lock = new Lock(c, "exit-k", { ttl: 600 });
    await lock.acquire();
    await c.del("exit-k");
    c.disconnect();
  `;
  const child = spawn(process.execPath, ["--input-type=module", "-e", script], {
    stdio: "inherit",
    cwd: resolve(dirname(fileURLToPath(import.meta.url)), "../.."),
  });
  const code = await Promise.race([
    new Promise<number | null>((ok) => child.once("exit", ok)),
    sleep(8000).then(() => "hung"),
  ]);
  if (code === "hung") child.kill();
  assert.equal(code, 0);
});
