package io.padlock.bench;

import io.lettuce.core.RedisURI;
import io.padlock.Padlock;
import io.padlock.PadlockLock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.redisson.Redisson;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;
import redis.clients.jedis.CommandArguments;
import redis.clients.jedis.Connection;
import redis.clients.jedis.HostAndPort;

/**
 * The JVM rows of scripts/bench/holdcost.py: N holds on N keys, then N
 * waiters on one held key, in one JVM, through padlock (on Lettuce, and on
 * Jedis with its default pool of 8) and Redisson's {@code RLock} (its watchdog
 * at the same 3 s lease). Holds and waits are futures with a holder (a
 * Redisson "thread id") each, so no row needs a thread per hold. Reported:
 * connections besides those the client has once it answered its first
 * command, commands per second the server runs while the holds sit idle and
 * while the waiters wait, how many were served and whether in the order they
 * asked. Prints one JSON line per library. Args: port n.
 */
public final class HoldCost {
    private static final long TTL_MS = 3000;
    private static final long IDLE_MS = 6000;
    /** How long the waiters may take to be served, all of them. */
    private static final long SERVE_S = 120;

    interface Lib {
        CompletableFuture<?> take(String key, String holder);

        CompletableFuture<?> give(String key, String holder);

        void close();
    }

    public static void main(String[] args) throws Exception {
        int port = Integer.parseInt(args[0]);
        int n = Integer.parseInt(args[1]);
        run("padlock Java (Lettuce)", port, n, () -> {
            io.lettuce.core.RedisClient c = io.lettuce.core.RedisClient.create(RedisURI.create("127.0.0.1", port));
            c.connect().sync().ping();
            return padlock(Padlock.builder(new io.padlock.driver.LettuceDriver(c)).ttl(Duration.ofMillis(TTL_MS))
                    .build(), c::shutdown);
        });
        run("padlock Java (Jedis, default pool of 8)", port, n, () -> {
            redis.clients.jedis.RedisClient j = redis.clients.jedis.RedisClient.create("127.0.0.1", port);
            j.ping();
            return padlock(Padlock.builder(new io.padlock.driver.JedisDriver(j)).ttl(Duration.ofMillis(TTL_MS))
                    .build(), j::close);
        });
        run("Redisson RLock", port, n, () -> {
            Config conf = new Config();
            conf.setLockWatchdogTimeout(TTL_MS);
            conf.useSingleServer().setAddress("redis://127.0.0.1:" + port);
            RedissonClient r = Redisson.create(conf);
            r.getBucket("bench:ping").isExists();
            return new Lib() {
                private long id(String holder) {
                    return holder.hashCode() & 0x7fffffffL;
                }

                public CompletableFuture<?> take(String key, String holder) {
                    RLock l = r.getLock(key);
                    return l.lockAsync(-1, TimeUnit.MILLISECONDS, id(holder)).toCompletableFuture();
                }

                public CompletableFuture<?> give(String key, String holder) {
                    return r.getLock(key).unlockAsync(id(holder)).toCompletableFuture();
                }

                public void close() {
                    r.shutdown();
                }
            };
        });
        System.exit(0); // the drivers' own threads would keep exec:java waiting
    }

    static Lib padlock(Padlock pad, Runnable shut) {
        return new Lib() {
            public CompletableFuture<?> take(String key, String holder) {
                return pad.getLock(key).withHolder(holder).lockAsync();
            }

            public CompletableFuture<?> give(String key, String holder) {
                return pad.getLock(key).withHolder(holder).unlockAsync();
            }

            public void close() {
                pad.close();
                shut.run();
            }
        };
    }

    interface Make {
        Lib make() throws Exception;
    }

    static void run(String name, int port, int n, Make make) throws Exception {
        try (Connection watch = new Connection(new HostAndPort("127.0.0.1", port))) {
            cmd(watch, "FLUSHALL");
            for (int t = 0; t < 150 && clients(watch) > 1; t++) {
                Thread.sleep(100); // the library before's connections are gone first
            }
            Lib lib = make.make();
            int base = clients(watch);
            List<CompletableFuture<?>> held = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                held.add(lib.take("h:" + i, "h" + i));
            }
            CompletableFuture.allOf(held.toArray(new CompletableFuture<?>[0])).get(60, TimeUnit.SECONDS);
            Thread.sleep(TTL_MS); // every hold's first round has run
            int holdConns = clients(watch) - base;
            long before = calls(watch);
            Thread.sleep(IDLE_MS);
            double idleRate = Math.max(0, (calls(watch) - before - 1) / (IDLE_MS / 1000.0));
            List<CompletableFuture<?>> gone = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                gone.add(lib.give("h:" + i, "h" + i));
            }
            CompletableFuture.allOf(gone.toArray(new CompletableFuture<?>[0])).get(60, TimeUnit.SECONDS);

            lib.take("hot", "owner").get(10, TimeUnit.SECONDS);
            List<Integer> order = Collections.synchronizedList(new ArrayList<>());
            List<CompletableFuture<?>> waits = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                int me = i;
                waits.add(lib.take("hot", "w" + i).thenCompose(x -> {
                    order.add(me);
                    return lib.give("hot", "w" + me);
                }));
            }
            Thread.sleep(500);
            long from = calls(watch);
            Thread.sleep(2000);
            double waitRate = Math.max(0, (calls(watch) - from - 1) / 2.0);
            int waitConns = clients(watch) - base;
            lib.give("hot", "owner").get(10, TimeUnit.SECONDS);
            try {
                CompletableFuture.allOf(waits.toArray(new CompletableFuture<?>[0])).get(SERVE_S, TimeUnit.SECONDS);
            } catch (java.util.concurrent.TimeoutException e) {
                // reported: served fewer than asked within SERVE_S
            }
            List<Integer> served = List.copyOf(order);
            boolean fifo = true;
            for (int i = 1; i < served.size(); i++) {
                fifo &= served.get(i) > served.get(i - 1);
            }
            System.out.printf(Locale.ROOT, "{\"client\": \"%s\", \"hold_conns\": %d, \"idle_rate\": %.1f, "
                    + "\"wait_conns\": %d, \"wait_rate\": %.1f, \"acquired\": %d, \"fifo\": %b}%n",
                    name, holdConns, idleRate, waitConns, waitRate, served.size(), fifo);
            lib.close();
        }
    }

    static Object cmd(Connection c, String... words) {
        CommandArguments ca = new CommandArguments(io.padlock.driver.Commands.named(words[0]));
        for (int i = 1; i < words.length; i++) {
            ca.add(words[i]);
        }
        return c.executeCommand(ca);
    }

    static int clients(Connection c) {
        return new String((byte[]) cmd(c, "CLIENT", "LIST"), java.nio.charset.StandardCharsets.UTF_8)
                .strip().split("\n").length;
    }

    /** Commands the server has run, all kinds (a script's own calls included). */
    static long calls(Connection c) {
        String text = new String((byte[]) cmd(c, "INFO", "commandstats"), java.nio.charset.StandardCharsets.UTF_8);
        long sum = 0;
        java.util.regex.Matcher m = java.util.regex.Pattern.compile("calls=(\\d+)").matcher(text);
        while (m.find()) {
            sum += Long.parseLong(m.group(1));
        }
        return sum;
    }
}
