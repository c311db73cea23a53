// Grants that wait for replicas (`replicas` on every hold): a fresh
// acquire is reported only once `count` replicas have it (`WAIT`, and with
// `aof` `WAITAOF` too), so that a failover within that time cannot hand
// the lock to another holder. Short of that the grant is given back and
// the acquire fails as a timed-out one does (`onShortfall: "release"`), or
// it is kept with a warning (`"warn"`). A final release waits the same way
// and warns on a shortfall. The `WAIT` runs on the process's shared
// connection: while a replica lags it holds that connection up to `timeout`.

import { type Arg } from "./backend.js";

export interface ReplicasOptions {
  /** How many replicas must have the grant (default 1). */
  count?: number;
  /** How long to wait for them, in ms (default 500). */
  timeout?: number;
  /** Short of them: give the grant back (default) or keep it and warn. */
  onShortfall?: "release" | "warn";
  /** Also wait until they wrote it to their AOF (`WAITAOF`, Redis 7.2+). */
  aof?: boolean;
}

export type Replicas = Required<ReplicasOptions>;

/** `replicas: 1` is `{ count: 1 }`; 0 or undefined: no waiting. */
export function replicasOf(v: number | ReplicasOptions | undefined): Replicas | undefined {
  if (v === undefined || v === 0) return undefined;
  const r: Replicas = {
    count: typeof v === "number" ? v : (v.count ?? 1),
    timeout: typeof v === "number" ? 500 : (v.timeout ?? 500),
    onShortfall: typeof v === "number" ? "release" : (v.onShortfall ?? "release"),
    aof: typeof v === "number" ? false : (v.aof ?? false),
  };
  if (!Number.isInteger(r.count) || r.count < 1) throw new RangeError("replicas: count must be a whole number, at least 1");
  if (!(r.timeout > 0)) throw new RangeError("replicas: timeout must be positive (WAIT 0 would wait for ever)");
  if (r.onShortfall !== "release" && r.onShortfall !== "warn") {
    throw new RangeError('replicas: onShortfall is "release" or "warn"');
  }
  return r;
}

export function waitCommands(r: Replicas): Arg[][] {
  const ms = Math.max(1, Math.round(r.timeout));
  const out: Arg[][] = [["WAIT", r.count, ms]];
  if (r.aof) out.push(["WAITAOF", 0, r.count, ms]);
  return out;
}

/** How many replicas have every write so far, by the replies to
 * `waitCommands` (`WAITAOF` answers `[local, replicas]`). */
export function counted(r: Replicas, replies: unknown[]): number {
  let n = Number(replies[0]);
  if (r.aof && Array.isArray(replies[1])) n = Math.min(n, Number(replies[1][1]));
  return n;
}
