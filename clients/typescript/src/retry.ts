// How a hold's commands are resent, and what each failure means.
//
// Every changing command carries a fresh request-id (`ID`, docs/commands.md "Retries");
// on a connection error or timeout the same command, with the same id, is
// sent again on a fresh connection until the caller's deadline. The server
// answers a resend of an applied request with its first reply and changes
// nothing, so a lost reply never doubles a reentry or frees a nested hold.
// The drivers' own resends are off for a hold's connections (see backend).

import { randomBytes } from "node:crypto";
import { type Arg } from "./backend.js";
import { NotHeldError, PadlockError, errorText } from "./errors.js";

/** No reply within the time a command may take on the wire. */
export class CallTimeoutError extends Error {
  override name = "CallTimeoutError";
}

export enum Verdict {
  /** Send the same request (same id) again, if time is left. */
  Resend,
  /** The hold is gone. */
  Lost,
  /** The caller's to handle. */
  Raise,
}

// 96 random bits per process, then a counter: unique without asking the
// system for randomness on every request (a tenth of an acquire's time).
const ID_PREFIX = randomBytes(12).toString("hex") + ":";
let idCounter = 0;

/** A fresh request-id, never used before by any process (w.h.p.). */
export const requestId = (): string => ID_PREFIX + (++idCounter).toString(36);

export const withId = (args: Arg[], rid: string | undefined): Arg[] =>
  rid === undefined ? args : [...args, "ID", rid];

/** An error reply of the server (ioredis' `ReplyError`, node-redis'
 * `ErrorReply`), as opposed to a connection that failed. */
export function isServerError(err: unknown): boolean {
  if (err instanceof PadlockError) return true;
  for (let p = err; p !== null && typeof p === "object"; p = Object.getPrototypeOf(p)) {
    const name = (p as { constructor?: { name?: string } }).constructor?.name;
    if (name === "ReplyError" || name === "ErrorReply") return true;
  }
  return false;
}

/** What `err` means while `phase` runs: "acquire" (one that may wait),
 * "try" (one that does not), "renew" or "release". A failed connection or a
 * timeout: resend. `NOTHELD`, or `WRONGTYPE` once the hold exists: lost.
 * While renewing, any other error (OOM, NOPERM, a restart grace) is retried
 * until the lease could have run out. */
export function verdict(err: unknown, phase: string): Verdict {
  const acquiring = phase === "acquire" || phase === "try";
  if (err instanceof NotHeldError) return acquiring ? Verdict.Raise : Verdict.Lost;
  if (!isServerError(err)) return Verdict.Resend;
  const text = errorText(err);
  if (text.startsWith("WRONGTYPE")) return acquiring ? Verdict.Raise : Verdict.Lost;
  if (phase === "renew" || (text.startsWith("TRYAGAIN") && phase !== "try")) return Verdict.Resend;
  return Verdict.Raise;
}

/** An older server answers an option it does not know with a syntax error. */
export const isUnknownOption = (err: unknown): boolean =>
  isServerError(err) && errorText(err).includes("syntax error");

/** `-MOVED` redirects one request follows (a map read while the cluster
 * settles may still name the old owner). */
export const MAX_MOVES = 8;

/** Milliseconds before resend number `attempt` (10 ms doubling up to
 * 500 ms), or undefined when the deadline leaves no time for it. */
export function pause(attempt: number, now: number, deadline: number | undefined): number | undefined {
  const p = Math.min(10 * 2 ** attempt, 500);
  if (deadline !== undefined && now + p >= deadline) {
    const left = deadline - now;
    return left > 1 ? left : undefined;
  }
  return p;
}

export const lostMessage = (key: string, holder: string, why: unknown): string =>
  `${key}: the hold of ${holder} is lost (${errorText(why)})`;
