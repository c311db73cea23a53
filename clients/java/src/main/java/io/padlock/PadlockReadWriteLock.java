package io.padlock;

import java.util.List;
import java.util.concurrent.locks.ReadWriteLock;

/**
 * A fair read-write lock ({@code RWLOCK.*}), reentrant per thread like
 * {@code ReentrantReadWriteLock} in fair mode, plus upgrade: a thread that
 * only reads may take the write lock once it is the only holder left (a
 * second reader waiting to upgrade gets {@link DeadlockException}); a writer
 * may take read holds and release the write lock (downgrade).
 */
public final class PadlockReadWriteLock implements ReadWriteLock {
    private final Padlock pad;
    private final String key;
    private final String holder;
    private final long ttlMs;
    private final Mode read;
    private final Mode write;

    PadlockReadWriteLock(Padlock pad, String key, String holder, long ttlMs) {
        this.pad = pad;
        this.key = key;
        this.holder = holder;
        this.ttlMs = ttlMs;
        this.read = new Mode(this, "READ");
        this.write = new Mode(this, "WRITE");
    }

    public PadlockReadWriteLock withHolder(String holder) {
        return new PadlockReadWriteLock(pad, key, holder, ttlMs);
    }

    @Override
    public Mode readLock() {
        return read;
    }

    @Override
    public Mode writeLock() {
        return write;
    }

    public String key() {
        return key;
    }

    /** Read holds of this thread's holder. */
    public int getReadHoldCount() {
        SharedHold h = read.mine();
        return h == null || h.lost() ? 0 : (int) h.reads;
    }

    /** Write holds of this thread's holder. */
    public int getWriteHoldCount() {
        SharedHold h = read.mine();
        return h == null || h.lost() ? 0 : (int) h.writes;
    }

    public boolean isWriteLockedByCurrentThread() {
        SharedHold h = read.mine();
        return h != null && h.held() && h.writes > 0;
    }

    /** The fence of this thread's holder (one per holder, the same on reentry and upgrade); -1 when not held. */
    public long fence() {
        SharedHold h = read.mine();
        return h == null || !h.held() ? -1 : h.fence;
    }

    /** One side of the lock; both share the holder's one hold and lease. */
    public static final class Mode extends LockBase {
        private final PadlockReadWriteLock rw;
        private final String mode;

        Mode(PadlockReadWriteLock rw, String mode) {
            super(rw.pad, Kind.LeasedKind.readWrite(rw.key), rw.holder, rw.ttlMs);
            this.rw = rw;
            this.mode = mode;
        }

        public PadlockReadWriteLock readWriteLock() {
            return rw;
        }

        @Override
        List<String> acquireArgs(String holder, long units) {
            return List.of("RWLOCK.ACQUIRE", rw.key, holder, mode, Long.toString(ttlMs));
        }

        @Override
        void took(SharedHold h, Object reply, long units) {
            h.fence = Replies.asLong(reply);
            if ("READ".equals(mode)) {
                h.reads++;
            } else {
                h.writes++;
            }
            h.depth = h.reads + h.writes;
        }

        @Override
        List<String> releaseArgs(String holder, long units) {
            return List.of("RWLOCK.RELEASE", rw.key, holder, mode);
        }

        @Override
        boolean released(SharedHold h, Object reply, long units) {
            List<?> left = Replies.asList(reply);
            h.reads = Replies.asLong(left.get(0));
            h.writes = Replies.asLong(left.get(1));
            h.depth = h.reads + h.writes;
            return h.depth == 0;
        }

        /** Release of a mode this holder does not hold is refused before anything is sent. */
        @Override
        public void unlock() {
            SharedHold h = mine();
            if (h != null && !h.lost() && ("READ".equals(mode) ? h.reads : h.writes) == 0) {
                throw new IllegalMonitorStateException(rw.key + " is not " + mode.toLowerCase() + "-held by " + holder());
            }
            super.unlock();
        }

        @Override
        public String toString() {
            return "PadlockReadWriteLock[" + rw.key + "]." + mode.toLowerCase() + "Lock";
        }
    }
}
