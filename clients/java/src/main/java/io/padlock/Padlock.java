package io.padlock;

import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;

/**
 * The entry point: locks, read-write locks, semaphores and multi-key locks
 * served by the padlock module, on a driver the application already has.
 *
 * <pre>{@code
 * Padlock padlock = Padlock.jedis(new JedisPooled("localhost", 6379));
 * Lock lock = padlock.getLock("order:1001");
 * lock.lock();
 * try { ... } finally { lock.unlock(); }
 * }</pre>
 *
 * <p>One Padlock has one watcher thread that times every hold's rounds and
 * a scheduler (two daemon threads) that runs them; leases are kept by the
 * server with {@code KEEP} while the hold's connection lives, so nothing is
 * renewed by a timer. Close it to stop both; the application's driver
 * stays open.
 */
public final class Padlock implements AutoCloseable {
    private static final SecureRandom RANDOM = new SecureRandom();

    final Driver driver;
    final ScheduledThreadPoolExecutor scheduler;
    /** Every watched hold's rounds (run on the scheduler). */
    final Watcher watcher;
    /** Notified when a semaphore's permits are given back here (see {@link PadlockSemaphore}). */
    final Object semaphoreReleases = new Object();
    /** Where this process's waits of one holder on one key line up (see {@link HolderLines}). */
    final HolderLines lines = new HolderLines();
    /** Runs interruptible waits for drivers without futures of their own. */
    final ExecutorService helper;
    /**
     * The async forms' short commands (queueing a wait, counting a grant in,
     * a release): the keeper runs them one at a time anyway, so a thousand
     * waits queued at once are two threads, not a thousand.
     */
    final ExecutorService async;
    /**
     * What follows a reply sent without waiting ({@link Keeper#callAsync}):
     * never on the driver's I/O thread, and never behind an async thread
     * that waits for a hold's io, which such a reply may be the one to free.
     */
    final ExecutorService replies;
    private final String id;
    private final long ttlMs;
    /** Grants that wait for replicas, or null. */
    final Replicas replicas;
    private final Consumer<String> log;
    private final ConcurrentHashMap<String, SharedHold> holds = new ConcurrentHashMap<>();
    private final ConcurrentHashMap<String, Keeper> keepers = new ConcurrentHashMap<>();
    private final String idPrefix;
    private final AtomicLong idCounter = new AtomicLong();
    /** Set by {@link #close}: nothing may open a connection again. */
    private volatile boolean closed;

    private Padlock(Builder b) {
        this.driver = Objects.requireNonNull(b.driver, "driver");
        this.id = b.id != null ? b.id : "jvm-" + hex(6);
        this.ttlMs = b.ttl.toMillis();
        this.log = b.log;
        this.idPrefix = hex(8) + "-";
        this.replicas = b.replicas;
        this.scheduler = new ScheduledThreadPoolExecutor(2, daemons("padlock-watch"));
        this.scheduler.setRemoveOnCancelPolicy(true);
        this.watcher = new Watcher(scheduler, "padlock-rounds");
        this.helper = Executors.newCachedThreadPool(daemons("padlock-wait"));
        this.async = Executors.newFixedThreadPool(2, daemons("padlock-async"));
        this.replies = Executors.newSingleThreadExecutor(daemons("padlock-reply"));
    }

    /** On Jedis: a {@code JedisPooled}, {@code RedisClient}, {@code JedisCluster} or {@code RedisClusterClient}. */
    public static Padlock jedis(redis.clients.jedis.UnifiedJedis jedis) {
        return builder(new io.padlock.driver.JedisDriver(jedis)).build();
    }

    /** On Lettuce: a {@code RedisClient} or {@code RedisClusterClient}. */
    public static Padlock lettuce(io.lettuce.core.AbstractRedisClient lettuce) {
        return builder(new io.padlock.driver.LettuceDriver(lettuce)).build();
    }

    /** On Spring Data Redis: the factory a {@code StringRedisTemplate} already uses. */
    public static Padlock spring(org.springframework.data.redis.connection.RedisConnectionFactory factory) {
        return builder(io.padlock.driver.SpringDriver.of(factory)).build();
    }

    public static Builder builder(Driver driver) {
        return new Builder(driver);
    }

    /** This client's id: the default holder of a lock is {@code id + ":" + thread id}. */
    public String id() {
        return id;
    }

    /** A lock, reentrant per thread (or per explicit holder), with a lease of the default ttl. */
    public PadlockLock getLock(String key) {
        return new PadlockLock(this, List.of(key), null, ttlMs);
    }

    /** All or nothing over several keys (in a cluster, with one hash tag). */
    public PadlockMultiLock getMultiLock(String... keys) {
        return new PadlockMultiLock(this, List.of(keys), null, ttlMs);
    }

    public PadlockReadWriteLock getReadWriteLock(String key) {
        return new PadlockReadWriteLock(this, key, null, ttlMs);
    }

    /** A semaphore of {@code limit} permits; its permits are this client's (see the README). */
    /**
     * {@code LOCK.TOP}: the keys with the most waiters right now, most first.
     * In a cluster each master answers for its own keys: {@code nodeKey}
     * picks the master (any key of its slots); standalone, any key will do.
     */
    public List<Hot> top(int count, String nodeKey) {
        if (count < 1) {
            throw new IllegalArgumentException("count must be at least 1");
        }
        Object reply = driver.open(nodeKey).callAndClose(ttlMs, List.of("LOCK.TOP", "COUNT", Integer.toString(count)));
        List<Hot> out = new ArrayList<>();
        for (Object row : Replies.asList(reply)) {
            List<?> r = Replies.asList(row);
            out.add(new Hot(String.valueOf(r.get(0)), String.valueOf(r.get(1)),
                    Replies.asLong(r.get(2)), Replies.asLong(r.get(3)), Replies.asLong(r.get(4)),
                    r.size() > 5 ? Replies.asLong(r.get(5)) : 0));
        }
        return out;
    }

    /** {@code LOCK.TOP COUNT count} of a standalone server. */
    public List<Hot> top(int count) {
        return top(count, "");
    }

    public PadlockSemaphore getSemaphore(String key, int limit) {
        return new PadlockSemaphore(this, key, limit, null, ttlMs);
    }

    /** Stops the scheduler; holds still held are released first. */
    @Override
    public void close() {
        closed = true;
        for (SharedHold h : new ArrayList<>(holds.values())) {
            h.io.lock();
            try {
                h.finish(false);
            } finally {
                h.io.unlock();
            }
        }
        keepers.values().forEach(Keeper::close);
        watcher.close();
        scheduler.shutdownNow();
        helper.shutdownNow();
        async.shutdownNow();
        replies.shutdownNow();
        driver.close();
    }

    String defaultHolder() {
        return id + ":" + Thread.currentThread().getId();
    }

    /** The live hold of {@code holder} on {@code kind}'s keys, made on first use. */
    SharedHold hold(Kind kind, String holder, long ttl) {
        return holds.computeIfAbsent(kind.name() + "\0" + holder, k -> new SharedHold(this, kind, holder, ttl));
    }

    /** The keeper of the node (or, in a cluster, the slot) that serves {@code key}. */
    Keeper keeper(String key) {
        if (closed) {
            // A closed Padlock takes and keeps nothing: not even through a
            // connection a driver would still make.
            throw new IllegalStateException("this Padlock is closed");
        }
        return keepers.computeIfAbsent(driver.node(key), n -> new Keeper(this, key));
    }

    /** The hold of {@code holder} if this process has one registered (held, or lost and not yet heard of), else null. */
    SharedHold existing(Kind kind, String holder) {
        return holds.get(kind.name() + "\0" + holder);
    }

    void forget(SharedHold h) {
        holds.remove(h.kind.name() + "\0" + h.holder, h);
    }

    /** Registered holds lost since (oldest first), and how many. */
    private final ConcurrentLinkedQueue<SharedHold> lostHolds = new ConcurrentLinkedQueue<>();
    private final AtomicInteger lostCount = new AtomicInteger();

    /** At most this many lost holds stay registered for their holders to hear of (tests lower it). */
    int maxLost = 10_000;

    /**
     * A lost hold stays registered until its holder next calls (it is told,
     * and a leftover is cleared): but a holder may never come back (a
     * virtual thread's, one per task), so past {@link #maxLost} the oldest
     * is forgotten. Its holder then hears "not held", and a leftover of it
     * runs out with its lease.
     */
    void registerLost(SharedHold h) {
        lostHolds.add(h);
        if (lostCount.incrementAndGet() <= maxLost) {
            return;
        }
        SharedHold oldest = lostHolds.poll();
        if (oldest != null) {
            lostCount.decrementAndGet();
            forget(oldest);
        }
    }

    /** Request-ids: random per Padlock, then a counter; never reused by this process. */
    String nextId() {
        return idPrefix + Long.toString(idCounter.incrementAndGet(), 36);
    }

    /**
     * One changing command with a request-id on the keeper of {@code key}'s
     * node, sent again on a new connection until it is answered or
     * {@code within} passes; error replies are thrown as they come. For
     * plain leases (no {@code KEEP}): the ShedLock provider, the
     * Redisson-shaped calls.
     */
    Object request(String key, Duration within, List<String> args) {
        return resend(keeper(key), withId(args), System.nanoTime() + within.toNanos()).value();
    }

    /**
     * {@code sent} (with its request-id) on the keeper {@code k}, sent again on
     * a new connection after a failed one until answered or {@code deadline}
     * (nanoTime) passes; the one resend loop of every changing command.
     */
    static Keeper.Reply resend(Keeper k, List<String> sent, long deadline) {
        int attempt = 0;
        while (true) {
            long left = TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime());
            try {
                return resent(k.call(Math.max(left, 50), sent), attempt);
            } catch (LinkException e) {
                if (!pause(attempt++, deadline)) {
                    throw e;
                }
            }
        }
    }

    /**
     * The reply to a request's {@code attempt}-th sending. A resend may be
     * answered from the server's memory of an earlier sending (its request-id),
     * which binds nothing ({@code KEEP}) to this connection and writes nothing
     * on it: such a reply names no epoch, so its hold binds again.
     */
    private static Keeper.Reply resent(Keeper.Reply r, int attempt) {
        return attempt == 0 ? r : new Keeper.Reply(r.value(), -1);
    }

    /**
     * {@link #resend} without a thread waiting: each try is
     * {@link Keeper#callAsync}, the pauses between them the scheduler's.
     */
    CompletableFuture<Keeper.Reply> resendAsync(Keeper k, List<String> sent, long deadline) {
        CompletableFuture<Keeper.Reply> out = new CompletableFuture<>();
        resendAsync(k, sent, deadline, 0, out);
        return out;
    }

    private void resendAsync(Keeper k, List<String> sent, long deadline, int attempt,
            CompletableFuture<Keeper.Reply> out) {
        long left = TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime());
        k.callAsync(Math.max(left, 50), sent).whenComplete((r, e) -> {
            if (e == null) {
                out.complete(resent(r, attempt));
                return;
            }
            Throwable cause = Replies.cause(e);
            long ms = pauseMs(attempt, deadline);
            if (!(cause instanceof LinkException) || ms < 0) {
                out.completeExceptionally(cause);
                return;
            }
            try {
                scheduler.schedule(() -> resendAsync(k, sent, deadline, attempt + 1, out), ms, TimeUnit.MILLISECONDS);
            } catch (java.util.concurrent.RejectedExecutionException closed) {
                out.completeExceptionally(cause);
            }
        });
    }

    List<String> withId(List<String> args) {
        List<String> out = new ArrayList<>(args.size() + 2);
        out.addAll(args);
        out.add("ID");
        out.add(nextId());
        return out;
    }

    void log(String message) {
        log.accept(message);
    }

    /**
     * Sleeps before resend {@code attempt} (20 ms doubling to 500 ms), never
     * past {@code deadline}; false when no time is left.
     */
    static boolean pause(int attempt, long deadline) {
        long ms = pauseMs(attempt, deadline);
        if (ms < 0) {
            return false;
        }
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
        return true;
    }

    /** How long to pause before resend {@code attempt}; -1 when no time is left. */
    static long pauseMs(int attempt, long deadline) {
        long left = deadline - System.nanoTime();
        if (left <= 0) {
            return -1;
        }
        return Math.min(Math.min(500, 20L << Math.min(attempt, 5)), Math.max(1, TimeUnit.NANOSECONDS.toMillis(left)));
    }

    private static String hex(int bytes) {
        byte[] b = new byte[bytes];
        RANDOM.nextBytes(b);
        return HexFormat.of().formatHex(b);
    }

    private static ThreadFactory daemons(String name) {
        AtomicInteger n = new AtomicInteger();
        return r -> {
            Thread t = new Thread(r, name + "-" + n.incrementAndGet());
            t.setDaemon(true);
            return t;
        };
    }

    /** Options: the client id, the default lease, where warnings go. */
    public static final class Builder {
        private final Driver driver;
        private String id;
        private Duration ttl = Duration.ofSeconds(30);
        private Consumer<String> log = m -> System.getLogger("io.padlock").log(System.Logger.Level.WARNING, m);
        private Replicas replicas;

        private Builder(Driver driver) {
            this.driver = driver;
        }

        /** This client's id (default: random); holders are {@code id:threadId}. */
        public Builder id(String id) {
            this.id = id;
            return this;
        }

        /**
         * The lease: how long a hold outlives its connection (the grace for a
         * reconnect), and so how long a crashed process keeps what it held.
         */
        public Builder ttl(Duration ttl) {
            if (ttl.toMillis() < 300) {
                throw new IllegalArgumentException("ttl below 300 ms cannot be kept with KEEP");
            }
            this.ttl = ttl;
            return this;
        }

        /** Every fresh grant of this Padlock waits for replicas (see {@link Replicas}). */
        public Builder replicas(Replicas replicas) {
            this.replicas = replicas;
            return this;
        }

        public Builder log(Consumer<String> log) {
            this.log = log;
            return this;
        }

        public Padlock build() {
            return new Padlock(this);
        }
    }
}
