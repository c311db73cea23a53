// The life of one hold up to its watching, whatever its kind: acquire
// (waiting server-side through the mailbox or on a connection of its own,
// retrying a restart grace's -TRYAGAIN), the calls that carry it, release.
// Everything but a wait goes through the client's shared connection
// (`shared.ts`). `hold.ts` adds the rounds and the loss.

import { type Arg, type Backend, type Client, backendOf } from "./backend.js";
import { NotHeldError, errorText, isMoved, isTryAgain, translate } from "./errors.js";
import { MAX_MOVES, Verdict, isServerError, isUnknownOption, lostMessage, pause, requestId, verdict, withId } from "./retry.js";
import { currentHolder, gave, hasLeftovers, leftOver, newHolder, took } from "./holders.js";
import type { Hold, HoldOptions, AcquireOptions } from "./hold.js";
import { type Keeper, collected, exchange, keeperOf, now, scheduler } from "./shared.js";
import { type Mailman, mailWait, mailmanOf } from "./mailbox.js";

// Older Node versions lack the symbol `await using` looks up.
(Symbol as { asyncDispose?: symbol }).asyncDispose ??= Symbol.for("Symbol.asyncDispose");

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Whether an error says the server has no `MAILBOX` (an older build). */
export const noMailbox = (e: unknown): boolean => /MAILBOX|syntax/.test(errorText(e));

export abstract class HoldCore {
  /** Who holds: taken again at each fresh acquire (see `HoldOptions.holder`). */
  holder: string;
  readonly ttl: number;
  renews: boolean;
  readonly maxHold: number | undefined;
  keep: boolean;
  readonly blockingTimeout: number | undefined;
  readonly onLost: ((hold: Hold) => void) | undefined;
  /** True once the hold was found lost (until the next fresh acquire). */
  lost = false;
  protected depth = 0;
  /** The client's backend and keeper; in a cluster that routes node by
   * node (`Backend.nodeOf`), those of the key's node once `route` ran. */
  protected backend: Backend;
  /** The cluster's backend once `route` ran: routed again on `-MOVED`. */
  protected cluster: Backend | undefined;
  /** How the process's hold counts name this object (`took`, `gave`). */
  protected readonly self = new WeakRef<object>(this);
  protected keeper: Keeper;
  /** What the finalizer needs without the hold (see `collected`): the
   * keeper while a lease of this hold may be bound to it, and while this
   * hold counts as one of its users. */
  protected readonly box: { kept?: Keeper; user?: Keeper } = {};
  protected queue: Promise<unknown> = Promise.resolve();
  /** Rounds of the watching that started last (older ones stop). */
  protected gen = 0;
  protected watching = false;
  /** The round under way, if any (`stopRenewing` lets it end first). */
  protected round: Promise<boolean> | undefined;
  protected controller = new AbortController();
  protected ids = true;
  protected unsure = false;
  /** When the lease may run out at the earliest (monotonic ms). */
  protected leaseUntil = 0;
  protected heldSince = 0;
  /** The keeper's epoch the lease was bound (`KEEP`) on. */
  protected boundEpoch = -1;
  /** The mailbox waits and losses go through (none in a cluster, or once
   * the server turned `MAILBOX` down). */
  protected mailman: Mailman | undefined;
  /** The binding names the mailbox (`KEEP MAILBOX`): its loss is mailed
   * (`heardLost`), and the mailman's one PING per interval is all its
   * watching costs. The request-ids it may be mailed under; the loss
   * heard, until the watcher's round takes it; a wait granted at once on
   * the keeper, bound there already. */
  protected mailbound = false;
  protected lossIds: string[] = [];
  protected mailedLost: string | undefined;
  protected grantedBound = false;
  /** What `renews` and `keep` were before `stopRenewing()`. */
  protected resume: { renews: boolean; keep: boolean } | undefined;
  protected get bound(): boolean {
    return this.boundEpoch === this.keeper.epoch;
  }
  protected readonly ownHolder: string | undefined;
  protected readonly fallbackHolder: string;

  constructor(
    client: Client,
    readonly key: string,
    options: HoldOptions = {},
  ) {
    this.backend = backendOf(client);
    this.keeper = keeperOf(client, this.backend);
    if (this.backend.mailbox !== false) this.mailman = mailmanOf(this.keeper, this.backend);
    this.ownHolder = options.holder;
    this.fallbackHolder = options.fallbackHolder ?? newHolder();
    this.holder = this.ownHolder ?? currentHolder() ?? this.fallbackHolder;
    this.ttl = Math.max(1, Math.round(options.ttl ?? 30_000));
    this.renews = options.renew ?? true;
    this.maxHold = options.maxHold;
    // A lease the server keeps (`KEEP`) would outlive both bounds.
    this.keep = (options.keep ?? true) && this.renews && this.maxHold === undefined;
    this.blockingTimeout = options.blockingTimeout;
    this.onLost = options.onLost;
  }

  protected abstract acquireArgs(blocking: boolean, timeout: number | undefined): Arg[];
  protected abstract extendArgs(): Arg[][];
  protected abstract releaseArgs(): Arg[];
  protected abstract clearLeftover(): Promise<void>;
  protected abstract releasedAll(reply: unknown): boolean;
  /** After the release of the last hold, before the hold ends. */
  protected abstract releasedLast(): Promise<void>;

  /** Reads that tell whether the hold still lives (a lease the server
   * keeps with `KEEP` needs no write to be checked on). */
  protected lookArgs(): Arg[][] {
    return [["LOCK.INFO", this.key]];
  }

  /** The lease left (ms) in one of those replies; undefined: not held. */
  protected oneLeft(info: Record<string, unknown>): number | undefined {
    return String(info.holder) === this.holder ? Number(info.ttl) : undefined;
  }

  /** How many times this object holds now (reentries counted). */
  get holds(): number {
    return this.depth;
  }

  /** Aborted when the hold is lost: hand it to the guarded work. */
  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** True while the lease cannot have run out: never after a loss, and
   * never past the send time of the last answered acquire or renewal plus
   * the ttl. */
  get held(): boolean {
    return this.depth > 0 && !this.lost && this.mailedLost === undefined && now() < this.leaseUntil;
  }

  /** Runs this hold's commands one at a time, each within `limit` ms on
   * the wire (undefined: no limit, for a server-side wait). A wait (`wait`)
   * runs on a connection of its own, closed after it (an abort closes it at
   * once, which drops the server-side wait); anything else on the shared
   * connection, whose `KEEP` bindings it then carries. A shared connection
   * that failed or timed out is replaced. */
  protected call(args: Arg[], limit?: number, wait = false, signal?: AbortSignal): Promise<unknown> {
    const run = async () => {
      if (this.backend.nodeOf !== undefined) await this.route();
      const m = this.mailman;
      if (m !== undefined && args.includes("KEEP") && (wait || args.includes("MAILBOX"))) {
        // Watched before it is sent: a loss is never mailed to nobody.
        const at = args.indexOf("ID");
        if (at >= 0) this.watchLosses(m, String(args[at + 1]));
      }
      if (wait && m !== undefined && args.includes("ID") && args.includes("BLOCK")) {
        try {
          // Each of its commands is short: the wait itself is in the mailbox.
          const cap = Math.min(limit ?? 5000, 5000);
          const { reply, epoch } = await mailWait(m, (a) => this.onKeeper(a, cap), args, this.releaseArgs(), signal);
          // Granted at once on the keeper: bound there with the mailbox (a mailed one binds again).
          this.grantedBound = epoch !== undefined && reply !== null && args.includes("KEEP");
          if (this.grantedBound && epoch !== undefined) {
            this.boundEpoch = epoch;
            this.box.kept = this.keeper;
            this.mailbound = true;
          }
          return reply;
        } catch (e) {
          const t = translate(e);
          if (!isServerError(t) || !noMailbox(t)) throw t;
          this.mailman = undefined; // an older server: a connection per wait
        }
      }
      if (!wait) {
        try {
          const { reply, epoch } = await this.onKeeper(args, limit);
          if (args.includes("KEEP")) {
            this.boundEpoch = epoch;
            this.box.kept = this.keeper;
            this.mailbound = args.includes("MAILBOX");
          }
          return reply;
        } catch (e) {
          throw translate(e);
        }
      }
      const conn = await this.backend.open(true);
      try {
        return await exchange(conn, args, limit, signal);
      } catch (e) {
        throw translate(e);
      } finally {
        await conn.close().catch(() => undefined);
      }
    };
    const result = this.queue.then(run, run);
    this.queue = result.catch(() => undefined);
    return result;
  }

  /** In a cluster that routes node by node: this hold's backend, keeper
   * and mailman become those of its key's node, before anything is sent. */
  protected async route(): Promise<void> {
    const cluster = this.backend;
    const nodeOf = cluster.nodeOf;
    if (nodeOf === undefined) return;
    const node = await nodeOf(this.key);
    if (this.backend.nodeOf === undefined) return; // routed meanwhile
    this.cluster = cluster;
    this.backend = node;
    this.keeper = keeperOf(node, node);
    this.mailman = node.mailbox !== false ? mailmanOf(this.keeper, node) : undefined;
  }

  /** One command on the shared connection, after those before it. */
  protected async onKeeper(args: Arg[], limit: number | undefined): Promise<{ reply: unknown; epoch: number }> {
    return this.keeper.call(async (conn) => {
      try {
        return await exchange(conn, args, limit);
      } catch (e) {
        // A failed or silent shared connection is replaced (its holds bind
        // again on their next round).
        if (!isServerError(translate(e))) await this.keeper.reset();
        throw e;
      }
    }, limit);
  }

  protected watchLosses(m: Mailman, rid: string): void {
    m.watch(rid, this, this.interval());
    this.lossIds.push(rid);
    // Only the latest bindings' ids can still be mailed (those of the
    // round before stay while a resend may be under way).
    const keep = 2 * this.extendArgs().length;
    if (this.lossIds.length > keep) m.unwatch(this.lossIds.splice(0, this.lossIds.length - keep));
  }

  /** @internal The server mailed this hold's loss (`LOST <why>`): the
   * watcher marks it lost at once. */
  heardLost(why: string): void {
    if (this.depth === 0 || !this.watching) return;
    this.mailedLost = why;
    scheduler.add(this, now(), this.gen);
  }

  /** One changing request with one request-id, sent until answered or
   * `deadline` (monotonic ms; undefined: no end) passes. */
  protected async send(
    make: (left: number | undefined) => Arg[],
    phase: string,
    deadline: number | undefined,
    wait = false,
    signal?: AbortSignal,
  ): Promise<unknown> {
    let rid: string | undefined = this.ids ? requestId() : undefined;
    for (let attempt = 0, moves = 0; ; ) {
      const left = deadline === undefined ? undefined : Math.max(0, deadline - now());
      // A wait may take its BLOCK timeout and then some; anything else at
      // most the time left.
      const limit = wait ? (left === undefined ? undefined : left + 5000) : Math.max(left ?? 30_000, 50);
      try {
        const reply = await this.call(withId(make(left), rid), limit, wait, signal);
        // A resend may be answered from the server's memory of an earlier
        // sending, which bound nothing (`KEEP`) here.
        if (attempt > 0) [this.boundEpoch, this.grantedBound] = [-1, false];
        return reply;
      } catch (e) {
        if (signal?.aborted) throw e;
        if (rid !== undefined && isUnknownOption(e)) {
          this.ids = false;
          rid = undefined;
          continue;
        }
        if (this.cluster !== undefined && isMoved(e) && moves++ < MAX_MOVES) {
          // Resharded: sent to the slot's new owner, with its id (the ids
          // of what applied here moved with the slot).
          // Nothing is bound there until a `KEEP` request binds it.
          this.mailman?.unwatch(this.lossIds);
          [this.lossIds, this.boundEpoch, this.mailbound, this.grantedBound] = [[], -1, false, false];
          this.backend = this.cluster;
          await this.route();
          continue;
        }
        // Without an id (an older server) only a renewal is safe twice.
        if (verdict(e, phase) !== Verdict.Resend || (rid === undefined && phase !== "renew")) throw e;
        const p = pause(attempt++, now(), deadline);
        if (p === undefined) throw e;
        await sleep(p);
      }
    }
  }

  /** The hold is over: nothing of it stays bound (`clean`: the server
   * said so, or it released; otherwise the shared connection is replaced),
   * and it no longer keeps the shared connection open. */
  protected async letGo(clean = true): Promise<void> {
    this.boundEpoch = -1;
    this.mailbound = false;
    this.mailman?.unwatch(this.lossIds);
    this.lossIds = [];
    const kept = this.box.kept;
    this.box.kept = undefined;
    if (!clean && kept !== undefined) await kept.reset();
    const user = this.box.user;
    this.box.user = undefined;
    user?.done();
  }

  protected async acquireRaw(options: AcquireOptions = {}): Promise<unknown> {
    if (this.depth === 0 && this.resume !== undefined) {
      ({ renews: this.renews, keep: this.keep } = this.resume);
      this.resume = undefined;
    }
    if (this.depth === 0) {
      this.holder = this.ownHolder ?? currentHolder() ?? this.fallbackHolder;
      this.mailedLost = undefined;
      if (hasLeftovers()) await this.clearLeftover();
    }
    const blocking = options.blocking ?? true;
    const start = now();
    const deadline = blocking
      ? options.timeout === undefined
        ? undefined
        : start + options.timeout
      : start + this.ttl;
    const make = (left: number | undefined): Arg[] => {
      // `KEEP` on a wait too: the server refuses a ttl below its floor
      // before the wait starts, never after a grant. The wait's own
      // connection closes when it ends, so its grant is bound again on the
      // shared connection below.
      const args = this.acquireArgs(blocking, left);
      if (this.keep) args.push("KEEP");
      return args;
    };
    if (this.backend.nodeOf !== undefined) await this.route();
    if (this.box.user === undefined) {
      this.keeper.use();
      this.box.user = this.keeper;
    }
    let reply: unknown;
    for (;;) {
      try {
        reply = await this.send(make, blocking ? "acquire" : "try", deadline, blocking, options.signal);
        break;
      } catch (e) {
        if (this.keep && !this.ids && isUnknownOption(e)) {
          this.keep = false; // an older server: the watcher renews instead
          continue;
        }
        if (this.depth === 0) await this.letGo(blocking || isServerError(e));
        if (blocking && isTryAgain(e)) return null;
        throw e;
      }
    }
    if (reply === null || reply === undefined) {
      if (this.depth === 0) await this.letGo();
      return null;
    }
    this.leaseUntil = start + this.ttl;
    took(this.key, this.holder, this.self);
    if (++this.depth === 1) {
      this.heldSince = start;
      this.lost = false;
      this.controller = new AbortController();
      if (this.renews) this.startWatcher();
    }
    // Granted after a wait: bound now (`KEEP`), and the lease known from a
    // send time once renewed.
    if (
      this.renews &&
      blocking &&
      !(this.grantedBound && this.bound) &&
      (this.keep || this.leaseUntil - now() < (this.ttl * 2) / 3)
    )
      // Tried for a ttl (a second at least) within the timeout, not just
      // until the lease's lower bound, long past after a wait.
      await this.renew(Math.min(now() + Math.max(this.ttl, 1000), deadline ?? Infinity));
    return reply;
  }

  /** Gives back one hold. `NotHeldError` when it was lost, the key holds
   * another type, or nothing is held; a connection error once the release
   * could not get through before the lease may have run out (the
   * connection is closed, and the server frees the key at the lease's end). */
  async release(): Promise<void> {
    if (this.depth === 0) throw new NotHeldError(`${this.key}: not held by ${this.holder}`);
    const deadline = Math.max(this.leaseUntil, now() + 1000);
    let reply: unknown;
    try {
      reply = await this.send(() => this.releaseArgs(), "release", deadline);
    } catch (e) {
      const v = verdict(e, "release");
      if (v !== Verdict.Lost) leftOver(this.key, this.holder, this.releaseArgs(), this.ttl);
      await this.end(v === Verdict.Lost);
      if (v === Verdict.Lost && !(e instanceof NotHeldError)) {
        throw new NotHeldError(lostMessage(this.key, this.holder, e));
      }
      throw e;
    }
    this.depth = Math.max(0, this.depth - 1);
    const others = gave(this.key, this.holder, this.self);
    if (this.releasedAll(reply)) await this.releasedLast().then(() => this.end());
    // Other objects of this holder still hold the key: this one is done
    // (the binding is the lease's, which they share).
    else if (this.depth === 0 && others) await this.end();
    else if (this.depth === 0) await this.releaseRest();
  }

  /** The server counts holds this client did not take: released too, with
   * a warning, so that nothing stays held after `release()`. */
  protected async releaseRest(): Promise<void> {
    process.emitWarning(`${this.key}: ${this.holder} held more than this client took; released all`);
    await this.end(await this.releaseAll(this.releaseArgs(), 64));
  }

  /** Sends `release` until the server holds none of it (true), an error,
   * or `tries` sendings. */
  protected async releaseAll(release: Arg[], tries: number): Promise<boolean> {
    for (let i = 0; i < tries; i++) {
      try {
        if (this.releasedAll(await this.send(() => release, "release", now() + 1000))) return true;
      } catch {
        return false;
      }
    }
    return false;
  }

  protected async end(clean = true): Promise<void> {
    collected.unregister(this);
    if (this.depth) gave(this.key, this.holder, this.self, this.depth);
    this.depth = 0;
    this.watching = false;
    await this.letGo(clean);
  }

  protected interval(): number {
    return Math.max(1, Math.floor(this.ttl / 3));
  }

  /** The watching (`hold.ts`): started at each fresh acquire. */
  protected abstract startWatcher(): void;
  abstract renew(until?: number): Promise<boolean>;
  /** What `acquire` answers for a grant's reply. */
  protected abstract took(reply: unknown): unknown;
  /** @internal One round of the shared timer (`hold.ts`). */
  abstract watchOnce(gen: number): Promise<number | undefined>;
}
