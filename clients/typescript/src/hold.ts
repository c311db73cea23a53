// The life of one hold, whatever its kind: acquire (waiting server-side,
// retrying a restart grace's -TRYAGAIN), renew every third of the ttl
// (`EXTEND ... KEEP`, which also binds the lease again after a reconnect),
// notice a lost hold, release.

import { type Arg, type Backend, type Client, type Conn, backendOf } from "./backend.js";
import { LockLostError, NotAcquiredError, NotHeldError, isKeepUnknown, isTryAgain, translate } from "./errors.js";
import { randomBytes } from "node:crypto";

export interface HoldOptions {
  /** Lease in milliseconds (default 30 s). */
  ttl?: number;
  /** Who holds; a random 128-bit id by default. */
  holder?: string;
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
}

/** A random 128-bit holder id, as hex. */
export function newHolder(): string {
  return randomBytes(16).toString("hex");
}

// Older Node versions lack the symbol `await using` looks up.
(Symbol as { asyncDispose?: symbol }).asyncDispose ??= Symbol.for("Symbol.asyncDispose");

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** 50 ms doubling up to 1 s: the pause before retrying a restart grace. */
export const backoff = (attempt: number): number => Math.min(50 * 2 ** attempt, 1000);

export function blockArgs(blocking: boolean, timeout: number | undefined): Arg[] {
  if (!blocking) return [];
  return ["BLOCK", timeout === undefined ? 0 : Math.max(1, Math.round(timeout))];
}

export abstract class Hold implements AsyncDisposable {
  readonly holder: string;
  readonly ttl: number;
  keep: boolean;
  readonly blockingTimeout: number | undefined;
  readonly onLost: ((hold: Hold) => void) | undefined;
  /** True once the hold was found lost (until the next fresh acquire). */
  lost = false;
  protected depth = 0;
  private readonly backend: Backend;
  private conn: Conn | undefined;
  private queue: Promise<unknown> = Promise.resolve();
  private timer: NodeJS.Timeout | undefined;
  private controller = new AbortController();

  constructor(
    client: Client,
    readonly key: string,
    options: HoldOptions = {},
  ) {
    this.backend = backendOf(client);
    this.holder = options.holder ?? newHolder();
    this.ttl = Math.max(1, Math.round(options.ttl ?? 30_000));
    this.keep = options.keep ?? true;
    this.blockingTimeout = options.blockingTimeout;
    this.onLost = options.onLost;
  }

  protected abstract acquireArgs(blocking: boolean, timeout: number | undefined): Arg[];
  protected abstract extendArgs(): Arg[][];
  protected abstract releaseArgs(): Arg[];
  protected abstract releasedAll(reply: unknown): boolean;

  /** Aborted when the hold is lost: hand it to the guarded work. */
  get signal(): AbortSignal {
    return this.controller.signal;
  }

  get held(): boolean {
    return this.depth > 0 && !this.lost;
  }

  /** Runs commands on this hold's connection, one at a time. `open`:
   * whether it may open the connection (a renewal that comes after the
   * release must not). */
  protected call(args: Arg[], open = true): Promise<unknown> {
    const run = async () => {
      if (this.conn === undefined) {
        if (!open) return undefined;
        this.conn = await this.backend.open();
      }
      try {
        return await this.conn.call(args);
      } catch (e) {
        throw translate(e);
      }
    };
    const result = this.queue.then(run, run);
    this.queue = result.catch(() => undefined);
    return result;
  }

  private async closeConn(): Promise<void> {
    const conn = this.conn;
    this.conn = undefined;
    if (conn) await conn.close();
  }

  protected async acquireRaw(options: AcquireOptions = {}): Promise<unknown> {
    const blocking = options.blocking ?? true;
    const deadline = options.timeout === undefined ? undefined : Date.now() + options.timeout;
    for (let attempt = 0; ; ) {
      const left = deadline === undefined ? undefined : Math.max(0, deadline - Date.now());
      const args = this.acquireArgs(blocking, left);
      if (this.keep) args.push("KEEP");
      let reply: unknown;
      try {
        reply = await this.call(args);
      } catch (e) {
        if (this.keep && isKeepUnknown(e)) {
          this.keep = false; // an older server: the watcher renews instead
          continue;
        }
        const pause = backoff(attempt++);
        if (!isTryAgain(e) || !blocking || (deadline !== undefined && Date.now() + pause > deadline)) {
          if (this.depth === 0) await this.closeConn();
          if (isTryAgain(e) && blocking) return null;
          throw e;
        }
        await sleep(pause);
        continue;
      }
      if (reply === null || reply === undefined) {
        if (this.depth === 0) await this.closeConn();
        return null;
      }
      if (++this.depth === 1) this.startWatcher();
      return reply;
    }
  }

  /** Gives back one hold; `NotHeldError` when it was lost. */
  async release(): Promise<void> {
    let reply: unknown;
    try {
      reply = await this.call(this.releaseArgs());
    } catch (e) {
      if (e instanceof NotHeldError) await this.end();
      throw e;
    }
    this.depth = Math.max(0, this.depth - 1);
    if (this.releasedAll(reply)) await this.end();
  }

  private async end(): Promise<void> {
    this.depth = 0;
    clearInterval(this.timer);
    this.timer = undefined;
    await this.closeConn();
  }

  private startWatcher(): void {
    this.lost = false;
    this.controller = new AbortController();
    const every = Math.max(1, Math.floor(this.ttl / 3));
    this.timer = setInterval(() => {
      void this.renew().then((ok) => {
        if (!ok && this.timer !== undefined) this.markLost();
      });
    }, every);
    this.timer.unref();
  }

  /** Resets the lease now (and binds `KEEP` again); false when lost. */
  async renew(): Promise<boolean> {
    for (const args of this.extendArgs()) {
      if (this.keep) args.push("KEEP");
      try {
        await this.call(args, false);
      } catch (e) {
        if (e instanceof NotHeldError) return false;
        // A connection error: the client reconnects, the next try rebinds.
      }
    }
    return true;
  }

  private markLost(): void {
    this.lost = true;
    clearInterval(this.timer);
    this.timer = undefined;
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
