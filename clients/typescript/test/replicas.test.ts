// `replicas`: grants that wait for replicas, against a real replica (a
// stopped one stands for a replica cut off or lagging).

import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { Redis } from "ioredis";
import { Lock, NotAcquiredError, Semaphore } from "../src/index.js";
import { TestServer, sleep } from "./server.js";

let master: TestServer;
let replica: TestServer;
let r: Redis;
let rr: Redis;

before(async () => {
  master = await TestServer.start(["--repl-diskless-sync-delay", "0"]);
  replica = await TestServer.start(["--replicaof", "127.0.0.1", String(master.port)]);
  r = master.ioredis();
  rr = replica.ioredis();
  // Streaming starts at the replica's first ACK: a write seen there first.
  for (const end = Date.now() + 15_000; Date.now() < end; await sleep(50)) {
    await r.set("probe", "1");
    if (Number(await r.call("WAIT", 1, 200)) === 1) break;
  }
  await r.del("probe");
});

after(async () => {
  await replica.stop();
  await master.stop();
});

const warnings: string[] = [];
process.on("warning", (w) => warnings.push(w.message));

test("a grant is reported once the replica has it", async () => {
  const lock = new Lock(r, "job", { ttl: 5000, replicas: 1 });
  assert.ok((await lock.acquire()) !== null);
  assert.equal(await rr.exists("job"), 1);
  await lock.release();
});

test("a mailed grant is on the replica when it is reported", async () => {
  const first = new Lock(r, "hot", { ttl: 5000, holder: "first" });
  await first.acquire();
  const second = new Lock(r, "hot", { ttl: 5000, holder: "second", replicas: 1 });
  const granted = second.acquire({ timeout: 5000 });
  await sleep(100);
  await first.release();
  assert.ok((await granted) !== null);
  const info = (await rr.call("LOCK.INFO", "hot")) as string[];
  assert.equal(info[info.indexOf("holder") + 1], "second");
  await second.release();
});

test("a replica that does not answer makes the grant fail, or warn", async () => {
  replica.signal("SIGSTOP");
  try {
    const lock = new Lock(r, "job", { ttl: 5000, replicas: { count: 1, timeout: 200 } });
    assert.equal(await lock.acquire({ timeout: 1000 }), null);
    assert.equal(await r.exists("job"), 0, "the grant short of its replica is given back");
    assert.equal(lock.held, false);
    await assert.rejects(
      new Lock(r, "job", { ttl: 5000, blockingTimeout: 1000, replicas: { timeout: 200 } }).using(async () => 1),
      NotAcquiredError,
    );
    await sleep(10);
    assert.ok(warnings.some((w) => w.includes("0 of 1 replicas") && w.includes("released")));
    const sem = new Semaphore(r, "pool", 2, { ttl: 5000, replicas: { timeout: 200, onShortfall: "warn" } });
    assert.ok(await sem.acquire());
    assert.equal(await r.exists("pool"), 1, "warn keeps the hold");
    await sem.release();
    await sleep(10);
    assert.ok(warnings.some((w) => w.startsWith("release of pool")), "a release short of its replica warns");
  } finally {
    replica.signal("SIGCONT");
  }
});

test("bad replicas options are refused", () => {
  assert.throws(() => new Lock(r, "x", { replicas: { count: 0 } }), /count/);
  assert.throws(() => new Lock(r, "x", { replicas: { timeout: 0 } }), /timeout/);
  assert.throws(() => new Lock(r, "x", { replicas: { onShortfall: "ignore" as "warn" } }), /onShortfall/);
});
