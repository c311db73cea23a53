package io.padlock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;
import org.springframework.data.redis.connection.RedisStandaloneConfiguration;
import org.springframework.data.redis.connection.jedis.JedisConnectionFactory;
import org.springframework.data.redis.connection.lettuce.LettuceConnectionFactory;
import org.springframework.data.redis.core.StringRedisTemplate;

/** The seed's Spring service: a StringRedisTemplate application gets padlock from its factory. */
class SpringTest {
    @Test
    void fromTheTemplatesConnectionFactory() throws Exception {
        try (Servers srv = Servers.standalone()) {
            for (String kind : new String[] {"lettuce", "jedis"}) {
                RedisStandaloneConfiguration conf = new RedisStandaloneConfiguration("127.0.0.1", srv.port());
                var factory = kind.equals("lettuce") ? new LettuceConnectionFactory(conf) : new JedisConnectionFactory(conf);
                if (factory instanceof LettuceConnectionFactory l) {
                    l.afterPropertiesSet();
                    l.start();
                } else if (factory instanceof JedisConnectionFactory j) {
                    j.afterPropertiesSet();
                    j.start();
                }
                StringRedisTemplate template = new StringRedisTemplate(factory);
                try (Padlock padlock = Padlock.spring(template.getConnectionFactory())) {
                    PadlockLock lock = padlock.getLock("order:1001");
                    lock.lock();
                    try {
                        template.opsForValue().set("order:1001:status", "validated");
                        PadlockLock inner = padlock.getLock("order:1001");
                        assertTrue(inner.tryLock(), kind + ": nested reentry");
                        assertEquals(2, inner.getHoldCount());
                        inner.unlock();
                        assertFalse(CompletableFuture.supplyAsync(lock::tryLock).get());
                    } finally {
                        lock.unlock();
                    }
                    assertEquals("validated", template.opsForValue().get("order:1001:status"));
                    assertEquals("none", srv.cmd(0, "TYPE", "order:1001"));
                }
                if (factory instanceof LettuceConnectionFactory l) {
                    l.destroy();
                } else if (factory instanceof JedisConnectionFactory j) {
                    j.destroy();
                }
            }
        }
    }
}
