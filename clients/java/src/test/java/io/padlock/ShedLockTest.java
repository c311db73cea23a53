package io.padlock;

import static org.junit.jupiter.api.Assertions.assertEquals;

import net.javacrumbs.shedlock.core.ExtensibleLockProvider;
import net.javacrumbs.shedlock.test.support.AbstractExtensibleLockProviderIntegrationTest;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;

/**
 * ShedLock's own provider suites ({@code AbstractLockProviderIntegrationTest}
 * through {@code AbstractExtensibleLockProviderIntegrationTest}, from
 * shedlock-test-support), run against {@link PadlockLockProvider} on a real
 * server, on each driver.
 */
abstract class ShedLockTest extends AbstractExtensibleLockProviderIntegrationTest {
    static Servers srv;
    Clients clients;
    PadlockLockProvider provider;

    abstract String driver();

    @BeforeAll
    static void start() throws Exception {
        srv = Servers.standalone();
    }

    @AfterAll
    static void stop() {
        srv.close();
    }

    @BeforeEach
    void open() {
        clients = new Clients();
        srv.raw("FLUSHALL");
        provider = new PadlockLockProvider(clients.standalone(driver(), srv.port()));
    }

    @AfterEach
    void close() {
        clients.close();
    }

    @Override
    protected ExtensibleLockProvider getLockProvider() {
        return provider;
    }

    @Override
    protected void assertUnlocked(String lockName) {
        assertEquals(0L, srv.raw("EXISTS", "shedlock:" + lockName), lockName + " is locked");
    }

    @Override
    protected void assertLocked(String lockName) {
        assertEquals(1L, srv.raw("EXISTS", "shedlock:" + lockName), lockName + " is not locked");
    }

    static final class OnJedis extends ShedLockTest {
        @Override
        String driver() {
            return "jedis";
        }
    }

    static final class OnLettuce extends ShedLockTest {
        @Override
        String driver() {
            return "lettuce";
        }
    }
}
