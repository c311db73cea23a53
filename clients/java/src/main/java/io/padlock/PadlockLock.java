package io.padlock;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;

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
        this(pad, keys, holder, ttlMs, false);
    }

    private PadlockLock(Padlock pad, List<String> keys, String holder, long ttlMs, boolean plain) {
        super(pad, new Kind.LockKind(keys), holder, ttlMs, plain);
        this.key = keys.get(0);
    }

    /** The same lock acting for {@code holder} whatever the thread. */
    public PadlockLock withHolder(String holder) {
        return new PadlockLock(pad, kind.keys, holder, ttlMs, plain);
    }

    /** The same lock with another lease (the grace a hold outlives its connection by). */
    public PadlockLock withTtl(Duration ttl) {
        return new PadlockLock(pad, kind.keys, fixedHolder, ttl.toMillis(), plain);
    }

    /**
     * The same lock with a plain lease: acquired without {@code KEEP} and
     * never renewed, a hold runs out {@code lease} after its acquire even
     * while its holder lives (what Redisson's {@code leaseTime} means); an
     * unlock after that throws {@link LockLostException}.
     */
    public PadlockLock withLease(Duration lease) {
        return new PadlockLock(pad, kind.keys, fixedHolder, Math.max(1, lease.toMillis()), true);
    }

    /**
     * Resets the lease of this thread's hold now, to {@code ttl} (null: the
     * lock's own); false when it holds nothing here. A plain lease then runs
     * out {@code ttl} from now.
     */
    public boolean renew(Duration ttl) {
        SharedHold h = mine();
        if (h == null) {
            return false;
        }
        h.io.lock();
        try {
            if (h.ended || !h.held()) {
                return false;
            }
            long ms = ttl == null ? ttlMs : Math.max(1, ttl.toMillis());
            long sent = System.nanoTime();
            try {
                h.send(List.of("LOCK.EXTEND", key, h.holder, Long.toString(ms)), sent + TimeUnit.SECONDS.toNanos(5));
            } catch (ReplyException e) {
                if ("NOTHELD".equals(e.code())) {
                    return false;
                }
                throw e;
            }
            h.extendedPlain(sent, ms);
            return true;
        } finally {
            h.io.unlock();
        }
    }

    // ---- Redisson's RLock shape -------------------------------------------------

    /**
     * Waits as {@link #lock()} does, for a plain lease of {@code leaseTime}
     * (Redisson's {@code lock(leaseTime, unit)}); {@code leaseTime <= 0}: a
     * lease kept while this process lives, as {@link #lock()}.
     */
    public void lock(long leaseTime, TimeUnit unit) {
        (leaseTime > 0 ? withLease(Duration.ofMillis(unit.toMillis(leaseTime))) : this).lock();
    }

    /** Waits up to {@code waitTime} for a plain lease of {@code leaseTime} (Redisson's three-argument {@code tryLock}). */
    public boolean tryLock(long waitTime, long leaseTime, TimeUnit unit) throws InterruptedException {
        return (leaseTime > 0 ? withLease(Duration.ofMillis(unit.toMillis(leaseTime))) : this).tryLock(waitTime, unit);
    }

    /**
     * Frees the lock whoever holds it (an administrator's release, Redisson's
     * {@code forceUnlock}): the key is deleted, its holder's kept lease is
     * reported lost to it, and the first waiter is served. True when a lock
     * was there.
     */
    public boolean forceUnlock() {
        Object gone = pad.driver.open(key).callAndClose(5000, List.of("DEL", key));
        return Replies.asLong(gone) > 0;
    }

    /**
     * The lease left in ms (Redisson's {@code remainTimeToLive}): -2 when the
     * lock is free. A lease kept with {@code KEEP} shows its ttl, what it
     * gets once nothing keeps it.
     */
    public long remainTimeToLive() {
        Object info = pad.driver.open(key).callAndClose(5000, List.of("LOCK.INFO", key));
        if (info == null) {
            return -2;
        }
        Object ttl = Replies.asMap(info).get("ttl");
        return ttl == null ? -1 : Replies.asLong(ttl);
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
