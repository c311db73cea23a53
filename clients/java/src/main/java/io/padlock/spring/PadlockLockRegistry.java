package io.padlock.spring;

import io.padlock.Padlock;
import io.padlock.PadlockLock;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import org.springframework.integration.support.locks.DistributedLock;
import org.springframework.integration.support.locks.ExpirableLockRegistry;
import org.springframework.integration.support.locks.RenewableLockRegistry;

/**
 * Spring Integration's {@code LockRegistry} on padlock, for aggregators,
 * {@code LockRegistryLeaderInitiator} and {@code executeLocked}: where
 * {@code RedisLockRegistry} spin-polls (or waits for pub/sub), a padlock
 * lock waits in the server's FIFO queue and is handed over the moment it is
 * released.
 *
 * <pre>{@code
 * @Bean
 * LockRegistry<DistributedLock> lockRegistry(Padlock padlock) {
 *     return new PadlockLockRegistry(padlock, "orders");
 * }
 * }</pre>
 *
 * <p>{@code obtain(key)} is the lock at {@code registryKey + ":" + key},
 * reentrant per thread as the contract asks. {@code lock()}/{@code tryLock}
 * keep the lease while this process lives ({@code KEEP}); the
 * {@link DistributedLock} forms with a ttl take a plain lease that runs out
 * after it. {@code unlock()} by a thread that does not hold the lock throws
 * {@link IllegalMonitorStateException}, and after the lease was lost
 * {@code io.padlock.LockLostException} (one of those).
 */
public final class PadlockLockRegistry
        implements ExpirableLockRegistry<DistributedLock>, RenewableLockRegistry<DistributedLock> {
    private final Padlock padlock;
    private final String registryKey;
    private final Map<String, Entry> locks = new ConcurrentHashMap<>();

    private record Entry(Lock lock, long lastUsed) {}

    public PadlockLockRegistry(Padlock padlock) {
        this(padlock, "padlock-registry");
    }

    public PadlockLockRegistry(Padlock padlock, String registryKey) {
        this.padlock = padlock;
        this.registryKey = registryKey;
    }

    @Override
    public DistributedLock obtain(Object lockKey) {
        String key = registryKey + ":" + lockKey;
        Entry e = locks.compute(key, (k, old) -> new Entry(
                old != null ? old.lock : new Lock(padlock.getLock(k)), System.currentTimeMillis()));
        return e.lock;
    }

    /** Forgets the lock objects nobody here holds that were not obtained for {@code age} ms. */
    @Override
    public void expireUnusedOlderThan(long age) {
        long now = System.currentTimeMillis();
        locks.entrySet().removeIf(e -> now - e.getValue().lastUsed > age && !e.getValue().lock.isHeld());
    }

    /** Resets the lease of the calling thread's hold on {@code lockKey}. */
    @Override
    public void renewLock(Object lockKey) {
        renewLock(lockKey, null);
    }

    /** Resets the lease of the calling thread's hold on {@code lockKey} to {@code ttl}. */
    @Override
    public void renewLock(Object lockKey, Duration ttl) {
        Entry e = locks.get(registryKey + ":" + lockKey);
        if (e == null || !e.lock.lock.renew(ttl)) {
            throw new IllegalStateException("the lock " + lockKey + " is not held by this thread");
        }
    }

    /** One registry lock: a {@link PadlockLock}, with the ttl forms of {@link DistributedLock}. */
    static final class Lock implements DistributedLock {
        final PadlockLock lock;

        Lock(PadlockLock lock) {
            this.lock = lock;
        }

        boolean isHeld() {
            return lock.getHoldCount() > 0;
        }

        @Override
        public void lock(Duration ttl) {
            lock.lock(ttl.toMillis(), TimeUnit.MILLISECONDS);
        }

        @Override
        public boolean tryLock(Duration waitTime, Duration ttl) throws InterruptedException {
            return lock.tryLock(waitTime.toMillis(), ttl.toMillis(), TimeUnit.MILLISECONDS);
        }

        @Override
        public void lock() {
            lock.lock();
        }

        @Override
        public void lockInterruptibly() throws InterruptedException {
            lock.lockInterruptibly();
        }

        @Override
        public boolean tryLock() {
            return lock.tryLock();
        }

        @Override
        public boolean tryLock(long time, TimeUnit unit) throws InterruptedException {
            return lock.tryLock(time, unit);
        }

        @Override
        public void unlock() {
            lock.unlock();
        }

        @Override
        public Condition newCondition() {
            return lock.newCondition();
        }

        @Override
        public String toString() {
            return "PadlockLockRegistry.Lock[" + lock.key() + "]";
        }
    }
}
