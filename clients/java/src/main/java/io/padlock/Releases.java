package io.padlock;

import java.util.List;
import java.util.concurrent.TimeUnit;

/** What a release may be asked of, and what a failed one means for its hold. */
final class Releases {
    private Releases() {}

    /** What a release may be asked of (caller holds the hold's io): throws when there is nothing to release. */
    static void check(SharedHold h) {
        if (h.lost()) {
            if (!h.leftover) {
                h.pad.forget(h); // else kept for the holder's next take to clear
            }
            throw new LockLostException(h.kind.route() + " was lost by " + h.holder);
        }
        if (h.ended || h.depth == 0) {
            throw new IllegalMonitorStateException(h.kind.route() + " is not held by " + h.holder);
        }
    }

    /**
     * A hold lost without the server saying so ({@link SharedHold#leftover}:
     * a renewal or release that got no answer) may still be counted there,
     * and its holder's next take would reenter it (its old fence, a count
     * the caller never sees). Released until the server holds none of it
     * ({@code NOTHELD}, or nothing left), at most 16 times (the rest runs
     * out with its lease). Caller holds io.
     */
    static void clearLeftover(SharedHold h, List<String> release) {
        if (!h.leftover) {
            return;
        }
        h.leftover = false;
        try {
            for (int i = 0; i < 16; i++) {
                if (Replies.asLong(h.send(release, System.nanoTime() + TimeUnit.SECONDS.toNanos(1))) <= 0) {
                    return;
                }
            }
        } catch (RuntimeException gone) {
            // NOTHELD: nothing left; anything else: its lease runs out on its own
        }
    }

    /** Before {@code holder} takes again through {@code handle}: its lost hold's leftover cleared. */
    static void clearBeforeTake(Handle handle, String holder) {
        SharedHold h = handle.pad.existing(handle.kind, holder);
        if (h == null || !h.leftover) {
            return; // almost always: nothing to build or lock
        }
        h.io.lock();
        try {
            clearLeftover(h, handle.releaseArgs(holder, 1));
        } finally {
            h.io.unlock();
        }
    }

    /** {@link #check}, a lost hold's leftover cleared first: its holder lets go of it now (caller holds io). */
    static void check(SharedHold h, List<String> release) {
        if (h.lost()) {
            clearLeftover(h, release);
        }
        check(h);
    }

    /** What a failed release means for the hold (caller holds io), and what to throw. */
    static RuntimeException failed(SharedHold h, Throwable e) {
        if (e instanceof ReplyException r && ("NOTHELD".equals(r.code()) || "WRONGTYPE".equals(r.code()))) {
            h.lose(h.kind.route() + " was lost by " + h.holder + " before its release", true);
            h.pad.forget(h);
            return new LockLostException(r.getMessage());
        }
        if (e instanceof LinkException) {
            // Not known whether it was released: the connection is closed,
            // so nothing keeps the lease; it runs out within one ttl.
            h.lose("the release of " + h.kind.route() + " by " + h.holder + " got no answer");
            h.pad.forget(h);
        }
        return e instanceof RuntimeException r ? r : new LinkException(String.valueOf(e), e);
    }
}
