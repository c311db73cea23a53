// What the holds of a process share: one timer for every hold's rounds
// (earliest first), and per client object one connection (the keeper) that
// carries their commands and `KEEP` bindings. A thousand holds are one
// timer and one connection, plus a connection for each wait while it waits.

import type { Arg, Backend, Client, Conn } from "./backend.js";
import { CallTimeoutError } from "./retry.js";

/** Monotonic milliseconds. */
export const now = (): number => performance.now();

interface Watched {
  /** One round of the watching that started as `gen`: when the next is due
   * (monotonic ms), or undefined to stop. */
  watchOnce(gen: number): Promise<number | undefined>;
  /** Whether rounds added as `gen` are still this hold's (the others are
   * dropped in bulk instead of each firing the timer when due). */
  watches?(gen: number): boolean;
}

interface Entry {
  at: number;
  seq: number;
  ref: WeakRef<Watched>;
  gen: number;
}

/** Rounds in due order on one timer; holds are held weakly (a hold dropped
 * unreleased is collected, not kept alive by its rounds). */
class Scheduler {
  private heap: Entry[] = [];
  private seq = 0;
  private timer: NodeJS.Timeout | undefined;
  private timerAt = Infinity;
  // The heap's size at which released holds' rounds are dropped (twice
  // what was left last time: O(1) per round added).
  private purgeAt = 64;

  add(hold: Watched, at: number, gen: number): void {
    this.push({ at, seq: this.seq++, ref: new WeakRef(hold), gen });
    if (this.heap.length >= this.purgeAt) this.purge();
    this.arm();
  }

  /** Rounds waiting, released holds' included until purged. */
  get rounds(): number {
    return this.heap.length;
  }

  private purge(): void {
    // A sorted array is a heap.
    this.heap = this.heap
      .filter((e) => {
        // Collected holds go; a hold that cannot tell stays.
        const hold = e.ref.deref();
        return hold !== undefined && (hold.watches?.(e.gen) ?? true);
      })
      .sort((a, b) => (before(a, b) ? -1 : 1));
    this.purgeAt = Math.max(64, 2 * this.heap.length);
  }

  /** Timers running (0 or 1). */
  get timers(): number {
    return this.timer === undefined ? 0 : 1;
  }

  private arm(): void {
    const first = this.heap[0];
    if (first === undefined || first.at >= this.timerAt) return;
    clearTimeout(this.timer);
    this.timerAt = first.at;
    this.timer = setTimeout(() => this.fire(), Math.max(0, first.at - now()));
    // Rounds never keep a process alive on their own.
    this.timer.unref();
  }

  private fire(): void {
    this.timer = undefined;
    this.timerAt = Infinity;
    const t = now();
    while (this.heap.length > 0 && this.heap[0].at <= t) {
      const e = this.pop();
      const hold = e.ref.deref();
      if (hold === undefined) continue;
      void hold
        .watchOnce(e.gen)
        .catch(() => undefined)
        .then((next) => {
          if (next !== undefined) this.add(hold, next, e.gen);
        });
    }
    this.arm();
  }

  private push(e: Entry): void {
    const h = this.heap;
    h.push(e);
    for (let i = h.length - 1; i > 0; ) {
      const p = (i - 1) >> 1;
      if (!before(h[i], h[p])) break;
      [h[i], h[p]] = [h[p], h[i]];
      i = p;
    }
  }

  private pop(): Entry {
    const h = this.heap;
    const top = h[0];
    const last = h.pop() as Entry;
    if (h.length > 0) {
      h[0] = last;
      for (let i = 0; ; ) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < h.length && before(h[l], h[m])) m = l;
        if (r < h.length && before(h[r], h[m])) m = r;
        if (m === i) break;
        [h[i], h[m]] = [h[m], h[i]];
        i = m;
      }
    }
    return top;
  }
}

const before = (a: Entry, b: Entry): boolean => a.at < b.at || (a.at === b.at && a.seq < b.seq);

export const scheduler = new Scheduler();

/** How long a keeper no hold uses stays open (ms). */
const IDLE_MS = 10_000;

/** The connection the holds of one client share. Commands run one at a
 * time; it keeps the process alive only while a hold uses it (`use`/
 * `done`), so a process whose holds are over can exit, and it stays open
 * a while after, so that the next acquire opens none. */
export class Keeper {
  private conn: Conn | undefined;
  private opening: Promise<Conn> | undefined;
  private queue: Promise<unknown> = Promise.resolve();
  private users = 0;
  private idle: NodeJS.Timeout | undefined;
  /** Bumped whenever the connection goes: bindings made on an earlier one
   * are gone. */
  epoch = 0;
  /** The send time of the latest command answered on this epoch's
   * connection: every binding on it was still there then. */
  aliveAt = -Infinity;
  /** The connection's `CLIENT ID`, for a driver that reconnects on its own
   * (glide): a new one is a new epoch, seen by `ping`. */
  private id: string | undefined;

  constructor(private readonly backend: Backend) {}

  use(): void {
    if (this.users++ > 0) return;
    clearTimeout(this.idle);
    this.idle = undefined;
    this.conn?.ref?.(true);
  }

  /** The last hold let go: the connection stays open for the next acquire
   * (none opened per acquire), without keeping the process alive, and is
   * closed once no hold has used it for `IDLE_MS`. A connection that
   * cannot stop keeping the process alive is closed at once. */
  done(): void {
    if (--this.users > 0) return;
    this.users = 0;
    const conn = this.conn;
    if (conn?.ref === undefined) {
      void this.reset();
      return;
    }
    this.idleLater(conn);
  }

  /** An open connection no hold uses: it keeps no process alive, and is
   * closed if still unused `IDLE_MS` from now. */
  private idleLater(conn: Conn): void {
    conn.ref?.(false);
    clearTimeout(this.idle);
    this.idle = setTimeout(() => {
      this.idle = undefined;
      if (this.users === 0) void this.reset();
    }, IDLE_MS);
    this.idle.unref();
  }

  /** `args` on the shared connection after the commands before it; the
   * epoch it went out on comes with the reply. */
  call(run: (conn: Conn) => Promise<unknown>, limit?: number): Promise<{ reply: unknown; epoch: number }> {
    const go = async () => {
      const conn = await this.open(limit);
      const epoch = this.epoch;
      const sent = now();
      const reply = await run(conn);
      if (!this.backend.silentReconnects && epoch === this.epoch) this.aliveAt = Math.max(this.aliveAt, sent);
      return { reply, epoch };
    };
    const result = this.queue.then(go, go);
    this.queue = result.catch(() => undefined);
    return result;
  }

  /** The liveness check of every binding on the connection: a `PING` (a
   * `CLIENT ID` that must not have changed, for a driver that reconnects
   * silently) answered within `limit` ms moves `aliveAt`. */
  async ping(limit: number): Promise<void> {
    // Nothing to check on a connection that is not open (and none opened
    // for it: a keeper no hold uses stays closed).
    if (this.conn === undefined) return;
    const silent = this.backend.silentReconnects === true;
    const sent = now();
    const { reply, epoch } = await this.call((conn) => within(conn.call(silent ? ["CLIENT", "ID"] : ["PING"]), limit), limit);
    if (!silent || epoch !== this.epoch) return;
    if (this.id !== undefined && String(reply) !== this.id) {
      this.epoch++;
      this.aliveAt = -Infinity;
    } else {
      this.aliveAt = Math.max(this.aliveAt, sent);
    }
    this.id = String(reply);
  }

  /** The connection, opened within `limit` ms when there is none (a
   * half-open peer never completes the handshake: the opening is dropped). */
  private async open(limit?: number): Promise<Conn> {
    if (this.conn !== undefined) return this.conn;
    const opening = (this.opening ??= this.backend.open().finally(() => {
      this.opening = undefined;
    }));
    let timer: NodeJS.Timeout | undefined;
    const cut = new Promise<never>((_, reject) => {
      if (limit !== undefined) timer = setTimeout(() => reject(new CallTimeoutError(`not connected within ${limit} ms`)), limit);
    });
    try {
      const conn = await Promise.race([opening, cut]);
      this.id = this.backend.silentReconnects ? String(await within(conn.call(["CLIENT", "ID"]), limit ?? 5000)) : undefined;
      this.conn = conn;
      // Opened for a last look (a ping) or as the last hold let go.
      if (this.users === 0 && conn.ref !== undefined) this.idleLater(conn);
    } catch (e) {
      // Late or failed: closed when it comes, and the next call tries anew.
      if (this.opening === opening) this.opening = undefined;
      void opening.then((c) => c.close()).catch(() => undefined);
      throw e;
    } finally {
      clearTimeout(timer);
    }
    return this.conn;
  }

  /** Closes the connection: every binding on it ends (the holds that still
   * live see `epoch` move and bind again on their next round). */
  async reset(): Promise<void> {
    this.epoch++;
    this.aliveAt = -Infinity;
    const conn = this.conn;
    this.conn = undefined;
    if (conn !== undefined) await conn.close().catch(() => undefined);
  }
}

/** `p`, or a timeout error after `ms`. */
export async function within<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const cut = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new CallTimeoutError(`no reply within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([p, cut]);
  } finally {
    clearTimeout(timer);
  }
}

/** One command on `conn`, cut at `limit` ms or when `signal` aborts. */
export async function exchange(conn: Conn, args: Arg[], limit: number | undefined, signal?: AbortSignal): Promise<unknown> {
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
  } finally {
    clearTimeout(timer);
    if (onAbort !== undefined) signal?.removeEventListener("abort", onAbort);
  }
}

const keepers = new WeakMap<Client, Keeper>();

export function keeperOf(client: Client, backend: Backend): Keeper {
  let k = keepers.get(client);
  if (k === undefined) {
    k = new Keeper(backend);
    keepers.set(client, k);
  }
  return k;
}

/** A hold collected without `release()`: if the server keeps its lease,
 * the shared connection is replaced so that the binding ends (the holds
 * that live bind again); only `release()` ends a hold promptly. */
export const collected = new FinalizationRegistry<{ kept?: Keeper; user?: Keeper }>((box) => {
  const kept = box.kept;
  box.kept = undefined;
  if (kept !== undefined) void kept.reset();
  const user = box.user;
  box.user = undefined;
  user?.done();
});
