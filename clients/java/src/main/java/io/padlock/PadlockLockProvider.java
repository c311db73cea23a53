package io.padlock;

import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicBoolean;
import net.javacrumbs.shedlock.core.ClockProvider;
import net.javacrumbs.shedlock.core.ExtensibleLockProvider;
import net.javacrumbs.shedlock.core.LockConfiguration;
import net.javacrumbs.shedlock.core.SimpleLock;

/**
 * ShedLock's {@code LockProvider} on padlock: {@code @SchedulerLock} jobs
 * run on one instance at a time. Each lock is a padlock lock with a plain
 * lease of {@code lockAtMostFor} (ShedLock's contract: held that long if
 * the node dies, never renewed), taken without waiting; unlocking before
 * {@code lockAtLeastFor} has passed shortens the lease to what is left of
 * it instead of releasing, so the job does not run again before then.
 * {@code extend} resets the lease ({@code ExtensibleLockProvider}).
 *
 * <pre>{@code
 * @Bean
 * LockProvider lockProvider(Padlock padlock) {
 *     return new PadlockLockProvider(padlock);
 * }
 * }</pre>
 *
 * <p>Keys are {@code keyPrefix + name} ({@code "shedlock:"} by default). Every
 * command carries a request-id and is resent after a lost reply, so a
 * resent acquire never finds its own lock "taken" and skips a run.
 */
public final class PadlockLockProvider implements ExtensibleLockProvider {
    /** How long one command may be resent after lost replies. */
    private static final Duration WITHIN = Duration.ofSeconds(5);

    private final Padlock padlock;
    private final String prefix;

    public PadlockLockProvider(Padlock padlock) {
        this(padlock, "shedlock:");
    }

    public PadlockLockProvider(Padlock padlock, String keyPrefix) {
        this.padlock = padlock;
        this.prefix = keyPrefix;
    }

    @Override
    public Optional<SimpleLock> lock(LockConfiguration config) {
        String key = prefix + config.getName();
        String holder = padlock.id() + ":" + UUID.randomUUID();
        long ttl = msUntil(config.getLockAtMostUntil());
        Object fence = padlock.request(key, WITHIN, List.of("LOCK.ACQUIRE", key, holder, Long.toString(ttl)));
        return fence == null ? Optional.empty() : Optional.of(new Held(key, holder, config.getLockAtLeastUntil()));
    }

    private static long msUntil(Instant until) {
        return Math.max(1, Duration.between(ClockProvider.now(), until).toMillis());
    }

    /** One acquired lock; spent once unlocked or extended. */
    private final class Held implements SimpleLock {
        private final String key;
        private final String holder;
        private final Instant atLeastUntil;
        private final AtomicBoolean spent = new AtomicBoolean();

        Held(String key, String holder, Instant atLeastUntil) {
            this.key = key;
            this.holder = holder;
            this.atLeastUntil = atLeastUntil;
        }

        private void spend() {
            if (!spent.compareAndSet(false, true)) {
                throw new IllegalStateException("lock " + key + " was already unlocked or extended");
            }
        }

        @Override
        public void unlock() {
            spend();
            long left = Duration.between(ClockProvider.now(), atLeastUntil).toMillis();
            try {
                if (left > 0) {
                    // Kept until lockAtLeastFor has passed: the lease, shortened.
                    padlock.request(key, WITHIN, List.of("LOCK.EXTEND", key, holder, Long.toString(left)));
                } else {
                    padlock.request(key, WITHIN, List.of("LOCK.RELEASE", key, holder));
                }
            } catch (ReplyException e) {
                if (!e.code().equals("NOTHELD")) {
                    throw e;
                }
                // Its lease ran out already: nothing is held.
            }
        }

        @Override
        public Optional<SimpleLock> extend(Duration lockAtMostFor, Duration lockAtLeastFor) {
            spend();
            try {
                padlock.request(key, WITHIN,
                        List.of("LOCK.EXTEND", key, holder, Long.toString(Math.max(1, lockAtMostFor.toMillis()))));
            } catch (ReplyException e) {
                if (e.code().equals("NOTHELD")) {
                    return Optional.empty();
                }
                throw e;
            }
            return Optional.of(new Held(key, holder, ClockProvider.now().plus(lockAtLeastFor)));
        }
    }
}
