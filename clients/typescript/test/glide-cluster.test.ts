// Issue 39 on valkey-glide's cluster client: waits and losses go through a
// mailbox per slot, heard of through client tracking on one connection per
// node beside a standalone glide keeper per node. Three masters, keys of
// many slots on each: at most two connections of padlock's per node.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { GlideClusterClient, Logger } from "@valkey/valkey-glide";
import { Redis } from "ioredis";
import { Lock, glide } from "../src/index.js";
import { keySlot, slotBox } from "../src/slots.js";
import { CLUSTER, TestServer, ownAllSlots, sleep, threeMasters } from "./server.js";

Logger.setLoggerConfig("off");

const KEYS = Array.from({ length: 30 }, (_, i) => `gmail:${i}`);

describe("glide cluster mailboxes", () => {
  const nodes: TestServer[] = [];
  const admins: Redis[] = [];
  before(async () => {
    const made = await threeMasters();
    nodes.push(...made.nodes);
    admins.push(...made.admins);
  });
  after(async () => {
    for (const a of admins) a.disconnect();
    for (const n of nodes) await n.stop();
  });

  const owner = (key: string): Redis => admins[Math.min(2, Math.floor(keySlot(key) / 5462))];
  const waiting = async (): Promise<number> => {
    let total = 0;
    for (const k of KEYS) {
      const raw = (await owner(k).call("LOCK.INFO", k)) as string[] | null;
      if (raw === null) continue;
      const at = raw.indexOf("waiters");
      total += Number(raw[at + 1]);
    }
    return total;
  };
  const conns = async (): Promise<number[]> =>
    Promise.all(admins.map(async (a) => String(await a.call("CLIENT", "LIST")).trim().split("\n").length));
  const served = async (name: string): Promise<number> => {
    let total = 0;
    for (const a of admins) {
      const m = new RegExp(`cmdstat_${name}:calls=(\\d+)`).exec(String(await a.call("INFO", "commandstats")));
      total += m === null ? 0 : Number(m[1]);
    }
    return total;
  };

  test("slot mailboxes share their keys' slots", () => {
    assert.equal(new Set(KEYS.map(keySlot)).size, KEYS.length);
    for (const k of [...KEYS, "{job}:1", "a{}b", "a{b"]) assert.equal(keySlot(slotBox("padlock:mailbox:p:", k)), keySlot(k), k);
    assert.equal(keySlot("{user1000}.following"), keySlot("{user1000}.followers"));
    assert.equal(keySlot("123456789"), 12739, "CRC16 XMODEM as the cluster spec gives it");
  });

  test("waits on many slots and nodes share two connections per node; losses are mailed", async () => {
    assert.equal(new Set(KEYS.map(owner)).size, 3, "keys on every node");
    const client = glide(GlideClusterClient, { addresses: [{ host: "127.0.0.1", port: nodes[0].port }] });
    // The slot map is fetched on a glide cluster client of its own, closed
    // at once; glide's sockets go a second or more after `close()`.
    const first = new Lock(client, KEYS[0], { ttl: 5000 });
    assert.notEqual(await first.acquire({ blocking: false }), null);
    await first.release();
    await sleep(2500);
    const base = await conns();
    const holders = KEYS.map((k) => new Lock(client, k, { ttl: 5000, holder: "owner" }));
    for (const h of holders) assert.notEqual(await h.acquire({ blocking: false }), null);
    const waits = Array.from({ length: 150 }, async (_, i) => {
      const lock = new Lock(client, KEYS[i % KEYS.length], { ttl: 5000 });
      const f = await lock.acquire({ timeout: 20_000 });
      assert.notEqual(f, null);
      await lock.release();
      return f;
    });
    for (let i = 0; i < 600 && (await waiting()) < 150; i++) await sleep(25);
    assert.equal(await waiting(), 150);
    const extra = (await conns()).map((n, i) => n - base[i]);
    assert.ok(extra.every((e) => e <= 2), `a keeper and a tracking connection per node: ${extra}`);
    const other = new Lock(client, KEYS[0], { ttl: 5000, holder: "other" });
    assert.equal(await other.acquire({ timeout: 200 }), null, "a timeout is mailed too");
    for (const h of holders) await h.release();
    assert.equal((await Promise.all(waits)).length, 150);
    assert.ok((await served("lmpop")) > 0);
    assert.equal(await served("blmpop"), 0);
    // A hold's loss arrives from its slot's mailbox, with no reads.
    const lost = new Lock(client, KEYS[7], { ttl: 6000 });
    assert.notEqual(await lost.acquire(), null);
    await sleep(300);
    for (const a of admins) await a.call("CONFIG", "RESETSTAT");
    await owner(KEYS[7]).del(KEYS[7]);
    for (let i = 0; i < 60 && !lost.lost; i++) await sleep(25);
    assert.ok(lost.lost && !lost.held, "the loss was mailed and heard");
    assert.equal(await served("lock.info"), 0);
    // A glide keeper no hold uses is closed (glide's sockets cannot stop
    // keeping the process alive), and glide closes a socket a second or
    // more after `close()`: the next hold's keeper may meet the old one.
    let after = (await conns()).map((n, i) => n - base[i]);
    for (let i = 0; i < 120 && !after.every((e) => e <= 2); i++) {
      await sleep(25);
      after = (await conns()).map((n, i) => n - base[i]);
    }
    assert.ok(after.every((e) => e <= 2), `still two per node at most: ${after}`);
  });
});

describe("glide cluster, a fresh client asked at once", () => {
  test("many holds starting together fetch the slot map once and make one keeper per node", async () => {
    const node = await TestServer.start(CLUSTER);
    const admin = node.ioredis();
    try {
      await ownAllSlots(admin);
      await sleep(500);
      await admin.call("CONFIG", "RESETSTAT");
      const client = glide(GlideClusterClient, { addresses: [{ host: "127.0.0.1", port: node.port }] });
      const locks = Array.from({ length: 200 }, (_, i) => new Lock(client, `once:${i}`, { ttl: 5000 }));
      const fences = await Promise.all(locks.map((l) => l.acquire()));
      assert.ok(fences.every((f) => f !== null));
      const stats = String(await admin.call("INFO", "commandstats"));
      const slots = Number(/cmdstat_cluster\|slots:calls=(\d+)/.exec(stats)?.[1] ?? "0");
      // The fetch's own glide cluster client asks too, as it connects.
      assert.ok(slots <= 3, `one fetch for 200 holds, not ${slots} CLUSTER SLOTS`);
      const ids = /cmdstat_client\|id:calls=(\d+)/.exec(stats)?.[1];
      assert.ok(Number(ids ?? "0") <= 3, `one keeper (one CLIENT ID) for the node, not ${ids}`);
      await Promise.all(locks.map((l) => l.release()));
    } finally {
      await node.stop();
    }
  });
});

describe("glide cluster mailboxes over TLS", () => {
  test("the tracking connection follows glide's TLS and credentials", async (t) => {
    const node = await TestServer.startTls([...CLUSTER, "--tls-cluster", "yes"]);
    if (node === undefined || node.tls === undefined) return t.skip("no openssl to make certificates with");
    const admin = node.ioredis();
    try {
      await ownAllSlots(admin);
      const client = glide(GlideClusterClient, {
        addresses: [{ host: "127.0.0.1", port: node.port }],
        useTLS: true,
        credentials: { password: node.tls.password },
        advancedConfiguration: { tlsAdvancedConfiguration: { rootCertificates: node.tls.ca } },
      });
      const first = new Lock(client, "tls:k", { ttl: 5000, holder: "first" });
      assert.notEqual(await first.acquire(), null);
      const second = new Lock(client, "tls:k", { ttl: 5000, holder: "second" });
      const waiting = second.acquire({ timeout: 10_000 });
      for (let i = 0; i < 200 && !/padlock_mailbox_waiters:1\r?\n/.test(String(await admin.call("INFO", "padlock"))); i++) await sleep(25);
      await first.release();
      assert.notEqual(await waiting, null, "granted through the slot's mailbox");
      const stats = String(await admin.call("INFO", "commandstats"));
      assert.ok(stats.includes("cmdstat_subscribe") && stats.includes("cmdstat_lmpop"), "heard through tracking, over TLS");
      await second.release();
    } finally {
      await node.stop();
    }
  });
});
