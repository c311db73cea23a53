// The life of one hold, whatever its kind: acquire (waiting server-side,
// retrying a restart grace's -TRYAGAIN), renew every third of the ttl
// (`EXTEND ... KEEP`, which also binds the lease again after a reconnect),
// notice a lost hold, release.

import { type Arg, type Backend, type Client, type Conn, backendOf } from "./backend.js";
import { LockLostError, NotAcquiredError, NotHeldError, errorText, isTryAgain, translate } from "./errors.js";
import {
  CallTimeoutError,
  Verdict,
  isServerError,
  isUnknownOption,
  lostMessage,
  pause,
  requestId,
  verdict,
  withId,
} from "./retry.js";
import { currentHolder, gave, newHolder, took } from "./holders.js";
import { asMap } from "./replies.js";

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

// Older Node versions lack the symbol `await using` looks up.
(Symbol as { asyncDispose?: symbol }).asyncDispose ??= Symbol.for("Symbol.asyncDispose");

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Monotonic milliseconds. */
const now = (): number => performance.now();

export function blockArgs(blocking: boolean, timeout: number | undefined): Arg[] {
  if (!blocking) return [];
  return ["BLOCK", timeout === undefined ? 0 : Math.max(1, Math.round(timeout))];
}

/** A hold collected without `release()`: its connection is closed, so that
 * no `KEEP` lease stays bound to it (only `release()` ends a hold promptly). */
const collected = new FinalizationRegistry<{ conn?: Conn }>((box) => {
  const conn = box.conn;
  box.conn = undefined;
  void conn?.close().catch(() => undefined);
});

export abstract class Hold implements AsyncDisposable {
  /** Who holds: taken again at each fresh acquire (see `HoldOptions.holder`). */
  holder: string;
  readonly ttl: number;
  readonly renews: boolean;
  readonly maxHold: number | undefined;
  keep: boolean;
  readonly blockingTimeout: number | undefined;
  readonly onLost: ((hold: Hold) => void) | undefined;
  /** True once the hold was found lost (until the next fresh acquire). */
  lost = false;
  protected depth = 0;
  private readonly backend: Backend;
  /** The hold's connection, in a box the finalizer can reach without the
   * hold (see `collected`). */
  private readonly box: { conn?: Conn } = {};
  private get conn(): Conn | undefined {
    return this.box.conn;
  }
  private set conn(c: Conn | undefined) {
    this.box.conn = c;
  }
  private queue: Promise<unknown> = Promise.resolve();
  private timer: NodeJS.Timeout | undefined;
  private controller = new AbortController();
  private renewing = false;
  private ids = true;
  /** When the lease may run out at the earliest (monotonic ms). */
  private leaseUntil = 0;
  private heldSince = 0;
  /** The lease is bound (`KEEP`) to the connection the hold has now. */
  private bound = false;
  private readonly ownHolder: string | undefined;
  private readonly fallbackHolder: string;

  constructor(
    client: Client,
    readonly key: string,
    options: HoldOptions = {},
  ) {
    this.backend = backendOf(client);
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
  protected abstract releasedAll(reply: unknown): boolean;

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
    return this.depth > 0 && !this.lost && now() < this.leaseUntil;
  }

  /** Runs commands on this hold's connection, one at a time, each within
   * `limit` ms on the wire (undefined: no limit, for a server-side wait).
   * `open`: whether it may open the connection. A connection that failed
   * or timed out is closed: the next command opens a fresh one. */
  protected call(args: Arg[], limit?: number, open = true, signal?: AbortSignal): Promise<unknown> {
    const run = async () => {
      if (this.conn === undefined) {
        if (!open) throw new NotHeldError(`${this.key}: not held by ${this.holder}`);
        this.conn = await this.backend.open();
      }
      const conn = this.conn;
      let timer: NodeJS.Timeout | undefined;
      let onAbort: (() => void) | undefined;
      const cut = new Promise<never>((_, reject) => {
        if (limit !== undefined) {
          timer = setTimeout(() => reject(new CallTimeoutError(`no reply to ${String(args[0])} within ${limit} ms`)), limit);
        }
        if (signal !== undefined) {
          onAbort = () => reject(signal.reason ?? new Error("aborted"));
          if (signal.aborted) onAbort();
          else signal.addEventListener("abort", onAbort, { once: true });
        }
      });
      try {
        return await Promise.race([conn.call(args), cut]);
      } catch (e) {
        const err = translate(e);
        if (!isServerError(err) || signal?.aborted) {
          // Closing also drops a server-side wait of this connection.
          this.bound = false;
          if (this.conn === conn) this.conn = undefined;
          await conn.close().catch(() => undefined);
        }
        throw err;
      } finally {
        clearTimeout(timer);
        if (onAbort !== undefined) signal?.removeEventListener("abort", onAbort);
      }
    };
    const result = this.queue.then(run, run);
    this.queue = result.catch(() => undefined);
    return result;
  }

  /** One changing request with one request-id, sent until answered or
   * `deadline` (monotonic ms; undefined: no end) passes. */
  private async send(
    make: (left: number | undefined) => Arg[],
    phase: string,
    deadline: number | undefined,
    wait = false,
    open = true,
    signal?: AbortSignal,
  ): Promise<unknown> {
    let rid: string | undefined = this.ids ? requestId() : undefined;
    for (let attempt = 0; ; ) {
      const left = deadline === undefined ? undefined : Math.max(0, deadline - now());
      // A wait may take its BLOCK timeout and then some; anything else at
      // most the time left.
      const limit = wait ? (left === undefined ? undefined : left + 5000) : Math.max(left ?? 30_000, 50);
      try {
        return await this.call(withId(make(left), rid), limit, open, signal);
      } catch (e) {
        if (signal?.aborted) throw e;
        if (rid !== undefined && isUnknownOption(e)) {
          this.ids = false;
          rid = undefined;
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

  private async closeConn(): Promise<void> {
    this.bound = false;
    const conn = this.conn;
    this.conn = undefined;
    if (conn) await conn.close();
  }

  protected async acquireRaw(options: AcquireOptions = {}): Promise<unknown> {
    if (this.depth === 0) this.holder = this.ownHolder ?? currentHolder() ?? this.fallbackHolder;
    const blocking = options.blocking ?? true;
    const start = now();
    const deadline = blocking
      ? options.timeout === undefined
        ? undefined
        : start + options.timeout
      : start + this.ttl;
    const make = (left: number | undefined): Arg[] => {
      const args = this.acquireArgs(blocking, left);
      if (this.keep) args.push("KEEP");
      return args;
    };
    let reply: unknown;
    for (;;) {
      try {
        reply = await this.send(make, blocking ? "acquire" : "try", deadline, blocking, true, options.signal);
        break;
      } catch (e) {
        if (this.keep && !this.ids && isUnknownOption(e)) {
          this.keep = false; // an older server: the watcher renews instead
          continue;
        }
        if (this.depth === 0) await this.closeConn();
        if (blocking && isTryAgain(e)) return null;
        throw e;
      }
    }
    if (reply === null || reply === undefined) {
      if (this.depth === 0) await this.closeConn();
      return null;
    }
    this.leaseUntil = start + this.ttl;
    this.bound = this.keep;
    took(this.key, this.holder);
    if (++this.depth === 1) {
      this.heldSince = start;
      this.lost = false;
      this.controller = new AbortController();
      if (this.renews) this.startWatcher();
    }
    // Granted after a wait: the lease is known from a send time once renewed.
    if (this.renews && blocking && this.leaseUntil - now() < (this.ttl * 2) / 3) await this.renew();
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
      await this.end();
      if (v === Verdict.Lost && !(e instanceof NotHeldError)) {
        throw new NotHeldError(lostMessage(this.key, this.holder, e));
      }
      throw e;
    }
    this.depth = Math.max(0, this.depth - 1);
    const others = gave(this.key, this.holder);
    if (this.releasedAll(reply)) await this.end();
    // Other objects of this holder still hold the key: this one is done
    // (its connection closes; theirs renew and bind their own).
    else if (this.depth === 0 && others) await this.end();
    else if (this.depth === 0) await this.releaseRest();
  }

  /** The server counts holds this client did not take: released too, with
   * a warning, so that nothing stays held after `release()`. */
  private async releaseRest(): Promise<void> {
    process.emitWarning(`${this.key}: ${this.holder} held more than this client took; released all`);
    for (let i = 0; i < 64; i++) {
      let reply: unknown;
      try {
        reply = await this.send(() => this.releaseArgs(), "release", now() + 1000);
      } catch {
        break;
      }
      if (this.releasedAll(reply)) break;
    }
    await this.end();
  }

  private async end(): Promise<void> {
    collected.unregister(this);
    if (this.depth) gave(this.key, this.holder, this.depth);
    this.depth = 0;
    clearInterval(this.timer);
    this.timer = undefined;
    await this.closeConn();
  }

  private startWatcher(): void {
    const every = Math.max(1, Math.floor(this.ttl / 3));
    // The timer holds the hold weakly: one dropped unreleased is collected,
    // and then stops renewing (and its connection closes: `collected`).
    const ref = new WeakRef(this);
    const timer = setInterval(() => {
      const hold = ref.deref();
      if (hold === undefined) clearInterval(timer);
      else hold.watchOnce();
    }, every);
    timer.unref();
    this.timer = timer;
    collected.register(this, this.box, this);
  }

  /** One renewal round of the watcher. */
  private watchOnce(): void {
    if (this.renewing) return;
    if (this.maxHold !== undefined && now() + this.ttl > this.heldSince + this.maxHold) {
      // No renewal past `maxHold`: the lease runs out, then the hold is lost.
      clearInterval(this.timer);
      const ref = new WeakRef(this);
      const t = setTimeout(() => void ref.deref()?.markLost(), Math.max(0, this.leaseUntil - now()));
      t.unref();
      this.timer = t;
      return;
    }
    this.renewing = true;
    void (this.bound ? this.look() : this.renew())
      .catch(() => false)
      .then((ok) => {
        this.renewing = false;
        if (!ok && this.timer !== undefined) void this.markLost();
      });
  }

  /** Resets the lease now (and binds `KEEP` again). False when the hold is
   * lost or nothing is held (then the server is not asked): any error but
   * a lost hold is retried until the lease may have run out. */
  async renew(): Promise<boolean> {
    if (this.depth === 0 || this.lost) return false;
    const start = now();
    for (const args of this.extendArgs()) {
      if (this.keep) args.push("KEEP");
      try {
        await this.send(() => args, "renew", this.leaseUntil, false, true);
      } catch {
        return false;
      }
    }
    this.leaseUntil = start + this.ttl;
    this.bound = this.keep;
    return true;
  }

  /** The watcher's round while the server keeps the lease: reads, no
   * write. A connection that failed on the way is replaced and the lease
   * bound to the new one (`renew`). */
  private async look(): Promise<boolean> {
    const start = now();
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
    return true;
  }

  private async markLost(): Promise<void> {
    if (this.depth === 0) return; // released meanwhile
    this.lost = true;
    gave(this.key, this.holder, this.depth);
    this.depth = 0;
    clearInterval(this.timer);
    this.timer = undefined;
    // Nothing is held: the connection goes at once (a process with lost
    // holds exits).
    await this.closeConn().catch(() => undefined);
    this.controller.abort(new LockLostError(`${this.key}: the hold was lost`));
    this.onLost?.(this);
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

  /** What `acquire` answers for a grant's reply. */
  protected abstract took(reply: unknown): unknown;

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
