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

/** How many holds this process took per (key, holder), over all hold
 * objects: objects of one holder share the server's count, so a release
 * that leaves the key held is another object's hold unless none is left. */
const counts = new Map<string, number>();
const slot = (key: string, holder: string): string => `${key.length}:${key}${holder}`;

export function took(key: string, holder: string): void {
  const k = slot(key, holder);
  counts.set(k, (counts.get(k) ?? 0) + 1);
}

/** Counts `n` holds given back; the holds left. */
export function gave(key: string, holder: string, n = 1): number {
  const k = slot(key, holder);
  const left = Math.max(0, (counts.get(k) ?? 0) - n);
  if (left) counts.set(k, left);
  else counts.delete(k);
  return left;
}
