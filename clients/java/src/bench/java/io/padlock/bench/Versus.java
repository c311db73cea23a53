package io.padlock.bench;

import io.lettuce.core.RedisURI;
import io.padlock.Padlock;
import io.padlock.PadlockSemaphore;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Lock;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Supplier;
import org.redisson.Redisson;
import org.redisson.api.RPermitExpirableSemaphore;
import org.redisson.api.RSemaphore;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

/**
 * padlock head to head with Redisson in one JVM, on one server
 * ({@code PADLOCK_BENCH_PORT}): a contended lock (8 threads, 1 ms of work),
 * an uncontended lock round trip, a semaphore round trip. Prints Markdown.
 */
public final class Versus {
    private static final int THREADS = 8;

    public static void main(String[] args) throws Exception {
        int port = Integer.parseInt(System.getenv().getOrDefault("PADLOCK_BENCH_PORT", "6379"));
        long seconds = Long.parseLong(System.getenv().getOrDefault("PADLOCK_BENCH_SECONDS", "10"));
        Config conf = new Config();
        conf.useSingleServer().setAddress("redis://127.0.0.1:" + port).setConnectionPoolSize(16)
                .setConnectionMinimumIdleSize(8);
        RedissonClient redisson = Redisson.create(conf);
        redis.clients.jedis.RedisClient jedis = redis.clients.jedis.RedisClient.create("127.0.0.1", port);
        io.lettuce.core.RedisClient lettuce = io.lettuce.core.RedisClient.create(RedisURI.create("127.0.0.1", port));
        Padlock onJedis = Padlock.builder(new io.padlock.driver.JedisDriver(jedis)).ttl(Duration.ofSeconds(30)).build();
        Padlock onLettuce = Padlock.lettuce(lettuce);
        try {
            System.out.println("### Contended: " + THREADS + " threads, one lock, 1 ms of work, " + seconds + " s each");
            System.out.println();
            System.out.println("| lock | sections/s | fairness (fewest/most per thread) | wait p50 ms | wait p99 ms |");
            System.out.println("| --- | ---: | ---: | ---: | ---: |");
            contended("padlock (Lettuce)", () -> onLettuce.getLock("bench:contended:l"), seconds);
            contended("padlock (Jedis)", () -> onJedis.getLock("bench:contended:j"), seconds);
            contended("Redisson RLock", () -> redisson.getLock("bench:contended:r"), seconds);
            contended("Redisson RFairLock", () -> redisson.getFairLock("bench:contended:f"), seconds);
            System.out.println();
            System.out.println("### Uncontended round trips (one thread, 5,000 each)");
            System.out.println();
            System.out.println("| operation | p50 µs | p99 µs |");
            System.out.println("| --- | ---: | ---: |");
            // The same round trips without a lock library: the baseline of
            // an acquire + release sent the same way (SET NX PX + DEL).
            try (var plain = lettuce.connect()) {
                var sync = plain.sync();
                var nx = io.lettuce.core.SetArgs.Builder.nx().px(5000);
                timed("SET NX PX + DEL (Lettuce, sync)", () -> {
                    sync.set("bench:rt:set", "v", nx);
                    sync.del("bench:rt:set");
                });
            }
            var nxJ = redis.clients.jedis.params.SetParams.setParams().nx().px(5000);
            timed("SET NX PX + DEL (Jedis)", () -> {
                jedis.set("bench:rt:setj", "v", nxJ);
                jedis.del("bench:rt:setj");
            });
            roundTrip("padlock lock()+unlock() (Lettuce)", onLettuce.getLock("bench:rt:l"));
            roundTrip("padlock lock()+unlock() (Jedis)", onJedis.getLock("bench:rt:j"));
            roundTrip("Redisson RLock lock()+unlock()", redisson.getLock("bench:rt:r"));
            PadlockSemaphore sem = onLettuce.getSemaphore("bench:sem:p", 10);
            timed("padlock semaphore acquire()+release() (Lettuce)", () -> {
                sem.acquireUninterruptibly(1);
                sem.release(1);
            });
            RSemaphore rs = redisson.getSemaphore("bench:sem:r");
            rs.trySetPermits(10);
            timed("Redisson RSemaphore acquire()+release()", () -> {
                try {
                    rs.acquire();
                } catch (InterruptedException e) {
                    throw new IllegalStateException(e);
                }
                rs.release();
            });
            RPermitExpirableSemaphore rpe = redisson.getPermitExpirableSemaphore("bench:sem:e");
            rpe.trySetPermits(10);
            timed("Redisson RPermitExpirableSemaphore acquire()+release()", () -> {
                try {
                    rpe.release(rpe.acquire());
                } catch (InterruptedException e) {
                    throw new IllegalStateException(e);
                }
            });
            springAndShedLock(port, onLettuce, seconds);
        } finally {
            onJedis.close();
            onLettuce.close();
            redisson.shutdown();
            jedis.close();
            lettuce.shutdown();
        }
    }

    /**
     * Spring Integration's RedisLockRegistry (spin and pub/sub) against
     * PadlockLockRegistry, contended as above; ShedLock's Redis provider
     * (Spring Data Redis) against PadlockLockProvider: lock + unlock.
     */
    private static void springAndShedLock(int port, Padlock padlock, long seconds) throws Exception {
        var factory = new org.springframework.data.redis.connection.lettuce.LettuceConnectionFactory(
                new org.springframework.data.redis.connection.RedisStandaloneConfiguration("127.0.0.1", port));
        factory.afterPropertiesSet();
        factory.start();
        try {
            System.out.println();
            System.out.println("### Spring Integration LockRegistry: " + THREADS + " threads, one lock, 1 ms of work, "
                    + seconds + " s each");
            System.out.println();
            System.out.println("| lock | sections/s | fairness (fewest/most per thread) | wait p50 ms | wait p99 ms |");
            System.out.println("| --- | ---: | ---: | ---: | ---: |");
            var padReg = new io.padlock.spring.PadlockLockRegistry(padlock, "bench-reg");
            contended("PadlockLockRegistry", () -> padReg.obtain("c"), seconds);
            for (var type : org.springframework.integration.redis.util.RedisLockRegistry.RedisLockType.values()) {
                var reg = new org.springframework.integration.redis.util.RedisLockRegistry(factory, "bench-" + type);
                reg.setRedisLockType(type);
                contended("RedisLockRegistry (" + type + ")", () -> reg.obtain("c"), seconds);
                reg.destroy();
            }
            System.out.println();
            System.out.println("### ShedLock: lock + unlock of one @SchedulerLock name (one thread, 5,000 each)");
            System.out.println();
            System.out.println("| operation | p50 µs | p99 µs |");
            System.out.println("| --- | ---: | ---: |");
            var mine = new io.padlock.PadlockLockProvider(padlock);
            var theirs = new net.javacrumbs.shedlock.provider.redis.spring.RedisLockProvider(factory, "bench");
            for (var p : List.<net.javacrumbs.shedlock.core.LockProvider>of(mine, theirs)) {
                String name = p == mine ? "PadlockLockProvider" : "RedisLockProvider (Spring Data Redis)";
                timed(name, () -> p.lock(new net.javacrumbs.shedlock.core.LockConfiguration(java.time.Instant.now(),
                        "job", Duration.ofMinutes(1), Duration.ZERO)).orElseThrow().unlock());
            }
        } finally {
            factory.destroy();
        }
    }

    private static void contended(String name, Supplier<Lock> lockOfThread, long seconds) throws Exception {
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        long[] counts = new long[THREADS];
        List<long[]> waits = new ArrayList<>();
        CountDownLatch done = new CountDownLatch(THREADS);
        for (int t = 0; t < THREADS; t++) {
            int me = t;
            long[] mine = new long[2_000_000];
            waits.add(mine);
            Thread th = new Thread(() -> {
                Lock lock = lockOfThread.get();
                int n = 0;
                while (System.nanoTime() < end) {
                    long start = System.nanoTime();
                    lock.lock();
                    mine[n++] = System.nanoTime() - start;
                    LockSupport.parkNanos(1_000_000);
                    lock.unlock();
                }
                counts[me] = n;
                done.countDown();
            });
            th.start();
        }
        done.await();
        long total = Arrays.stream(counts).sum();
        long[] all = new long[(int) total];
        int k = 0;
        for (int t = 0; t < THREADS; t++) {
            System.arraycopy(waits.get(t), 0, all, k, (int) counts[t]);
            k += counts[t];
        }
        Arrays.sort(all);
        long min = Arrays.stream(counts).min().orElse(0);
        long max = Arrays.stream(counts).max().orElse(1);
        System.out.printf(Locale.ROOT, "| %s | %.0f | %.2f (%d/%d) | %.2f | %.2f |%n", name, total / (double) seconds,
                min / (double) max, min, max, pct(all, 0.50) / 1e6, pct(all, 0.99) / 1e6);
    }

    private static void roundTrip(String name, Lock lock) {
        timed(name, () -> {
            lock.lock();
            lock.unlock();
        });
    }

    private static void timed(String name, Runnable op) {
        for (int i = 0; i < 500; i++) {
            op.run();
        }
        long[] t = new long[5000];
        for (int i = 0; i < t.length; i++) {
            long s = System.nanoTime();
            op.run();
            t[i] = System.nanoTime() - s;
        }
        Arrays.sort(t);
        System.out.printf(Locale.ROOT, "| %s | %.0f | %.0f |%n", name, pct(t, 0.50) / 1e3, pct(t, 0.99) / 1e3);
    }

    private static double pct(long[] sorted, double q) {
        if (sorted.length == 0) {
            return 0;
        }
        return sorted[Math.min(sorted.length - 1, (int) Math.floor(q * sorted.length))];
    }
}
