package io.padlock.spring.boot;

import io.padlock.Padlock;
import io.padlock.driver.SpringDriver;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.context.annotation.Bean;
import org.springframework.data.redis.connection.RedisConnectionFactory;

/**
 * A {@link Padlock} bean from the application's {@link RedisConnectionFactory}
 * (the one {@code StringRedisTemplate} uses), with {@code padlock.ttl}. Beside
 * it, {@link PadlockLockRegistryAutoConfiguration} and
 * {@link PadlockLockProviderAutoConfiguration} add Spring Integration's and
 * ShedLock's beans when those libraries are on the classpath. Each backs off
 * when the application defines its own.
 */
@AutoConfiguration(afterName = {
    "org.springframework.boot.data.redis.autoconfigure.DataRedisAutoConfiguration",
    "org.springframework.boot.autoconfigure.data.redis.RedisAutoConfiguration"})
@ConditionalOnClass(RedisConnectionFactory.class)
@EnableConfigurationProperties(PadlockProperties.class)
public class PadlockAutoConfiguration {

    @Bean(destroyMethod = "close")
    @ConditionalOnMissingBean
    @ConditionalOnBean(RedisConnectionFactory.class)
    public Padlock padlock(RedisConnectionFactory factory, PadlockProperties properties) {
        return Padlock.builder(SpringDriver.of(factory)).ttl(properties.getTtl()).build();
    }
}
