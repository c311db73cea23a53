package io.padlock;

import io.lettuce.core.RedisURI;
import io.lettuce.core.cluster.RedisClusterClient;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.RedisClient;

/** A Padlock on each driver for the tests, closed with its driver client. */
final class Clients implements AutoCloseable {
    static final List<String> DRIVERS = List.of("jedis", "lettuce");
    private final List<AutoCloseable> open = new ArrayList<>();

    Padlock standalone(String driver, int port) {
        return standalone(driver, port, Duration.ofSeconds(30));
    }

    Padlock standalone(String driver, int port, Duration ttl) {
        return standalone(driver, port, b -> b.ttl(ttl));
    }

    /** A Padlock on {@code driver} with its builder's options set by {@code with}. */
    Padlock standalone(String driver, int port, java.util.function.UnaryOperator<Padlock.Builder> with) {
        Padlock p;
        if (driver.equals("jedis")) {
            RedisClient jedis = RedisClient.create("127.0.0.1", port);
            open.add(jedis);
            p = with.apply(Padlock.builder(new io.padlock.driver.JedisDriver(jedis))).build();
        } else {
            io.lettuce.core.RedisClient lettuce = io.lettuce.core.RedisClient.create(
                    RedisURI.create("127.0.0.1", port));
            open.add(lettuce::shutdown);
            p = with.apply(Padlock.builder(new io.padlock.driver.LettuceDriver(lettuce))).build();
        }
        open.add(0, p);
        return p;
    }

    Padlock cluster(String driver, List<Integer> ports) {
        Padlock p;
        if (driver.equals("jedis")) {
            Set<HostAndPort> nodes = new HashSet<>();
            ports.forEach(port -> nodes.add(new HostAndPort("127.0.0.1", port)));
            redis.clients.jedis.RedisClusterClient jedis = redis.clients.jedis.RedisClusterClient.create(nodes);
            open.add(jedis);
            p = Padlock.jedis(jedis);
        } else {
            RedisClusterClient lettuce = RedisClusterClient.create(RedisURI.create("127.0.0.1", ports.get(0)));
            open.add(lettuce::shutdown);
            p = Padlock.lettuce(lettuce);
        }
        open.add(0, p);
        return p;
    }

    @Override
    public void close() {
        for (AutoCloseable c : open) {
            try {
                c.close();
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        }
    }
}
