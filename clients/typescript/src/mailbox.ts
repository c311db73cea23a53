// Waiting without a connection per wait (the server's `MAILBOX`): a wait is
// queued on the client's shared connection (the keeper) and answers at once
// — its grant, or `WAITING` — and its outcome is appended later to the
// process's mailbox, a list that one connection per client reads with
// `BLMPOP` for every wait and every kept hold: a grant, a timeout (`nil`),
// an error, or a hold's loss (`-LOST <why>`). Ten thousand waits are one
// connection for commands and one for the mailbox.

import { randomBytes } from "node:crypto";
import type { Arg, Backend, Conn } from "./backend.js";
import { PadlockError, translate } from "./errors.js";
import { isServerError } from "./retry.js";
import { type Keeper, now, within } from "./shared.js";
import { routeKey, slotBox } from "./slots.js";
import { type RespConn, type Resp, invalidated, isPong } from "./tracking.js";

/** An error the server mailed as a wait's outcome (`-` and its line). */
export class MailedError extends PadlockError {
  override name = "ReplyError";
}

/** A hold that hears its loss from the mailbox. */
export interface Listener {
  heardLost(why: string): void;
}

interface Slot {
  outcome?: string;
  wake(): void;
}

/** The longest one command of a mailbox wait may take (ms), and how much
 * later than its BLOCK timeout its outcome may be mailed at most. */
const TIMEOUT = 5000;
/** How many mailed elements one read takes at most: fewer means it found the mailbox empty. */
const DRAIN = 100;

/** The elements of a `BLMPOP`/`LMPOP` reply: `[key, [element ...]]`, or
 * glide's `[{ key, value: [element ...] }]`, or none. */
function popped(got: unknown[] | null): unknown[] {
  if (!got || got.length === 0) return [];
  const first = got[0];
  if (typeof first === "object" && first !== null && "value" in first) {
    return got.flatMap((r) => (r as { value: unknown[] }).value);
  }
  return got[1] as unknown[];
}

/** How long one `BLMPOP` waits at most (ms). */
const POLL = 1000;

/** One client's mailbox and the connection that reads it. */
export class Mailman {
  readonly mailbox = `padlock:mailbox:${randomBytes(16).toString("hex")}`;
  private readonly slots = new Map<string, Slot>();
  private readonly watched = new Map<string, WeakRef<Listener>>();
  private running = false;
  /** Bumped when the mailbox connection failed (the waits are sent again). */
  epoch = 0;
  /** How long one `BLMPOP` waits: half the shortest interval watched. */
  private poll = POLL;
  /** The send time of the latest read that found the mailbox empty: every
   * loss posted before it has been handed to its hold. */
  private clearAt = -Infinity;

  /** In a cluster (a glide node's backend): a mailbox per slot, those
   * named so far, heard of through tracking; when the latest PING went. */
  private readonly cluster: boolean;
  private readonly boxes = new Set<string>();
  private pinged = -Infinity;

  constructor(
    private readonly backend: Backend,
    readonly keeper: Keeper,
  ) {
    this.cluster = backend.cluster === true && backend.tracking !== undefined;
  }

  /** The mailbox of a request on `key`: the process's, or in a cluster
   * that of the key's slot. */
  box(key: string): string {
    if (!this.cluster) return this.mailbox;
    const name = slotBox(`${this.mailbox}:`, key);
    this.boxes.add(name);
    return name;
  }

  /** Since when the holds bound to the keeper with this mailbox are known
   * to live: their binding was there when the keeper last answered, and no
   * loss was posted before the mailbox was last read empty. */
  fresh(): number {
    return Math.min(this.keeper.aliveAt, this.clearAt);
  }

  register(rid: string, wake: () => void): Slot {
    const slot: Slot = { wake };
    this.slots.set(rid, slot);
    this.start();
    return slot;
  }

  forget(rid: string): void {
    this.slots.delete(rid);
  }

  /** Hands a `-LOST` for `rid` to `hold`; the mailbox is read at least
   * twice per `interval` ms. */
  watch(rid: string, hold: Listener, interval: number): void {
    this.watched.set(rid, new WeakRef(hold));
    this.poll = Math.min(this.poll, Math.max(20, interval / 2));
    this.start();
  }

  unwatch(rids: string[]): void {
    for (const rid of rids) this.watched.delete(rid);
  }

  private start(): void {
    if (this.running) return;
    this.running = true;
    void this.run().finally(() => {
      this.running = false;
      if (this.slots.size > 0 || this.watched.size > 0) this.start();
    });
  }

  private deliver(element: unknown): void {
    const text = String(element);
    const at = text.indexOf(" ");
    const rid = at < 0 ? text : text.slice(0, at);
    const outcome = at < 0 ? "" : text.slice(at + 1);
    const slot = this.slots.get(rid);
    if (slot !== undefined) {
      slot.outcome = outcome;
      slot.wake();
      return;
    }
    const ref = this.watched.get(rid);
    const hold = ref?.deref();
    if (ref !== undefined && hold === undefined) this.watched.delete(rid);
    if (hold !== undefined && outcome.startsWith("-LOST")) hold.heardLost(outcome.slice(1));
  }

  private prune(): void {
    for (const [rid, ref] of this.watched) if (ref.deref() === undefined) this.watched.delete(rid);
  }

  private async run(): Promise<void> {
    if (this.cluster) return this.runTracking();
    let conn: Conn | undefined;
    try {
      for (;;) {
        this.prune();
        if (this.slots.size === 0 && this.watched.size === 0) return;
        try {
          conn ??= await within(this.backend.open(true), TIMEOUT);
          const poll = this.poll;
          // Up to DRAIN at a time: fewer means the mailbox is empty now, so
          // a burst needs no extra read.
          let command: Arg[] = ["BLMPOP", poll / 1000, 1, this.mailbox, "LEFT", "COUNT", DRAIN];
          let sent: number;
          for (;;) {
            sent = now();
            const got = (await within(conn.call(command), poll + TIMEOUT)) as unknown[] | null;
            // Timed out: empty until the server's timeout, which cannot come
            // before `poll` after the send.
            if (!got && command[0] === "BLMPOP") sent = Math.min(sent + poll, now());
            const elements = popped(got);
            for (const e of elements) this.deliver(e);
            if (elements.length < DRAIN) break;
            command = ["LMPOP", 1, this.mailbox, "LEFT", "COUNT", DRAIN];
          }
          this.clearAt = Math.max(this.clearAt, sent);
          if (this.keeper.aliveAt < now() - poll) await this.keeper.ping(TIMEOUT);
        } catch {
          const old = conn;
          conn = undefined;
          await old?.close().catch(() => undefined);
          await this.failed();
        }
      }
    } finally {
      await conn?.close().catch(() => undefined);
    }
  }

  /** The mailbox connection failed: the waits are told (they are sent
   * again), and the mailbox is read on a new connection. */
  private async failed(): Promise<void> {
    this.epoch++;
    for (const slot of this.slots.values()) slot.wake();
    await new Promise((resolve) => setTimeout(resolve, 50));
  }

  // -- in a cluster: writes to the slots' mailboxes heard through tracking --

  private async runTracking(): Promise<void> {
    let conn: RespConn | undefined;
    try {
      for (;;) {
        this.prune();
        if (this.slots.size === 0 && this.watched.size === 0) return;
        try {
          if (conn === undefined) {
            conn = await (this.backend.tracking as (limit: number) => Promise<RespConn>)(TIMEOUT);
            await this.subscribe(conn);
          }
          await this.hear(conn, this.poll);
        } catch {
          conn?.close();
          conn = undefined;
          await this.failed();
        }
      }
    } finally {
      conn?.close();
    }
  }

  /** Tracks every mailbox of this process on `conn` itself, then drains
   * those named so far: a post made before the subscription took is popped
   * now, any later one is heard of. */
  private async subscribe(conn: RespConn): Promise<void> {
    const id = await conn.command(["CLIENT", "ID"], TIMEOUT);
    await conn.command(["CLIENT", "TRACKING", "ON", "REDIRECT", String(id), "BCAST", "PREFIX", `${this.mailbox}:`], TIMEOUT);
    const sent = now();
    await conn.command(["SUBSCRIBE", "__redis__:invalidate"], TIMEOUT);
    for (const box of [...this.boxes]) await this.drain(box);
    this.clearAt = Math.max(this.clearAt, sent);
    this.pinged = sent;
  }

  /** Hands on what the mailboxes named by invalidations hold, and pings
   * `conn` once per `poll`: its PONG comes after the invalidations of every
   * post made before the previous PING was served (they go out at the end
   * of that event-loop turn), so all of those were handed on. */
  private async hear(conn: RespConn, poll: number): Promise<void> {
    const wait = this.pinged + poll - now();
    if (wait > 0) {
      const message = await conn.next(wait);
      if (message !== undefined) await this.notice(message);
      return;
    }
    const sent = now();
    conn.send(["PING"]);
    for (;;) {
      const message = await conn.next(TIMEOUT);
      if (message === undefined) throw new Error("no PONG within the timeout");
      if (isPong(message)) break;
      await this.notice(message);
    }
    this.clearAt = Math.max(this.clearAt, this.pinged);
    this.pinged = sent;
    if (this.keeper.aliveAt < now() - poll) await this.keeper.ping(TIMEOUT);
  }

  private async notice(message: Resp): Promise<void> {
    const keys = invalidated(message);
    const named = keys === undefined ? [...this.boxes] : keys.filter((k) => this.boxes.has(k));
    for (const box of named) await this.drain(box);
  }

  /** Pops `box` on the keeper until it is empty. */
  private async drain(box: string): Promise<void> {
    for (;;) {
      const { reply } = await this.keeper.call(async (conn) => {
        try {
          return await within(conn.call(["LMPOP", 1, box, "LEFT", "COUNT", DRAIN]), TIMEOUT);
        } catch (e) {
          // A failed or silent keeper is replaced (see `HoldCore.onKeeper`).
          if (!isServerError(translate(e))) await this.keeper.reset();
          throw e;
        }
      }, TIMEOUT);
      const elements = popped(reply as unknown[] | null);
      for (const e of elements) this.deliver(e);
      if (elements.length < DRAIN) return;
    }
  }
}

const mailmen = new WeakMap<Keeper, Mailman>();

export function mailmanOf(keeper: Keeper, backend: Backend): Mailman {
  let m = mailmen.get(keeper);
  if (m === undefined) {
    m = new Mailman(backend, keeper);
    mailmen.set(keeper, m);
  }
  return m;
}

/** A mailed reply as the blocked form would have given it. */
export function parseOutcome(outcome: string): unknown {
  if (outcome === "nil") return null;
  if (outcome.startsWith("-")) throw new MailedError(outcome.slice(1));
  return outcome.includes(",") ? outcome.split(",") : outcome;
}

const isWaiting = (reply: unknown): boolean => String(reply) === "WAITING";

/** The wait's reply, and the keeper's epoch when it was granted at once
 * (a `KEEP` grant is bound there, with the mailbox). */
export interface Waited {
  reply: unknown;
  epoch?: number;
}

/** A wait through the mailbox: queued on the keeper, its outcome mailed.
 * Either connection replaced meanwhile is a connection error (the caller
 * sends the request again with the same id: queued again, or answered with
 * its grant). An abort takes the wait back (`LOCK.CANCEL`), and a grant
 * that raced it is released (`giveBack`). */
export async function mailWait(
  m: Mailman,
  send: (args: Arg[]) => Promise<{ reply: unknown; epoch: number }>,
  given: Arg[],
  giveBack: Arg[],
  signal?: AbortSignal,
): Promise<Waited> {
  const k = m.keeper;
  const args = [...given];
  const rid = String(args[args.indexOf("ID") + 1]);
  const at = args.indexOf("BLOCK");
  const ms = Number(args[at + 1]);
  args.splice(at + 2, 0, "MAILBOX", m.box(routeKey(args) ?? ""));
  let wake: () => void = () => undefined;
  const slot = m.register(rid, () => wake());
  try {
    const epochs = [k.epoch, m.epoch];
    const { reply, epoch } = await send(args);
    if (!isWaiting(reply)) return { reply, epoch };
    const end = ms === 0 ? Infinity : now() + ms + TIMEOUT;
    for (;;) {
      if (signal?.aborted) throw signal.reason ?? new Error("aborted");
      if (slot.outcome !== undefined) return { reply: parseOutcome(slot.outcome) };
      if (k.epoch !== epochs[0] || m.epoch !== epochs[1] || epoch !== k.epoch) {
        throw new Error("a mailbox wait's connection was replaced");
      }
      const left = end - now();
      if (left <= 0) throw new Error(`no outcome of ${String(args[0])} within ${ms} ms`);
      await new Promise<void>((resolve) => {
        const done = (): void => {
          clearTimeout(timer);
          signal?.removeEventListener("abort", done);
          wake = () => undefined;
          resolve();
        };
        const timer = setTimeout(done, Math.min(left, POLL));
        signal?.addEventListener("abort", done, { once: true });
        wake = done;
      });
    }
  } catch (e) {
    if (signal?.aborted) await takeBack(send, args, rid, giveBack);
    throw e;
  } finally {
    m.forget(rid);
  }
}

/** The caller stopped waiting: the request leaves its queue, and a grant
 * it already had is given back. */
async function takeBack(
  send: (args: Arg[]) => Promise<{ reply: unknown; epoch: number }>,
  args: Arg[],
  rid: string,
  giveBack: Arg[],
): Promise<void> {
  const multi = String(args[0]).toUpperCase() === "LOCK.MACQUIRE";
  const key = multi ? args[2] : args[1];
  const holder = multi ? args[2 + Number(args[1])] : args[2];
  try {
    if (String((await send(["LOCK.CANCEL", key, holder, rid])).reply) === "1") return;
    const at = args.indexOf("BLOCK");
    const probe = [...args.slice(0, at + 1), 1, ...args.slice(at + 2)];
    const got = (await send(probe)).reply;
    if (got !== null && got !== undefined && !isWaiting(got)) await send(giveBack);
  } catch {
    process.emitWarning(`padlock: could not take back an abandoned wait on ${String(key)}`);
  }
}
