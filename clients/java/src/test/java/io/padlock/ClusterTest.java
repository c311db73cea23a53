package io.padlock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.FieldSource;

/** A three-master cluster: each key's hold lives on its slot's node. */
class ClusterTest {
    static Servers cluster;
    static final List<String> drivers = Clients.DRIVERS;

    @BeforeAll
    static void start() throws Exception {
        cluster = Servers.cluster();
    }

    @AfterAll
    static void stop() {
        cluster.close();
    }

    /** Which node holds `key` now (the one whose LOCK.INFO shows it). */
    static Set<Integer> nodesHolding(String key) throws Exception {
        Set<Integer> out = new HashSet<>();
        for (int i = 0; i < 3; i++) {
            try {
                if (!cluster.cmd(i, "TYPE", key).equals("none")) {
                    out.add(i);
                }
            } catch (redis.clients.jedis.exceptions.JedisDataException moved) {
                // not this node's slot
            }
        }
        return out;
    }

    @ParameterizedTest
    @FieldSource("drivers")
    void locksOnEveryNodeAndMultiLocksWithAHashTag(String driver) throws Exception {
        try (Clients clients = new Clients()) {
            Padlock p = clients.cluster(driver, cluster.ports);
            Set<Integer> nodes = new HashSet<>();
            for (int k = 0; k < 16 && nodes.size() < 3; k++) {
                String key = "k" + k;
                PadlockLock lock = p.getLock(key + "-" + driver);
                lock.lock();
                lock.lock();
                assertEquals(2, lock.getHoldCount());
                Set<Integer> holding = nodesHolding(key + "-" + driver);
                assertEquals(1, holding.size());
                nodes.addAll(holding);
                assertFalse(CompletableFuture.supplyAsync(lock::tryLock).get());
                lock.unlock();
                lock.unlock();
                assertTrue(nodesHolding(key + "-" + driver).isEmpty());
            }
            assertEquals(3, nodes.size(), "the keys landed on every node");
            PadlockMultiLock multi = p.getMultiLock("{acct}:1-" + driver, "{acct}:2-" + driver);
            assertTrue(multi.tryLock(1, TimeUnit.SECONDS));
            assertEquals(2, multi.fences().size());
            multi.unlock();
            PadlockSemaphore sem = p.getSemaphore("sem-" + driver, 2);
            assertTrue(sem.tryAcquire(2));
            assertEquals(0, sem.availablePermits());
            sem.release(2);
        }
    }
}
