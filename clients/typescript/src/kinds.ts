// The kinds of hold: what each sends to acquire, renew and release, and
// what its replies mean.

import { type Arg, type Client, backendOf } from "./backend.js";
import { type AcquireOptions, Hold, type HoldOptions, blockArgs, newHolder } from "./hold.js";
import { asMap } from "./replies.js";

export { asMap };

const big = (v: unknown): bigint => BigInt(String(v));

/** A holder's lease left in a `SEM.INFO`/`RWLOCK.INFO` reply (its entry's
 * last field), undefined when it is not among the holders. */
function holderLeft(info: Record<string, unknown>, holder: string): number | undefined {
  const raw = info.holders;
  const pairs: [unknown, unknown][] =
    raw instanceof Map
      ? [...raw]
      : Array.isArray(raw)
        ? raw.flatMap((v, i) => (i % 2 === 0 ? [[v, raw[i + 1]] as [unknown, unknown]] : []))
        : [];
  for (const [h, entry] of pairs) {
    if (String(h) === holder && Array.isArray(entry)) return Number(entry[entry.length - 1]);
  }
  return undefined;
}

/** Runs one command on a connection opened for it. */
async function once(client: Client, args: Arg[]): Promise<unknown> {
  const conn = await backendOf(client).open();
  try {
    return await conn.call(args);
  } finally {
    await conn.close();
  }
}

/** A hold whose grant is one fencing token (locks, read-write modes). */
abstract class FencedHold extends Hold {
  /** The fence of the current hold. */
  fence: bigint | undefined;

  protected took(reply: unknown): bigint {
    this.fence = big(reply);
    return this.fence;
  }

  /** The fence, or null when not acquired (not `blocking`, or `timeout` ms passed). */
  async acquire(options: AcquireOptions = {}): Promise<bigint | null> {
    const reply = await this.acquireRaw(options);
    return reply === null ? null : this.took(reply);
  }
}

/** A reentrant lock with a lease and a fencing token. */
export class Lock extends FencedHold {
  constructor(
    private readonly client: Client,
    key: string,
    options: HoldOptions = {},
  ) {
    super(client, key, options);
  }

  protected acquireArgs(blocking: boolean, timeout: number | undefined): Arg[] {
    return ["LOCK.ACQUIRE", this.key, this.holder, this.ttl, ...blockArgs(blocking, timeout)];
  }
  protected extendArgs(): Arg[][] {
    return [["LOCK.EXTEND", this.key, this.holder, this.ttl]];
  }
  protected releaseArgs(): Arg[] {
    return ["LOCK.RELEASE", this.key, this.holder];
  }
  protected releasedAll(reply: unknown): boolean {
    return Number(reply) === 0;
  }

  /** `LOCK.INFO`: holder, count, fence, ttl, waiters, keep ({} when free). */
  async info(): Promise<Record<string, unknown>> {
    return asMap(await once(this.client, ["LOCK.INFO", this.key]));
  }

  /** Whether this holder holds the key, as the server sees it now. */
  async owned(): Promise<boolean> {
    return String((await this.info()).holder ?? "") === this.holder;
  }
}

export interface SemaphoreOptions extends HoldOptions {
  /** Permits this holder takes (default 1). */
  permits?: number;
}

/** A counting semaphore: up to `limit` permits, each holder its own lease. */
export class Semaphore extends Hold {
  readonly permits: number;

  constructor(
    private readonly client: Client,
    key: string,
    readonly limit: number,
    options: SemaphoreOptions = {},
  ) {
    super(client, key, options);
    this.permits = options.permits ?? 1;
  }

  protected acquireArgs(blocking: boolean, timeout: number | undefined): Arg[] {
    return ["SEM.ACQUIRE", this.key, this.holder, this.limit, this.ttl, "PERMITS", this.permits,
      ...blockArgs(blocking, timeout)];
  }
  protected extendArgs(): Arg[][] {
    return [["SEM.EXTEND", this.key, this.holder, this.ttl, "PERMITS", this.permits]];
  }
  protected override lookArgs(): Arg[][] {
    return [["SEM.INFO", this.key]];
  }
  protected override oneLeft(info: Record<string, unknown>): number | undefined {
    return holderLeft(info, this.holder);
  }
  protected releaseArgs(): Arg[] {
    return ["SEM.RELEASE", this.key, this.holder, "PERMITS", this.permits];
  }
  protected releasedAll(reply: unknown): boolean {
    return Number(reply) === 0;
  }
  protected took(reply: unknown): number {
    return Number(reply);
  }

  /** The permits this holder now holds, or null. */
  async acquire(options: AcquireOptions = {}): Promise<number | null> {
    const reply = await this.acquireRaw(options);
    return reply === null ? null : this.took(reply);
  }

  async info(): Promise<Record<string, unknown>> {
    return asMap(await once(this.client, ["SEM.INFO", this.key]));
  }
}

/** Several locks taken all at once or not at all. In a cluster the keys
 * must share a `{hash tag}`. */
export class MultiLock extends Hold {
  readonly keys: string[];
  fences: bigint[] | undefined;

  constructor(client: Client, keys: string[], options: HoldOptions = {}) {
    super(client, keys[0] ?? "", options);
    this.keys = [...keys];
  }

  protected acquireArgs(blocking: boolean, timeout: number | undefined): Arg[] {
    return ["LOCK.MACQUIRE", this.keys.length, ...this.keys, this.holder, this.ttl,
      ...blockArgs(blocking, timeout)];
  }
  protected extendArgs(): Arg[][] {
    return this.keys.map((k) => ["LOCK.EXTEND", k, this.holder, this.ttl]);
  }
  protected override lookArgs(): Arg[][] {
    return this.keys.map((k) => ["LOCK.INFO", k]);
  }
  protected releaseArgs(): Arg[] {
    return ["LOCK.MRELEASE", this.keys.length, ...this.keys, this.holder];
  }
  protected releasedAll(reply: unknown): boolean {
    return (reply as unknown[]).every((c) => Number(c) === 0);
  }
  protected took(reply: unknown): bigint[] {
    this.fences = (reply as unknown[]).map(big);
    return this.fences;
  }

  /** The fences, one per key, or null. */
  async acquire(options: AcquireOptions = {}): Promise<bigint[] | null> {
    const reply = await this.acquireRaw(options);
    return reply === null ? null : this.took(reply);
  }
}

/** One mode of a `ReadWriteLock`. */
export class RwHold extends FencedHold {
  constructor(client: Client, key: string, readonly mode: "READ" | "WRITE", options: HoldOptions) {
    super(client, key, options);
  }

  protected acquireArgs(blocking: boolean, timeout: number | undefined): Arg[] {
    return ["RWLOCK.ACQUIRE", this.key, this.holder, this.mode, this.ttl, ...blockArgs(blocking, timeout)];
  }
  protected extendArgs(): Arg[][] {
    return [["RWLOCK.EXTEND", this.key, this.holder, this.ttl]];
  }
  protected override lookArgs(): Arg[][] {
    return [["RWLOCK.INFO", this.key]];
  }
  protected override oneLeft(info: Record<string, unknown>): number | undefined {
    return holderLeft(info, this.holder);
  }
  protected releaseArgs(): Arg[] {
    return ["RWLOCK.RELEASE", this.key, this.holder, this.mode];
  }
  protected releasedAll(): boolean {
    return this.depth === 0; // counted per mode here
  }
}

/** A fair read-write lock. Both modes belong to one holder: a reader may
 * upgrade (`write()` while reading, granted once it reads alone) or
 * downgrade. */
export class ReadWriteLock {
  private readonly readHold: RwHold;
  private readonly writeHold: RwHold;

  constructor(
    private readonly client: Client,
    readonly key: string,
    options: HoldOptions = {},
  ) {
    // Both modes: the same holder (the option's, the scope's, or one of
    // this object's own).
    const shared = { ...options, fallbackHolder: options.fallbackHolder ?? newHolder() };
    this.readHold = new RwHold(client, key, "READ", shared);
    this.writeHold = new RwHold(client, key, "WRITE", shared);
  }

  /** Who holds now (see `HoldOptions.holder`). */
  get holder(): string {
    return this.readHold.holds > 0 ? this.readHold.holder : this.writeHold.holder;
  }

  read(): RwHold {
    return this.readHold;
  }

  write(): RwHold {
    return this.writeHold;
  }

  async info(): Promise<Record<string, unknown>> {
    return asMap(await once(this.client, ["RWLOCK.INFO", this.key]));
  }
}

/** One edge of `LOCK.GRAPH`. */
export interface Edge {
  waiter: string;
  key: string;
  holders: string[];
  /** ms left; -1 waits forever */
  ttlMs: number;
  /** the key's database */
  db: number;
}

/** `LOCK.GRAPH` as data. */
export async function graph(client: Client): Promise<Edge[]> {
  const raw = (await once(client, ["LOCK.GRAPH"])) as unknown[][];
  return raw.map(([w, k, hs, t, db]) => ({
    waiter: String(w),
    key: String(k),
    holders: (hs as unknown[]).map(String),
    ttlMs: Number(t),
    db: Number(db ?? 0),
  }));
}

/** One row of `LOCK.TOP`: a key with waiters right now. */
export interface Hot {
  key: string;
  kind: "lock" | "sem" | "rwlock";
  waiters: number;
  oldestWaitMs: number;
  holders: number;
  /** the key's database */
  db: number;
}

/**
 * `LOCK.TOP`: the keys with the most waiters right now, most first (of one
 * node; in a cluster, of each node you ask).
 */
export async function top(client: Client, count = 10): Promise<Hot[]> {
  const raw = (await once(client, ["LOCK.TOP", "COUNT", count])) as unknown[][];
  return raw.map(([k, kind, w, o, h, db]) => ({
    key: String(k),
    kind: String(kind) as Hot["kind"],
    waiters: Number(w),
    oldestWaitMs: Number(o),
    holders: Number(h),
    db: Number(db ?? 0),
  }));
}

/** The graph in Graphviz DOT: holders as ellipses, keys as boxes. */
export function toDot(edges: Edge[]): string {
  const q = (s: string) => JSON.stringify(s);
  const lines = ["digraph padlock {"];
  for (const key of [...new Set(edges.map((e) => e.key))].sort()) {
    lines.push(`  ${q(`key:${key}`)} [shape=box, label=${q(key)}];`);
  }
  for (const e of edges) {
    const label = e.ttlMs < 0 ? "forever" : `${e.ttlMs} ms`;
    lines.push(`  ${q(e.waiter)} -> ${q(`key:${e.key}`)} [label=${q(label)}];`);
  }
  const held = new Set(edges.flatMap((e) => e.holders.map((h) => `  ${q(`key:${e.key}`)} -> ${q(h)} [style=dashed];`)));
  lines.push(...held);
  lines.push("}");
  return lines.join("\n");
}
