/** Base of the errors this library throws. */
export class PadlockError extends Error {
  override name = "PadlockError";
}

/** The holder does not hold the key (any more): `-NOTHELD`. */
export class NotHeldError extends PadlockError {
  override name = "NotHeldError";
}

/** Waiting would close a cycle of the wait-for graph. `cycle` alternates
 * holder, key, holder, ... and ends at the holder that asked. */
export class DeadlockError extends PadlockError {
  override name = "DeadlockError";
  constructor(
    message: string,
    readonly cycle: string[],
  ) {
    super(message);
  }
}

/** The lease ran out, or the key was removed, while the work went on. */
export class LockLostError extends PadlockError {
  override name = "LockLostError";
}

/** `using()` could not get its hold within `blockingTimeout`. */
export class NotAcquiredError extends PadlockError {
  override name = "NotAcquiredError";
}

/** The server's reply text of an error, whatever the client wraps it in. */
export function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** Turns padlock's error replies into their classes. */
export function translate(err: unknown): unknown {
  const text = errorText(err);
  if (text.startsWith("DEADLOCK")) {
    return new DeadlockError(text, text.slice("DEADLOCK ".length).split(" -> "));
  }
  if (text.startsWith("NOTHELD")) {
    return new NotHeldError(text);
  }
  return err;
}

export const isTryAgain = (err: unknown): boolean => errorText(err).startsWith("TRYAGAIN");

/** The key's slot lives on another node now (a resharding). */
export const isMoved = (err: unknown): boolean => errorText(err).startsWith("MOVED ");
