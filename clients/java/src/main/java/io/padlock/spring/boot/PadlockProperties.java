package io.padlock.spring.boot;

import java.time.Duration;
import org.springframework.boot.context.properties.ConfigurationProperties;

/**
 * {@code padlock.*}: {@code ttl} (how long a hold outlives the application's
 * connection, 30 s by default), {@code registry-key} (the prefix of the
 * {@code LockRegistry}'s keys) and {@code shedlock-prefix} (of ShedLock's).
 */
@ConfigurationProperties("padlock")
public class PadlockProperties {
    private Duration ttl = Duration.ofSeconds(30);
    private String registryKey = "padlock-registry";
    private String shedlockPrefix = "shedlock:";

    public Duration getTtl() {
        return ttl;
    }

    public void setTtl(Duration ttl) {
        this.ttl = ttl;
    }

    public String getRegistryKey() {
        return registryKey;
    }

    public void setRegistryKey(String registryKey) {
        this.registryKey = registryKey;
    }

    public String getShedlockPrefix() {
        return shedlockPrefix;
    }

    public void setShedlockPrefix(String shedlockPrefix) {
        this.shedlockPrefix = shedlockPrefix;
    }
}
