// A caller waiting when its key's slot starts to move (an atomic slot
// migration: Redis 8.4+ or Valkey 9+, named by PADLOCK_ASM_SERVER) is told
// to wait again, follows the slot to its new owner (`-MOVED`), queues
// there and is granted there. On valkey-glide's cluster client.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { GlideClusterClient, Logger } from "@valkey/valkey-glide";
import { Redis } from "ioredis";
import { Lock, glide } from "../src/index.js";
import { keySlot } from "../src/slots.js";
import { TestServer, sleep, threeMasters } from "./server.js";

Logger.setLoggerConfig("off");

const ASM = process.env.PADLOCK_ASM_SERVER;

describe("a wait through an atomic slot migration", { skip: ASM === undefined && "PADLOCK_ASM_SERVER is not set" }, () => {
  const nodes: TestServer[] = [];
  const admins: Redis[] = [];
  before(async () => {
    const made = await threeMasters(ASM);
    nodes.push(...made.nodes);
    admins.push(...made.admins);
  });
  after(async () => {
    for (const a of admins) a.disconnect();
    for (const n of nodes) await n.stop();
  });

  const until = async (what: string, ok: () => Promise<boolean>, ms: number): Promise<void> => {
    for (const end = Date.now() + ms; Date.now() < end; await sleep(25)) {
      if (await ok().catch(() => false)) return;
    }
    assert.fail(`not within ${ms} ms: ${what}`);
  };
  const waiters = async (a: Redis, key: string): Promise<number> => {
    const raw = (await a.call("LOCK.INFO", key)) as string[] | null;
    return raw === null ? 0 : Number(raw[raw.indexOf("waiters") + 1]);
  };

  test("the caller is granted on the new owner", async () => {
    const key = "{asm-ts}k";
    const slot = keySlot(key);
    const from = Math.min(2, Math.floor(slot / 5462));
    const [src, dst] = [admins[from], admins[(from + 1) % 3]];
    const fill = src.pipeline();
    for (let i = 0; i < 50_000; i++) fill.set(`{asm-ts}fill:${i}`, "xxxxxxxxxxxxxxxxxxxx");
    await fill.exec();
    await src.call("LOCK.ACQUIRE", key, "a", "60000");
    const client = glide(GlideClusterClient, { addresses: [{ host: "127.0.0.1", port: nodes[0].port }] });
    const lock = new Lock(client, key, { ttl: 30_000 });
    const granted = lock.acquire({ timeout: 25_000 });
    granted.catch(() => undefined); // awaited below
    await until("the caller waits on the source", async () => (await waiters(src, key)) === 1, 10_000);
    if (String(await src.call("INFO", "server")).includes("valkey_version")) {
      const id = String(await dst.call("CLUSTER", "MYID"));
      await src.call("CLUSTER", "MIGRATESLOTS", "SLOTSRANGE", String(slot), String(slot), "NODE", id);
    } else {
      await dst.call("CLUSTER", "MIGRATION", "IMPORT", String(slot), String(slot));
    }
    await until("the slot moved", async () => (await dst.exists(key)) === 1 && (await src.dbsize()) === 0, 30_000);
    await until("the caller queued on the new owner", async () => (await waiters(dst, key)) === 1, 10_000);
    await dst.call("LOCK.RELEASE", key, "a");
    const fence = await granted;
    assert.notEqual(fence, null, "granted there");
    await lock.release();
    assert.equal(await dst.exists(key), 0, "and released there");
  });
});
