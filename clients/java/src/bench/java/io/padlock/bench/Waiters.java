package io.padlock.bench;

import io.lettuce.core.RedisURI;
import io.lettuce.core.api.StatefulRedisConnection;
import io.padlock.Padlock;
import io.padlock.PadlockLock;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import redis.clients.jedis.CommandArguments;
import redis.clients.jedis.Connection;
import redis.clients.jedis.HostAndPort;

/**
 * N waiters on one key in one JVM, queued with {@code lockAsync()} while the
 * key is held, then served in turn ({@code make bench}, beside the Python
 * and TypeScript rows of scripts/bench/clientwaits.py): padlock's
 * connections on the server while they wait (besides the application's),
 * whether they were served in the order they asked, the application's own
 * PING (one per ms, on its own client), heap per waiter and the time to
 * serve them all. On Lettuce, and on Jedis with its default pool (8).
 * Prints one JSON line per driver. Args: port n.
 */
public final class Waiters {
    public static void main(String[] args) throws Exception {
        int port = Integer.parseInt(args[0]);
        int n = Integer.parseInt(args[1]);
        run("Java, Lettuce", port, n, () -> {
            io.lettuce.core.RedisClient c = io.lettuce.core.RedisClient.create(RedisURI.create("127.0.0.1", port));
            StatefulRedisConnection<String, String> app = c.connect();
            return new App(Padlock.lettuce(c), () -> app.sync().ping(), () -> {
                app.close();
                c.shutdown();
            });
        });
        run("Java, Jedis (default pool of 8)", port, n, () -> {
            redis.clients.jedis.RedisClient j = redis.clients.jedis.RedisClient.create("127.0.0.1", port);
            return new App(Padlock.jedis(j), j::ping, j::close);
        });
        System.exit(0); // the drivers' own threads would keep exec:java waiting
    }

    record App(Padlock pad, Runnable ping, Runnable close) {}

    static void run(String name, int port, int n, Supplier<App> make) throws Exception {
        try (Connection watch = new Connection(new HostAndPort("127.0.0.1", port))) {
            watch.executeCommand(new CommandArguments(io.padlock.driver.Commands.named("FLUSHALL")));
            App app = make.get();
            app.ping().run();
            int base = clients(watch);
            PadlockLock owner = app.pad().getLock("hot").withHolder("owner");
            owner.lock();
            List<Double> pings = Collections.synchronizedList(new ArrayList<>());
            Thread pinger = new Thread(() -> {
                while (!Thread.currentThread().isInterrupted()) {
                    long t0 = System.nanoTime();
                    app.ping().run();
                    pings.add((System.nanoTime() - t0) / 1e6);
                    try {
                        Thread.sleep(1);
                    } catch (InterruptedException e) {
                        return;
                    }
                }
            });
            pinger.start();
            System.gc();
            Runtime rt = Runtime.getRuntime();
            long before = rt.totalMemory() - rt.freeMemory();
            List<Integer> order = Collections.synchronizedList(new ArrayList<>());
            List<CompletableFuture<Void>> done = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                int me = i;
                PadlockLock l = app.pad().getLock("hot").withHolder("w" + i);
                done.add(l.lockAsync().thenCompose(got -> {
                    order.add(me);
                    return l.unlockAsync();
                }));
            }
            long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
            while (waiters(watch) < n && System.nanoTime() < end) {
                Thread.sleep(10);
            }
            System.gc();
            double perWaiter = (double) (rt.totalMemory() - rt.freeMemory() - before) / n;
            int conns = clients(watch) - base;
            long t0 = System.nanoTime();
            owner.unlock();
            CompletableFuture.allOf(done.toArray(new CompletableFuture<?>[0])).get(300, TimeUnit.SECONDS);
            double served = (System.nanoTime() - t0) / 1e9;
            pinger.interrupt();
            pinger.join();
            boolean fifo = true;
            for (int i = 0; i < order.size(); i++) {
                fifo &= order.get(i) == i;
            }
            List<Double> ps = new ArrayList<>(pings);
            Collections.sort(ps);
            System.out.printf(Locale.ROOT, "{\"client\": \"%s\", \"waiters\": %d, \"connections\": %d, \"fifo\": %b, "
                    + "\"ping_p50_ms\": %.3f, \"ping_p99_ms\": %.3f, \"bytes_per_waiter\": %.0f, \"served_s\": %.2f}%n",
                    name, n, conns, fifo && order.size() == n, pct(ps, 0.5), pct(ps, 0.99), perWaiter, served);
            app.pad().close();
            app.close().run();
        }
    }

    static double pct(List<Double> xs, double p) {
        return xs.isEmpty() ? 0 : xs.get(Math.min(xs.size() - 1, (int) (xs.size() * p)));
    }

    static int clients(Connection c) {
        Object r = c.executeCommand(new CommandArguments(io.padlock.driver.Commands.named("CLIENT")).add("LIST"));
        return new String((byte[]) r, java.nio.charset.StandardCharsets.UTF_8).strip().split("\n").length;
    }

    static long waiters(Connection c) {
        Object r = c.executeCommand(new CommandArguments(io.padlock.driver.Commands.named("LOCK.INFO")).add("hot"));
        if (!(r instanceof List<?> l)) {
            return 0;
        }
        for (int i = 0; i + 1 < l.size(); i += 2) {
            if ("waiters".equals(new String((byte[]) l.get(i), java.nio.charset.StandardCharsets.UTF_8))) {
                return (Long) l.get(i + 1);
            }
        }
        return 0;
    }
}
