package io.padlock.bench;

import io.lettuce.core.RedisURI;
import io.padlock.Padlock;
import java.util.Arrays;
import java.util.concurrent.locks.Lock;

/**
 * An uncontended lock()+unlock() against SET NX PX + DEL through the same
 * driver, interleaved call by call (so that the machine's drift falls on
 * both), medians of 15,000 after 10,000 of warm-up; as
 * scripts/bench/uncontended.py does for the Python and TypeScript clients.
 * Prints Markdown rows.
 */
public final class Uncontended {
    private static final int WARMUP = 10_000;
    private static final int N = 15_000;

    interface Pair {
        void run() throws Exception;
    }

    static void both(String name, Pair base, Pair pl) throws Exception {
        long[] a = new long[N];
        long[] b = new long[N];
        for (int i = -WARMUP; i < N; i++) {
            long t = System.nanoTime();
            base.run();
            long u = System.nanoTime();
            pl.run();
            long v = System.nanoTime();
            if (i >= 0) {
                a[i] = u - t;
                b[i] = v - u;
            }
        }
        Arrays.sort(a);
        Arrays.sort(b);
        System.out.printf("| Java (%s) | %.0f | %.0f | %.2fx |%n", name, a[N / 2] / 1e3, b[N / 2] / 1e3,
                (double) b[N / 2] / a[N / 2]);
    }

    public static void main(String[] args) throws Exception {
        int port = Integer.parseInt(System.getenv("PADLOCK_BENCH_PORT"));
        io.lettuce.core.RedisClient lettuce = io.lettuce.core.RedisClient.create(RedisURI.create("127.0.0.1", port));
        redis.clients.jedis.RedisClient jedis = redis.clients.jedis.RedisClient.create("127.0.0.1", port);
        Padlock onL = Padlock.lettuce(lettuce);
        Padlock onJ = Padlock.builder(new io.padlock.driver.JedisDriver(jedis)).ttl(java.time.Duration.ofSeconds(30)).build();
        Lock l = onL.getLock("probe:l");
        Lock j = onJ.getLock("probe:j");
        var plain = lettuce.connect().sync();
        var nx = io.lettuce.core.SetArgs.Builder.nx().px(5000);
        both("Lettuce, sync", () -> { plain.set("p:set", "v", nx); plain.del("p:set"); }, () -> { l.lock(); l.unlock(); });
        var jnx = redis.clients.jedis.params.SetParams.setParams().nx().px(5000);
        both("Jedis", () -> { jedis.set("p:set", "v", jnx); jedis.del("p:set"); }, () -> { j.lock(); j.unlock(); });
        onL.close();
        onJ.close();
        lettuce.shutdown();
        jedis.close();
    }
}
