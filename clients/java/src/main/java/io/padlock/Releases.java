package io.padlock;

/** What a release may be asked of, and what a failed one means for its hold. */
final class Releases {
    private Releases() {}

    /** What a release may be asked of (caller holds the hold's io): throws when there is nothing to release. */
    static void check(SharedHold h) {
        if (h.lost()) {
            h.pad.forget(h);
            throw new LockLostException(h.kind.route() + " was lost by " + h.holder);
        }
        if (h.ended || h.depth == 0) {
            throw new IllegalMonitorStateException(h.kind.route() + " is not held by " + h.holder);
        }
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
