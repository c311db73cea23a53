package io.padlock.spring.boot;

import io.padlock.Padlock;
import io.padlock.spring.PadlockLockRegistry;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.context.annotation.Bean;

/** Spring Integration's {@code LockRegistry} on the {@link Padlock} bean ({@code padlock.registry-key}). */
@AutoConfiguration(after = PadlockAutoConfiguration.class)
@ConditionalOnClass(name = "org.springframework.integration.support.locks.LockRegistry")
@ConditionalOnBean(Padlock.class)
public class PadlockLockRegistryAutoConfiguration {
    @Bean
    @ConditionalOnMissingBean(type = "org.springframework.integration.support.locks.LockRegistry")
    public PadlockLockRegistry padlockLockRegistry(Padlock padlock, PadlockProperties properties) {
        return new PadlockLockRegistry(padlock, properties.getRegistryKey());
    }
}
