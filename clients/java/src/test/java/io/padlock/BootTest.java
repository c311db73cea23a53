package io.padlock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.padlock.spring.PadlockLockRegistry;
import java.time.Duration;
import java.util.Optional;
import net.javacrumbs.shedlock.core.LockConfiguration;
import net.javacrumbs.shedlock.core.LockProvider;
import net.javacrumbs.shedlock.core.SimpleLock;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.data.redis.connection.RedisConnectionFactory;
import org.springframework.data.redis.connection.RedisStandaloneConfiguration;
import org.springframework.data.redis.connection.lettuce.LettuceConnectionFactory;
import org.springframework.integration.support.locks.LockRegistry;

/** The auto-configuration in a real Spring Boot application context, against a real server. */
class BootTest extends OnServer {

    LettuceConnectionFactory factory() {
        LettuceConnectionFactory f = new LettuceConnectionFactory(new RedisStandaloneConfiguration("127.0.0.1", srv.port()));
        f.afterPropertiesSet();
        f.start();
        return f;
    }

    @Test
    void theBeansComeUpAndWork() {
        new ApplicationContextRunner()
                .withConfiguration(AutoConfigurations.of(io.padlock.spring.boot.PadlockAutoConfiguration.class,
                        io.padlock.spring.boot.PadlockLockRegistryAutoConfiguration.class,
                        io.padlock.spring.boot.PadlockLockProviderAutoConfiguration.class))
                .withBean(RedisConnectionFactory.class, this::factory)
                .withPropertyValues("padlock.ttl=5s", "padlock.registry-key=app", "padlock.shedlock-prefix=jobs:")
                .run(ctx -> {
                    Padlock padlock = ctx.getBean(Padlock.class);
                    LockRegistry<?> registry = ctx.getBean(LockRegistry.class);
                    assertTrue(registry instanceof PadlockLockRegistry);
                    var lock = registry.obtain("order-7");
                    assertTrue(lock.tryLock());
                    assertEquals("5000", LockTest.info("app:order-7", "ttl"), "padlock.ttl applies");
                    lock.unlock();
                    LockProvider shedlock = ctx.getBean(LockProvider.class);
                    Optional<SimpleLock> run = shedlock.lock(new LockConfiguration(
                            java.time.Instant.now(), "nightly", Duration.ofMinutes(1), Duration.ZERO));
                    assertTrue(run.isPresent());
                    assertEquals(1L, srv.raw("EXISTS", "jobs:nightly"));
                    run.get().unlock();
                    assertSame(padlock, ctx.getBean(Padlock.class));
                });
    }

    /** What Spring Boot finds on the classpath: the three auto-configurations. */
    @Test
    void registeredForSpringBoot() {
        var found = new java.util.ArrayList<String>();
        org.springframework.boot.context.annotation.ImportCandidates
                .load(org.springframework.boot.autoconfigure.AutoConfiguration.class, getClass().getClassLoader())
                .forEach(found::add);
        assertTrue(found.containsAll(java.util.List.of("io.padlock.spring.boot.PadlockAutoConfiguration",
                "io.padlock.spring.boot.PadlockLockRegistryAutoConfiguration",
                "io.padlock.spring.boot.PadlockLockProviderAutoConfiguration")), found.toString());
    }

    @Test
    void anApplicationsOwnBeansWin() {
        new ApplicationContextRunner()
                .withConfiguration(AutoConfigurations.of(io.padlock.spring.boot.PadlockAutoConfiguration.class,
                        io.padlock.spring.boot.PadlockLockRegistryAutoConfiguration.class,
                        io.padlock.spring.boot.PadlockLockProviderAutoConfiguration.class))
                .withBean(RedisConnectionFactory.class, this::factory)
                .withBean("mine", LockProvider.class, () -> c -> Optional.empty())
                .run(ctx -> {
                    assertEquals(1, ctx.getBeansOfType(LockProvider.class).size());
                    assertTrue(ctx.getBean(LockProvider.class).lock(new LockConfiguration(
                            java.time.Instant.now(), "x", Duration.ofMinutes(1), Duration.ZERO)).isEmpty());
                });
    }
}
