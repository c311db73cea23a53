package io.padlock;

import java.util.concurrent.Semaphore;

/**
 * A hold's guard ({@link SharedHold#io}): one send at a time, and the counts
 * it changes. Not owned by a thread, as a {@code ReentrantLock} is: an async
 * release takes it on one thread and gives it back on whichever counts the
 * reply in, so no thread waits through the round trip. Never taken twice by
 * one holder of it.
 */
final class IoLock {
    private final Semaphore permit = new Semaphore(1);

    void lock() {
        permit.acquireUninterruptibly();
    }

    boolean tryLock() {
        return permit.tryAcquire();
    }

    void unlock() {
        permit.release();
    }
}
