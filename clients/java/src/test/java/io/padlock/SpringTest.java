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

    /**
     * Spring Data Redis on Jedis with one {@code Jedis} per connection (the
     * older pairs; {@code setUseUnifiedJedis(false)} here): padlock's keeper and
     * mailbox are made from the factory's settings, not borrowed, so locks and
     * waits go on with the factory's pool of 8 all taken by the application.
     */
    @Test
    void olderJedisPairsBorrowNoneOfThePool() throws Exception {
        try (Servers srv = Servers.standalone()) {
            org.apache.commons.pool2.impl.GenericObjectPoolConfig<redis.clients.jedis.Jedis> pool =
                    new org.apache.commons.pool2.impl.GenericObjectPoolConfig<>();
            pool.setMaxTotal(8);
            pool.setMaxWait(java.time.Duration.ofMillis(300));
            JedisConnectionFactory factory = new JedisConnectionFactory(
                    new RedisStandaloneConfiguration("127.0.0.1", srv.port()),
                    org.springframework.data.redis.connection.jedis.JedisClientConfiguration.builder()
                            .usePooling().poolConfig(pool).build());
            factory.setUseUnifiedJedis(false);
            factory.afterPropertiesSet();
            factory.start();
            try (Padlock padlock = Padlock.spring(factory)) {
                java.util.List<org.springframework.data.redis.connection.RedisConnection> taken = new java.util.ArrayList<>();
                for (int i = 0; i < 8; i++) {
                    taken.add(factory.getConnection());
                    taken.get(i).ping();
                }
                PadlockLock lock = padlock.getLock("spring:old");
                assertTrue(lock.tryLock(5, java.util.concurrent.TimeUnit.SECONDS), "locked, the pool exhausted");
                java.util.concurrent.ExecutorService threads = java.util.concurrent.Executors.newFixedThreadPool(20);
                java.util.List<CompletableFuture<Boolean>> waits = new java.util.ArrayList<>();
                for (int i = 0; i < 20; i++) {
                    waits.add(CompletableFuture.supplyAsync(() -> {
                        PadlockLock l = padlock.getLock("spring:old");
                        try {
                            if (!l.tryLock(10, java.util.concurrent.TimeUnit.SECONDS)) {
                                return false;
                            }
                        } catch (InterruptedException e) {
                            return false;
                        }
                        l.unlock();
                        return true;
                    }, threads));
                }
                Thread.sleep(300);
                // Counted while the 20 wait (once none does, the mailbox
                // reader closes its connection).
                String list = srv.cmd(0, "CLIENT", "LIST");
                assertEquals(2, list.split(" name=padlock ", -1).length - 1, "keeper and mailbox, made, not borrowed");
                lock.unlock();
                for (CompletableFuture<Boolean> w : waits) {
                    assertTrue(w.get(20, java.util.concurrent.TimeUnit.SECONDS), "every wait granted through the mailbox");
                }
                list = srv.cmd(0, "CLIENT", "LIST");
                assertTrue(list.split(" name=padlock ", -1).length - 1 <= 2, "never more than keeper and mailbox");
                taken.forEach(org.springframework.data.redis.connection.RedisConnection::close);
                threads.shutdown();
            }
            factory.destroy();
        }
    }
}
