package io.padlock;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.Lock;

/** {@link Lock} on top of {@link Handle}, for every kind that holds one unit per call. */
abstract class LockBase extends Handle implements Lock {
    LockBase(Padlock pad, Kind kind, String fixedHolder, long ttlMs) {
        super(pad, kind, fixedHolder, ttlMs);
    }

    LockBase(Padlock pad, Kind kind, String fixedHolder, long ttlMs, boolean plain) {
        super(pad, kind, fixedHolder, ttlMs, plain);
    }

    /**
     * Waits as long as it takes (interrupts are kept for later, as
     * {@code ReentrantLock.lock} does). Throws {@link DeadlockException}
     * when waiting would close a cycle.
     */
    @Override
    public void lock() {
        boolean interrupted = false;
        while (true) {
            try {
                take(1, -1, false);
                break;
            } catch (InterruptedException e) {
                interrupted = true;
            }
        }
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
    }

    /** Waits until granted or interrupted; an interrupt leaves the server's queue at once. */
    @Override
    public void lockInterruptibly() throws InterruptedException {
        take(1, -1, true);
    }

    /** Only when free now (or held by this holder already): never waits. */
    @Override
    public boolean tryLock() {
        try {
            return take(1, 0, false);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
    }

    @Override
    public boolean tryLock(long time, TimeUnit unit) throws InterruptedException {
        return take(1, Math.max(0, unit.toMillis(time)), true);
    }

    /** One hold fewer. Not held by this thread's holder: {@link IllegalMonitorStateException}; lost: {@link LockLostException}. */
    @Override
    public void unlock() {
        give(1);
    }

    /** Conditions would need the server to wait and reacquire: not offered. */
    @Override
    public Condition newCondition() {
        throw new UnsupportedOperationException("padlock locks have no conditions");
    }

    /**
     * {@link #lock()} without a thread waiting: the future completes (true)
     * once granted, from the mailbox reader. Cancel it to leave the queue (a
     * grant that raced the cancel is given back). The holder is the calling
     * thread's, taken now: release from the same thread, or use
     * {@code withHolder}.
     */
    public CompletableFuture<Boolean> lockAsync() {
        return takeAsync(1, -1);
    }

    /** {@link #tryLock()} as a future. */
    public CompletableFuture<Boolean> tryLockAsync() {
        return takeAsync(1, 0);
    }

    /** {@link #tryLock(long, TimeUnit)} without a thread waiting; false when not granted in time. */
    public CompletableFuture<Boolean> tryLockAsync(long time, TimeUnit unit) {
        return takeAsync(1, Math.max(0, unit.toMillis(time)));
    }

    /** {@link #unlock()} on one of padlock's threads, for the calling thread's holder. */
    public CompletableFuture<Void> unlockAsync() {
        return giveAsync(1);
    }

    /** Locks (waiting as {@link #lock()}) and returns the hold for try-with-resources. */
    public Held hold() {
        lock();
        return new Held(this);
    }

    /** Like {@link #tryLock(long, TimeUnit)}, as a hold; null when not acquired in time. */
    public Held tryHold(long time, TimeUnit unit) throws InterruptedException {
        return tryLock(time, unit) ? new Held(this) : null;
    }

    /** True while this thread's holder holds it and its lease cannot have run out. */
    public boolean isHeldByCurrentThread() {
        SharedHold h = mine();
        return h != null && h.held();
    }

    /** True once this thread's hold was lost (lease gone, key deleted or replaced) until it is taken again. */
    public boolean isLost() {
        SharedHold h = pad.existing(kind, holder());
        return h != null && h.lost();
    }

    /** Called (on padlock's scheduler thread) when a hold taken through this object is lost. */
    public void onLost(Runnable listener) {
        this.onLost = listener;
    }

    /** A hold released by {@code close()}: {@code try (Held h = lock.hold()) { ... }}. */
    public static final class Held implements AutoCloseable {
        private final LockBase lock;
        private boolean closed;

        Held(LockBase lock) {
            this.lock = lock;
        }

        /** True while the lease cannot have run out. */
        public boolean isHeld() {
            return !closed && lock.isHeldByCurrentThread();
        }

        /** Throws {@link LockLostException} when the hold was lost: call it between steps of long work. */
        public void check() {
            if (closed || !lock.isHeldByCurrentThread()) {
                throw new LockLostException(lock.kind.route() + " is no longer held by " + lock.holder());
            }
        }

        @Override
        public void close() {
            if (!closed) {
                closed = true;
                lock.unlock();
            }
        }
    }
}
