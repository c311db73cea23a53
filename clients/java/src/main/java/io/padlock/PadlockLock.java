package io.padlock;

import java.time.Duration;
import java.util.List;

/**
 * A reentrant lock on one key: {@code LOCK.ACQUIRE} with {@code KEEP}. The
 * holder is the calling thread's ({@code clientId:threadId}), so nested code
 * in one thread reenters and two threads exclude each other, as with
 * {@code ReentrantLock}; {@link #withHolder} names one instead (work that
 * moves between threads, virtual threads handed around).
 */
public final class PadlockLock extends LockBase {
    private final String key;

    PadlockLock(Padlock pad, List<String> keys, String holder, long ttlMs) {
        super(pad, new Kind.LockKind(keys), holder, ttlMs);
        this.key = keys.get(0);
    }

    /** The same lock acting for {@code holder} whatever the thread. */
    public PadlockLock withHolder(String holder) {
        return new PadlockLock(pad, kind.keys, holder, ttlMs);
    }

    /** The same lock with another lease (the grace a hold outlives its connection by). */
    public PadlockLock withTtl(Duration ttl) {
        return new PadlockLock(pad, kind.keys, fixedHolder, ttl.toMillis());
    }

    public String key() {
        return key;
    }

    /** The fencing token of this thread's hold (the same for every reentry); -1 when not held. */
    public long fence() {
        SharedHold h = mine();
        return h == null || !h.held() ? -1 : h.fence;
    }

    /** How many times this thread's holder holds it (0 when not). */
    public int getHoldCount() {
        SharedHold h = mine();
        return h == null || h.lost() ? 0 : (int) h.depth;
    }

    /** Whether anyone holds it now (one read). */
    public boolean isLocked() {
        Object info = pad.driver.open(key).callAndClose(5000, List.of("LOCK.INFO", key));
        return info != null;
    }

    @Override
    List<String> acquireArgs(String holder, long units) {
        return List.of("LOCK.ACQUIRE", key, holder, Long.toString(ttlMs));
    }

    @Override
    void took(SharedHold h, Object reply, long units) {
        h.fence = Replies.asLong(reply);
        h.depth++;
    }

    @Override
    List<String> releaseArgs(String holder, long units) {
        return List.of("LOCK.RELEASE", key, holder);
    }

    @Override
    boolean released(SharedHold h, Object reply, long units) {
        long left = Replies.asLong(reply);
        h.depth = Math.max(0, h.depth - 1);
        while (h.depth == 0 && left > 0) {
            // Holds this process did not count (a reentry whose reply was lost
            // before request-ids): released too, or the lock would outlive us.
            pad.log(key + " was still held " + left + " more time(s) by " + h.holder + ": released");
            left = Replies.asLong(h.send(releaseArgs(h.holder, 1), System.nanoTime() + 5_000_000_000L));
        }
        return h.depth == 0;
    }

    @Override
    public String toString() {
        return "PadlockLock[" + key + "]";
    }
}
