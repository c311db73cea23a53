package io.padlock.spring.boot;

import io.padlock.Padlock;
import io.padlock.PadlockLockProvider;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.context.annotation.Bean;

/** ShedLock's {@code LockProvider} on the {@link Padlock} bean ({@code padlock.shedlock-prefix}). */
@AutoConfiguration(after = PadlockAutoConfiguration.class)
@ConditionalOnClass(name = "net.javacrumbs.shedlock.core.LockProvider")
@ConditionalOnBean(Padlock.class)
public class PadlockLockProviderAutoConfiguration {
    @Bean
    @ConditionalOnMissingBean(type = "net.javacrumbs.shedlock.core.LockProvider")
    public PadlockLockProvider padlockLockProvider(Padlock padlock, PadlockProperties properties) {
        return new PadlockLockProvider(padlock, properties.getShedlockPrefix());
    }
}
