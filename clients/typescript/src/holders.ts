// Holders from the caller's context. Node runs unrelated requests on one
// thread, so there is no per-thread default: `withHolder(fn)` runs `fn` in
// an `AsyncLocalStorage` scope whose holder every padlock object acquired
// inside takes (a function that holds `order:1001` and calls one that
// locks `order:1001` again reenters); outside any scope each object keeps
// its own random holder. An explicit `holder` option always wins.

import { AsyncLocalStorage } from "node:async_hooks";
import { randomBytes } from "node:crypto";

const scope = new AsyncLocalStorage<string>();

/** A random 128-bit holder id, as hex. */
export function newHolder(): string {
  return randomBytes(16).toString("hex");
}

/** Runs `fn` with `holder` (a new random one by default) as the holder of
 * every padlock hold acquired inside it, through its awaits and callbacks. */
export function withHolder<T>(fn: () => T, holder: string = newHolder()): T {
  return scope.run(holder, fn);
}

/** The holder of the running scope, if any. */
export function currentHolder(): string | undefined {
  return scope.getStore();
}

/** How many holds this process's hold objects took per (key, holder):
 * objects of one holder share the server's count, so a release that
 * leaves the key held is another object's hold unless none is left. An
 * object collected unreleased counts no more (weakly kept). */
const counts = new Map<string, Map<WeakRef<object>, number>>();
const slot = (key: string, holder: string): string => `${key.length}:${key}${holder}`;

/** The holds of live objects in `by`; collected ones are dropped. */
function live(by: Map<WeakRef<object>, number>): number {
  let n = 0;
  for (const [r, c] of by) {
    if (r.deref() === undefined) by.delete(r);
    else n += c;
  }
  return n;
}

/** One more hold of the object `r` names (its own weak reference, made once). */
export function took(key: string, holder: string, r: WeakRef<object>): void {
  const k = slot(key, holder);
  let by = counts.get(k);
  if (by === undefined) counts.set(k, (by = new Map()));
  by.set(r, (by.get(r) ?? 0) + 1);
}

/** Holds lost without the server saying so (a renewal or release that got
 * no answer), by the release that gives one back and until when it may
 * still count: the server may count them, and a new take by their holder
 * would reenter one (its old fence, a count nobody sees). Kept twice the
 * ttl (10 s at least: past that the server has let it run out), at most
 * `LEFT_MAX` at once, so holders never seen again cost nothing. */
const leftovers = new Map<string, { release: unknown[]; until: number }>();
export const LEFT_MAX = 10_000;

/** Whether any hold is left over: a fresh take asks only then. */
export const hasLeftovers = (): boolean => leftovers.size > 0;

export function leftOver(key: string, holder: string, release: unknown[], ttlMs: number): void {
  const now = performance.now();
  if (leftovers.size >= LEFT_MAX) {
    for (const [k, v] of leftovers) if (v.until <= now) leftovers.delete(k);
    // Then the oldest (a Map keeps insertion order).
    for (const k of leftovers.keys()) {
      if (leftovers.size < LEFT_MAX) break;
      leftovers.delete(k);
    }
  }
  leftovers.set(slot(key, holder), { release, until: now + Math.max(2 * ttlMs, 10_000) });
}

/** The release of a hold left over, taken, once no hold object of its
 * holder holds the key here (else the server counts theirs). */
export function leftover(key: string, holder: string): unknown[] | undefined {
  const k = slot(key, holder);
  const by = counts.get(k);
  if (by !== undefined && live(by)) return undefined;
  const got = leftovers.get(k);
  leftovers.delete(k);
  return got !== undefined && got.until > performance.now() ? got.release : undefined;
}

/** Counts `n` holds of the object `r` names given back; the holds left, of every object. */
export function gave(key: string, holder: string, r: WeakRef<object>, n = 1): number {
  const k = slot(key, holder);
  const by = counts.get(k);
  if (by === undefined) return 0;
  const mine = (by.get(r) ?? 0) - n;
  if (mine > 0) by.set(r, mine);
  else by.delete(r);
  const left = live(by);
  if (!left) counts.delete(k);
  return left;
}
