// Holds and waits of many async workers while the server kills the
// client's connections at random (the keeper with the holds bound to it
// and the waits queued on it, the mailbox reader): acquire never answers a
// grant that `held` denies, at most a key's limit say `held` at once,
// fences rise in the order the holds began, and nothing is left held or
// queued at the end. Some sections outlive the ttl, held only through the
// client binding the lease again after each kill.

import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { GlideClusterClient, Logger } from "@valkey/valkey-glide";
import { Redis } from "ioredis";
import { Lock, Semaphore, glide } from "../src/index.js";
import { TestServer, sleep, useServer } from "./server.js";

Logger.setLoggerConfig("off");

let server: TestServer;
let r: Redis;
useServer((s, c) => {
  server = s;
  r = c;
});

const SECONDS = Number(process.env.PADLOCK_STORM_SECONDS ?? "5");
const LIMIT = 2;
const TTL = 500;
const cap = (key: string): number => (key === "s" ? LIMIT : 1);

/** A seeded generator (mulberry32): the same storm each run. */
function random(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Six workers on `client` while connections of `kinds` on `at` are
 * killed (`pubsub` too: a cluster's tracking connections); `r` reads. */
async function storm(at: TestServer, r: Redis, client: object, kinds: string[]): Promise<void> {
  const killer = at.ioredis();
  const me = String(await killer.call("CLIENT", "ID"));
  const mine = String(await r.call("CLIENT", "ID"));
  const problems: string[] = [];
  const inside: Record<string, Set<number>> = { a: new Set(), b: new Set(), s: new Set() };
  const lastFence: Record<string, bigint> = { a: 0n, b: 0n };
  const crowds: [string, number[]][] = [];
  const heldAtEnd = new Map<number, boolean>();
  let sections = 0;
  let kills = 0;
  const end = Date.now() + SECONDS * 1000;

  const storm = (async () => {
    const rng = random(7);
    while (Date.now() < end) {
      await sleep(20 + rng() * 100);
      const lists = await Promise.all(kinds.map((kind) => killer.call("CLIENT", "LIST", "TYPE", kind)));
      const ids = lists
        .map(String)
        .join("\n")
        .trim()
        .split("\n")
        .map((line) => /(?:^| )id=(\d+)/.exec(line)?.[1] ?? "")
        .filter((id) => id !== "" && id !== me && id !== mine);
      if (ids.length === 0) continue;
      await killer.call("CLIENT", "KILL", "ID", ids[Math.floor(rng() * ids.length)] ?? "");
      kills++;
    }
  })();

  const worker = async (n: number) => {
    const rng = random(100 + n);
    while (Date.now() < end) {
      const key = ["a", "b", "s"][Math.floor(rng() * 3)] ?? "a";
      const hold = key === "s" ? new Semaphore(client, key, LIMIT, { ttl: TTL }) : new Lock(client, key, { ttl: TTL });
      let got: unknown;
      try {
        got = await hold.acquire({ timeout: 10_000 });
      } catch (e) {
        problems.push(`acquire ${key}: ${String(e)}`);
        continue;
      }
      if (got === null) {
        problems.push(`timed out on ${key}`);
        continue;
      }
      const at = ++sections;
      if (!hold.held) problems.push(`${key}: acquire answered a grant that held denies`);
      if (key !== "s") {
        const fence = BigInt(String(got));
        if (fence <= (lastFence[key] ?? 0n)) problems.push(`${key}: fence ${fence} after ${lastFence[key]}`);
        if (fence > (lastFence[key] ?? 0n)) lastFence[key] = fence;
      }
      const here = inside[key] ?? new Set<number>();
      here.add(at);
      if (here.size > cap(key)) crowds.push([key, [...here]]);
      await sleep(rng() < 0.1 ? TTL * (1.2 + rng() * 0.6) : rng() * 4);
      here.delete(at);
      heldAtEnd.set(at, hold.held);
      await hold.release().catch((e: unknown) => {
        if (hold.held) problems.push(`release ${key}: ${String(e)}`);
      });
    }
  };

  await Promise.all([storm, ...Array.from({ length: 6 }, (_, n) => worker(n))]);
  for (const [key, crowd] of crowds) {
    const still = crowd.filter((n) => heldAtEnd.get(n) !== false);
    if (still.length > cap(key)) problems.push(`${key}: ${still.length} said held at once`);
  }
  assert.deepEqual(problems.slice(0, 10), []);
  assert.ok(kills > 10, `the storm killed connections (${kills})`);
  assert.ok(sections > 20, `sections ${sections}`);
  const lost = [...heldAtEnd.values()].filter((h) => !h).length;
  console.log(`sections ${sections}, lost ${lost}, kills ${kills}`);
  const quiet = async () =>
    (await r.exists("a")) + (await r.exists("b")) + (await r.exists("s")) === 0 && /padlock_mailbox_waiters:0\r?\n/.test(String(await r.call("INFO", "padlock")));
  let settled = await quiet();
  for (let i = 0; i < 100 && !settled; i++) settled = (await sleep(50), await quiet());
  assert.ok(settled, "nothing left held or queued");
  killer.disconnect();
}

test("workers through a storm of killed connections", async () => {
  const client = server.ioredis();
  await storm(server, r, client, ["normal"]);
  client.disconnect();
});

describe("on glide's cluster client", () => {
  let node: TestServer;
  let admin: Redis;
  useServer((s, c) => {
    node = s;
    admin = c;
  }, true);

  test("workers through a storm that kills keepers, waits and tracking connections", async () => {
    const client = glide(GlideClusterClient, { addresses: [{ host: "127.0.0.1", port: node.port }] });
    await storm(node, admin, client, ["normal", "pubsub"]);
  });
});
