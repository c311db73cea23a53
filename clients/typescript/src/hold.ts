// The life of one hold, whatever its kind: `hold-core.ts` acquires and
// releases; here, a round every third of the ttl on the shared timer (a
// read while the server keeps the lease, `EXTEND ... KEEP` otherwise or
// after the shared connection was replaced), and noticing a lost hold.

import { type Arg } from "./backend.js";
import { LockLostError, NotAcquiredError, NotHeldError, errorText } from "./errors.js";
import { Verdict, isServerError, verdict } from "./retry.js";
import { gave, leftOver, leftover } from "./holders.js";
import { collected, now, scheduler } from "./shared.js";
import { HoldCore, noMailbox } from "./hold-core.js";
import { asMap } from "./replies.js";
import { routeKey } from "./slots.js";
import { type Replicas, type ReplicasOptions, counted, replicasOf, waitCommands } from "./replicas.js";

export interface HoldOptions {
  /** Lease in milliseconds (default 30 s). */
  ttl?: number;
  /** Who holds. By default the holder of the `withHolder` scope the hold
   * is acquired in, else a random 128-bit id of this object's own. */
  holder?: string;
  /** Renew the lease while held (default true). `false`: a plain lease that
   * runs out after `ttl` unless renewed by hand (`renew()`). */
  renew?: boolean;
  /** Renew, but never past this many ms of holding: then the lease runs
   * out and the hold is lost like any other. */
  maxHold?: number;
  /** @internal The holder outside any scope (a read-write lock's modes share one). */
  fallbackHolder?: string;
  /** Ask the server to renew the lease while the connection lives (default true). */
  keep?: boolean;
  /** How long `using()` waits, in ms (default: as long as it takes). */
  blockingTimeout?: number;
  /** Called once when the hold turns out lost. */
  onLost?: (hold: Hold) => void;
  /** Report a fresh grant only once this many replicas have it (see
   * `replicas.ts`): a count, or `{ count, timeout, onShortfall, aof }`. */
  replicas?: number | ReplicasOptions;
}

export interface AcquireOptions {
  /** Wait for the hold (default true). */
  blocking?: boolean;
  /** At most this many milliseconds (default: as long as it takes). */
  timeout?: number;
  /** Cancels a pending wait: the waiting connection is closed, so the
   * server drops the wait; the promise rejects with the signal's reason. */
  signal?: AbortSignal;
}

export { newHolder } from "./holders.js";

export function blockArgs(blocking: boolean, timeout: number | undefined): Arg[] {
  if (!blocking) return [];
  return ["BLOCK", timeout === undefined ? 0 : Math.max(1, Math.round(timeout))];
}

export abstract class Hold extends HoldCore implements AsyncDisposable {
  /** Grants that wait for replicas, if asked for. */
  readonly replicas: Replicas | undefined;
  /** The keeper's epoch this hold's latest command went out on: a `WAIT`
   * there counts from it. */
  private writtenEpoch = -1;
  private givingBack = false;

  constructor(client: ConstructorParameters<typeof HoldCore>[0], key: string, options: HoldOptions = {}) {
    super(client, key, options);
    this.replicas = replicasOf(options.replicas);
  }

  protected override async onKeeper(args: Arg[], limit: number | undefined): Promise<{ reply: unknown; epoch: number }> {
    const r = await super.onKeeper(args, limit);
    this.writtenEpoch = r.epoch;
    return r;
  }

  /** A grant is answered only once `held` confirms it. One made while the
   * keeper was replaced is renewed there first; when the server says it is
   * gone, or no renewal got through (its lease unknown: it may have run
   * out), it is given back and waited for again. */
  protected override async acquireRaw(options: AcquireOptions = {}): Promise<unknown> {
    const end = options.timeout === undefined ? undefined : now() + options.timeout;
    for (;;) {
      const timeout = end === undefined ? undefined : Math.max(0, end - now());
      const reply = await super.acquireRaw({ ...options, timeout });
      if (reply === null || this.depth !== 1) return reply;
      if (!this.renews || this.held) return (await this.onReplicas("acquire")) ? reply : null;
      await this.release().catch(() => undefined);
      if (options.blocking === false || (end !== undefined && now() >= end)) return null;
    }
  }

  protected override async releasedLast(): Promise<void> {
    await this.onReplicas("release");
  }

  /** Whether enough replicas have the grant (or the release) just made; a
   * grant short of them is given back unless `onShortfall` is "warn". */
  private async onReplicas(what: "acquire" | "release"): Promise<boolean> {
    const want = this.replicas;
    if (want === undefined || this.givingBack) return true;
    let got = 0;
    let why: string;
    try {
      // Granted on another connection (mailed, or before a reconnect): a
      // write here after the grant, which WAIT counts from.
      if (what === "acquire" && this.writtenEpoch !== this.keeper.epoch) await this.renew();
      const replies: unknown[] = [];
      for (const cmd of waitCommands(want)) replies.push((await this.onKeeper(cmd, want.timeout + 5000)).reply);
      got = counted(want, replies);
      why = `${got} of ${want.count} replicas had it within ${want.timeout} ms`;
    } catch (e) {
      why = `the replicas could not be asked (${errorText(e)})`;
    }
    if (got >= want.count) return true;
    if (what === "release" || want.onShortfall === "warn") {
      process.emitWarning(`${what} of ${this.key} by ${this.holder}: ${why}`);
      return true;
    }
    process.emitWarning(`${this.key}: granted to ${this.holder}, but ${why}: released`);
    this.givingBack = true;
    try {
      await this.release();
    } catch {
      // gone already: nothing of it is held
    } finally {
      this.givingBack = false;
    }
    return false;
  }
  protected startWatcher(): void {
    this.watching = true;
    // The shared timer holds the hold weakly: one dropped unreleased is
    // collected, and then stops renewing (its binding ends: `collected`).
    scheduler.add(this, now() + this.interval(), ++this.gen);
    collected.register(this, this.box, this);
  }

  /** @internal Whether rounds added as `gen` still watch this hold. */
  watches(gen: number): boolean {
    return this.watching && gen === this.gen;
  }

  /** @internal One round of the shared timer: when the next is due, or
   * undefined when this hold needs no more. */
  async watchOnce(gen: number): Promise<number | undefined> {
    if (!this.watching || gen !== this.gen) return undefined;
    if (this.maxHold !== undefined && now() + this.ttl > this.heldSince + this.maxHold) {
      // No renewal past `maxHold`: the lease runs out, then the hold is lost.
      if (now() < this.leaseUntil) return this.leaseUntil;
      await this.markLost();
      return undefined;
    }
    if (this.mailedLost !== undefined) {
      await this.markLost();
      return undefined;
    }
    const round = (this.bound ? this.look() : this.renew()).catch(() => false);
    this.round = round;
    const ok = await round;
    if (!this.watching || gen !== this.gen) return undefined;
    if (!ok) {
      await this.markLost();
      return undefined;
    }
    return now() + this.interval();
  }

  /** Resets the lease now (and binds `KEEP` again). False when the hold is
   * lost or nothing is held (then the server is not asked): any error but
   * a lost hold is retried until the lease may have run out (`until`, a
   * `performance.now()` time: instead until then; padlock's own use, after
   * a grant). */
  async renew(until?: number): Promise<boolean> {
    if (this.depth === 0 || this.lost) return false;
    const start = now();
    const deadline = until ?? this.leaseUntil;
    for (const args of this.extendArgs()) {
      if (this.keep) args.push("KEEP");
      const m = this.keep ? this.mailman : undefined;
      if (m !== undefined) args.push("MAILBOX", m.box(routeKey(args) ?? this.key));
      try {
        try {
          await this.send(() => args, "renew", deadline);
        } catch (e) {
          if (m === undefined || !isServerError(e) || !noMailbox(e)) throw e;
          this.mailman = undefined; // an older server: watched by reads
          args.splice(-2, 2);
          await this.send(() => args, "renew", deadline);
        }
        // Answered to a resend: bound where the first sending went (a
        // connection since replaced). Once more, a new request.
        if (this.keep && !this.bound) await this.send(() => args, "renew", deadline);
      } catch (e) {
        // Unless the server said the hold is gone, its lease may still be
        // bound: `markLost` then ends the binding.
        this.unsure = verdict(e, "renew") !== Verdict.Lost;
        return false;
      }
    }
    this.leaseUntil = start + this.ttl;
    return true;
  }

  /** Stops renewing this hold, like redis-semaphore's `stopRefresh()`:
   * its lease then runs out a ttl after the last renewal unless `renew()`
   * is called by hand, and `held` turns false then. A lease the server
   * kept (`KEEP`) is first bound to a connection opened for it, which is
   * then closed: the server stops keeping it, and it runs out a ttl from
   * now. Until the next fresh acquire. */
  async stopRenewing(): Promise<void> {
    if (this.depth === 0 || !this.renews) return;
    this.resume = { renews: this.renews, keep: this.keep };
    this.renews = this.keep = false;
    this.watching = false;
    this.gen++;
    // A renewal under way (maybe resending, with its id, a KEEP that would
    // bind the lease again) ends before the binding moves.
    await this.round;
    if (this.box.kept === undefined) return;
    const start = now();
    let moved = true;
    try {
      for (const args of this.extendArgs()) {
        args.push("KEEP");
        await this.send(() => args, "renew", this.leaseUntil, true);
      }
    } catch (e) {
      if (verdict(e, "renew") === Verdict.Lost) {
        await this.markLost();
        return;
      }
      moved = false;
    }
    if (moved) this.leaseUntil = start + this.ttl;
    const kept = this.box.kept;
    this.boundEpoch = -1;
    this.box.kept = undefined;
    // Maybe still bound on the shared connection: replaced.
    if (!moved) await kept?.reset();
  }

  /** The watcher's round while the server keeps the lease: reads, no
   * write. A connection that failed on the way is replaced and the lease
   * bound to the new one (`renew`). */
  private async look(): Promise<boolean> {
    const start = now();
    if (this.mailbound && this.mailman !== undefined) {
      // Bound there, no loss mailed since: kept a ttl past `fresh`, and
      // while that lasts past the next round, nothing is sent.
      this.leaseUntil = Math.max(this.leaseUntil, this.mailman.fresh() + this.ttl);
      return this.leaseUntil > start + this.interval() ? true : this.renew();
    }
    // Binds with the mailbox: no reads from then on.
    if (this.mailman !== undefined) return this.renew();
    let left: number | undefined;
    try {
      for (const args of this.lookArgs()) {
        const reply = await this.call(args, Math.max(50, this.leaseUntil - start));
        const ms = this.oneLeft(asMap(reply));
        if (ms === undefined) return false;
        left = left === undefined ? ms : Math.min(left, ms);
      }
    } catch (e) {
      if (isServerError(e) && errorText(e).startsWith("WRONGTYPE")) return false;
      return this.renew();
    }
    if (left === undefined) return false;
    this.leaseUntil = start + left;
    // A kept lease never has much less than two thirds of its ttl left
    // (the server renews it every third): less, and its binding is gone
    // (a connection the driver replaced on its own, as glide does): bound
    // again.
    if (left < this.ttl / 2) return this.renew();
    return true;
  }

  /** Before a fresh take: a hold of this holder left over (`leftOver`) is
   * released until none is left, at most 16 times (the rest runs out with
   * its lease); NOTHELD: none was. */
  protected async clearLeftover(): Promise<void> {
    const release = leftover(this.key, this.holder) as Arg[] | undefined;
    if (release !== undefined) await this.releaseAll(release, 16);
  }

  private async markLost(): Promise<void> {
    if (this.depth === 0) return; // released meanwhile
    this.lost = true;
    gave(this.key, this.holder, this.self, this.depth);
    if (this.unsure) leftOver(this.key, this.holder, this.releaseArgs(), this.ttl);
    this.depth = 0;
    this.watching = false;
    // Nothing is held: nothing of it stays bound, and it no longer keeps
    // the shared connection open (a process with lost holds exits).
    await this.letGo(!this.unsure).catch(() => undefined);
    this.unsure = false;
    this.controller.abort(new LockLostError(`${this.key}: the hold was lost`));
    if (this.onLost) {
      try {
        this.onLost(this);
      } catch (e) {
        // Reported as Node reports a throwing callback (an uncaught
        // exception, on its own tick), never swallowed; the watching of
        // the other holds goes on.
        queueMicrotask(() => {
          throw e;
        });
      }
    }
  }

  /** Throws `LockLostError` when the hold was lost. */
  check(): void {
    if (this.lost) throw new LockLostError(`${this.key}: the hold was lost`);
  }

  /** Acquires (up to `blockingTimeout`), runs `work` with a signal that
   * aborts if the hold is lost, releases. Throws `LockLostError` when the
   * hold was lost on the way. */
  async using<T>(work: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const reply = await this.acquireRaw({ timeout: this.blockingTimeout });
    if (reply === null) throw new NotAcquiredError(`${this.key}: not acquired in time`);
    this.took(reply);
    let lost = false;
    try {
      return await work(this.signal);
    } finally {
      lost = this.lost;
      if (this.depth > 0) {
        try {
          await this.release();
        } catch (e) {
          if (!(e instanceof NotHeldError)) throw e;
          lost = true;
        }
      }
      if (lost) throw new LockLostError(`${this.key}: the hold was lost while the work went on`);
    }
  }

  /** `await using` support: releases what is still held. */
  async [Symbol.asyncDispose](): Promise<void> {
    while (this.depth > 0) {
      try {
        await this.release();
      } catch (e) {
        if (e instanceof NotHeldError) return;
        throw e;
      }
    }
  }
}
