package io.padlock.driver;

import io.padlock.Driver;

import io.padlock.LinkException;
import org.springframework.data.redis.connection.RedisConnection;
import org.springframework.data.redis.connection.RedisConnectionFactory;
import org.springframework.data.redis.connection.jedis.JedisConnectionFactory;
import org.springframework.data.redis.connection.lettuce.LettuceConnectionFactory;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.JedisCluster;
import redis.clients.jedis.UnifiedJedis;

/**
 * Spring Data Redis: the factory a {@code StringRedisTemplate} uses already
 * knows the server, so padlock needs no second setup. On Lettuce it uses the
 * factory's native client (connections of padlock's own, never the shared
 * one); on Jedis, connections from the factory's pool.
 */
@SuppressWarnings("deprecation") // JedisCluster is what the Jedis factory hands out
public final class SpringDriver {
    private SpringDriver() {}

    public static Driver of(RedisConnectionFactory factory) {
        if (factory instanceof LettuceConnectionFactory lettuce) {
            if (lettuce.getNativeClient() == null) {
                lettuce.start();
            }
            return new LettuceDriver(lettuce.getNativeClient());
        }
        if (factory instanceof JedisConnectionFactory jedis) {
            if (jedis.isRedisClusterAware()) {
                Object nativeCluster = jedis.getClusterConnection().getNativeConnection();
                return new JedisDriver((JedisCluster) nativeCluster);
            }
            // Spring Data Redis 4 on Jedis 7 hands out one pooled RedisClient
            // behind every connection; older pairs, one Jedis per connection.
            RedisConnection probe = jedis.getConnection();
            Object nativeClient = probe.getNativeConnection();
            if (nativeClient instanceof UnifiedJedis unified) {
                return new JedisDriver(unified);
            }
            probe.close();
            return key -> {
                RedisConnection rc = jedis.getConnection();
                try {
                    Jedis native_ = (Jedis) rc.getNativeConnection();
                    return new JedisDriver.JedisLink(native_.getConnection(), rc::close);
                } catch (RuntimeException e) {
                    rc.close();
                    throw new LinkException("no connection: " + e.getMessage(), e);
                }
            };
        }
        throw new IllegalArgumentException("padlock knows LettuceConnectionFactory and JedisConnectionFactory, not "
                + factory.getClass().getName());
    }

}
