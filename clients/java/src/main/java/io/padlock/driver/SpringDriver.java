package io.padlock.driver;

import io.padlock.Driver;
import io.padlock.Link;
import io.padlock.LinkException;
import org.springframework.data.redis.connection.RedisConnection;
import org.springframework.data.redis.connection.RedisConnectionFactory;
import org.springframework.data.redis.connection.jedis.JedisClientConfiguration;
import org.springframework.data.redis.connection.jedis.JedisConnectionFactory;
import org.springframework.data.redis.connection.lettuce.LettuceConnectionFactory;
import redis.clients.jedis.Connection;
import redis.clients.jedis.DefaultJedisClientConfig;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.JedisCluster;
import redis.clients.jedis.UnifiedJedis;

/**
 * Spring Data Redis: the factory a {@code StringRedisTemplate} uses already
 * knows the server, so padlock needs no second setup. On Lettuce it uses the
 * factory's native client (connections of padlock's own, never the shared
 * one); on Jedis, the application's pooled client (Spring Data Redis 4 on
 * Jedis 7), or on older pairs (one {@code Jedis} per connection) the
 * factory's pool for waits of their own and connections made from the
 * factory's settings for the keeper and the mailbox.
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
            return new Driver() {
                @Override
                public Link open(String key) {
                    RedisConnection rc = jedis.getConnection();
                    try {
                        Jedis native_ = (Jedis) rc.getNativeConnection();
                        return new JedisDriver.JedisLink(native_.getConnection(), rc::close);
                    } catch (RuntimeException e) {
                        rc.close();
                        throw new LinkException("no connection: " + e.getMessage(), e);
                    }
                }

                /**
                 * The keeper's and the mailman's: made from the factory's
                 * settings, never borrowed from its pool (behind Sentinel,
                 * where the master is the pool's to find, borrowed).
                 */
                @Override
                public Link dedicated(String key) {
                    if (jedis.isRedisSentinelAware()) {
                        return open(key);
                    }
                    try {
                        Connection c = new Connection(new HostAndPort(jedis.getHostName(), jedis.getPort()),
                                clientConfig(jedis));
                        return new JedisDriver.JedisLink(JedisDriver.named(c), c::close);
                    } catch (RuntimeException e) {
                        throw new LinkException("no connection: " + e.getMessage(), e);
                    }
                }
            };
        }
        throw new IllegalArgumentException("padlock knows LettuceConnectionFactory and JedisConnectionFactory, not "
                + factory.getClass().getName());
    }

    /** What the factory's own connections are made with: credentials, database, TLS, timeout. */
    private static DefaultJedisClientConfig clientConfig(JedisConnectionFactory f) {
        JedisClientConfiguration cc = f.getClientConfiguration();
        return DefaultJedisClientConfig.builder()
                .user(f.getStandaloneConfiguration().getUsername())
                .password(f.getPassword())
                .database(f.getDatabase())
                .ssl(f.isUseSsl())
                .sslSocketFactory(cc.getSslSocketFactory().orElse(null))
                .sslParameters(cc.getSslParameters().orElse(null))
                .hostnameVerifier(cc.getHostnameVerifier().orElse(null))
                .connectionTimeoutMillis((int) cc.getConnectTimeout().toMillis())
                .socketTimeoutMillis(f.getTimeout())
                .build();
    }

}
