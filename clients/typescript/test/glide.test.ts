// valkey-glide as the driver: the kinds, a shared connection glide
// replaces on its own, and a cluster (GlideClusterClient, routing by key).
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { GlideClient, GlideClusterClient, Logger } from "@valkey/valkey-glide";
import { Redis } from "ioredis";
import { Lock, MultiLock, ReadWriteLock, Semaphore, glide, graph } from "../src/index.js";
import { TestServer, sleep, useServer } from "./server.js";

Logger.setLoggerConfig("off");

let server: TestServer;
let r: Redis;
useServer((s, c) => {
  server = s;
  r = c;
});

const on = (port: number) => glide(GlideClient, { addresses: [{ host: "127.0.0.1", port }] });

test("semaphore, multi-lock and read-write lock on glide", async () => {
  const client = on(server.port);
  const a = new Semaphore(client, "g-s", 3, { permits: 2, ttl: 5000 });
  const b = new Semaphore(client, "g-s", 3, { permits: 2, ttl: 5000 });
  assert.equal(await a.acquire(), 2);
  assert.equal(await b.acquire({ blocking: false }), null);
  // Longer than glide's own request timeout (250 ms): padlock's is used.
  setTimeout(() => void a.release(), 400);
  assert.equal(await b.acquire({ timeout: 5000 }), 2);
  await b.release();

  const m = new MultiLock(client, ["g-m1", "g-m2"], { ttl: 5000 });
  const fences = await m.acquire();
  assert.ok(fences !== null && fences.length === 2);
  assert.equal(await r.exists("g-m1", "g-m2"), 2);
  await m.release();
  assert.equal(await r.exists("g-m1", "g-m2"), 0);

  const rw = new ReadWriteLock(client, "g-rw", { ttl: 5000 });
  const other = new ReadWriteLock(client, "g-rw", { ttl: 5000 });
  await rw.read().acquire();
  await other.read().acquire();
  assert.equal(await other.write().acquire({ blocking: false }), null, "another reader holds it");
  await rw.read().release();
  assert.ok((await other.write().acquire({ timeout: 1000 })) !== null, "the last reader upgrades");
  await other.write().release();
  await other.read().release();
  assert.equal(await r.exists("g-rw"), 0);
  assert.deepEqual(await graph(client), []);
});

test("a shared connection glide replaces on its own is bound again", async () => {
  const client = on(server.port);
  const lock = new Lock(client, "g-keep", { ttl: 600 });
  await lock.acquire();
  const info = async () => (await r.call("LOCK.INFO", "g-keep")) as unknown[] | null;
  const keep = async () => {
    const raw = await info();
    return raw === null ? undefined : Number(raw[raw.indexOf("keep") + 1]);
  };
  assert.equal(await keep(), 1);
  // Glide reconnects by itself, silently: the binding ends with the old
  // connection, and the watcher sees the lease run down.
  const list = String(await r.call("CLIENT", "LIST"));
  const ours = String(await r.call("CLIENT", "ID"));
  for (const line of list.split("\n")) {
    const id = /^id=(\d+) /.exec(line)?.[1];
    if (id !== undefined && id !== ours) await r.call("CLIENT", "KILL", "ID", id);
  }
  await sleep(1500);
  assert.ok(lock.held, "still held after more than two ttls");
  assert.equal(await keep(), 1, "bound again");
  await lock.release();
  assert.equal(await r.exists("g-keep"), 0);
});

test("an aborted wait on glide is dropped at once, never granted later", async () => {
  const client = on(server.port);
  const a = new Lock(client, "g-abort", { ttl: 5000 });
  await a.acquire();
  const b = new Lock(client, "g-abort", { ttl: 5000 });
  const stop = new AbortController();
  const waiting = b.acquire({ signal: stop.signal });
  const waiters = async () => {
    const raw = (await r.call("LOCK.INFO", "g-abort")) as unknown[] | null;
    return raw === null ? 0 : Number(raw[raw.indexOf("waiters") + 1]);
  };
  for (let i = 0; i < 100 && (await waiters()) === 0; i++) await sleep(10);
  assert.equal(await waiters(), 1);
  stop.abort();
  await assert.rejects(waiting);
  // Glide would close the socket a second or more later; the kill ends the
  // wait now, so the release frees the key instead of granting it.
  for (let i = 0; i < 100 && (await waiters()) !== 0; i++) await sleep(10);
  await a.release();
  await sleep(100);
  assert.equal(await r.exists("g-abort"), 0);
});

describe("glide on a cluster", () => {
  let node: TestServer;
  let admin: Redis;
  useServer((s, c) => {
    node = s;
    admin = c;
  }, true);

  test("every kind routes by its key", async () => {
    const client = glide(GlideClusterClient, { addresses: [{ host: "127.0.0.1", port: node.port }] });
    const lock = new Lock(client, "c-lock", { ttl: 5000 });
    const f = await lock.acquire();
    assert.ok(f !== null && f > 0n);
    assert.equal(await lock.acquire(), f, "reentry");
    await lock.release();
    await lock.release();
    const m = new MultiLock(client, ["{c}1", "{c}2"], { ttl: 5000 });
    assert.equal((await m.acquire())?.length, 2);
    await m.release();
    const s = new Semaphore(client, "c-sem", 2, { ttl: 5000 });
    assert.equal(await s.acquire(), 1);
    await s.release();
    for (const k of ["c-lock", "{c}1", "{c}2", "c-sem"]) assert.equal(await admin.exists(k), 0, k);
  });
});
