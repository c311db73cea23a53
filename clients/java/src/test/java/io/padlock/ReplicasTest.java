package io.padlock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.FieldSource;

/** Grants that wait for replicas ({@link Replicas}), against a real replica; a stopped one stands for a lagging one. */
class ReplicasTest {
    static final List<String> drivers = Clients.DRIVERS;
    static Servers srv;
    Clients clients;
    final List<String> logged = new CopyOnWriteArrayList<>();

    @BeforeAll
    static void start() throws Exception {
        srv = Servers.withReplica();
    }

    @AfterAll
    static void stop() {
        srv.close();
    }

    @BeforeEach
    void open() {
        clients = new Clients();
    }

    @AfterEach
    void close() throws Exception {
        srv.pause(1, false);
        clients.close();
        srv.raw("FLUSHALL");
    }

    Padlock pad(String driver, Replicas r) {
        return clients.standalone(driver, srv.port(), b -> b.replicas(r).log(logged::add));
    }

    @ParameterizedTest
    @FieldSource("drivers")
    void aGrantIsReportedOnceTheReplicaHasIt(String driver) throws Exception {
        PadlockLock lock = pad(driver, Replicas.of(1)).getLock("job");
        lock.lock();
        assertEquals("1", srv.cmd(1, "EXISTS", "job"), "on the replica when reported");
        lock.unlock();
    }

    @ParameterizedTest
    @FieldSource("drivers")
    void aMailedGrantIsOnTheReplicaWhenReported(String driver) throws Exception {
        Padlock p = pad(driver, Replicas.of(1));
        PadlockLock first = p.getLock("hot").withHolder("first");
        first.lock();
        CompletableFuture<String> seen = CompletableFuture.supplyAsync(() -> {
            PadlockLock second = p.getLock("hot").withHolder("second");
            try {
                assertTrue(second.tryLock(5, TimeUnit.SECONDS));
                String info = srv.cmd(1, "LOCK.INFO", "hot");
                second.unlock();
                return info;
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
        });
        Thread.sleep(200);
        first.unlock();
        assertTrue(seen.get(10, TimeUnit.SECONDS).contains("holder second"), "the replica had the mailed grant");
    }

    @ParameterizedTest
    @FieldSource("drivers")
    void aReplicaThatDoesNotAnswerMakesTheGrantFail(String driver) throws Exception {
        srv.pause(1, true);
        Padlock p = pad(driver, Replicas.of(1).withTimeout(Duration.ofMillis(200)));
        PadlockLock lock = p.getLock("job");
        assertFalse(lock.tryLock(1, TimeUnit.SECONDS));
        assertFalse(lock.tryLock());
        assertEquals(Long.valueOf(0), srv.raw("EXISTS", "job"), "the grant short of its replica is given back");
        assertFalse(lock.isHeldByCurrentThread());
        assertFalse(lock.tryLockAsync().get(5, TimeUnit.SECONDS));
        assertTrue(logged.stream().anyMatch(m -> m.contains("0 of 1 replicas") && m.endsWith("released")), logged.toString());
    }

    @ParameterizedTest
    @FieldSource("drivers")
    void warnKeepsTheHold(String driver) throws Exception {
        srv.pause(1, true);
        Padlock p = pad(driver, Replicas.of(1).withTimeout(Duration.ofMillis(200)).warnOnShortfall());
        PadlockSemaphore sem = p.getSemaphore("pool", 2);
        assertTrue(sem.tryAcquire(1, 1, TimeUnit.SECONDS));
        assertEquals(Long.valueOf(1), srv.raw("EXISTS", "pool"), "kept");
        sem.release();
        assertTrue(logged.stream().anyMatch(m -> m.startsWith("the release of")), logged.toString());
    }

    /** lock() and lockAsync() wait as long as it takes: short of the replica they wait on, never return unheld. */
    @ParameterizedTest
    @FieldSource("drivers")
    void lockWaitsOnUntilTheReplicaHasIt(String driver) throws Exception {
        srv.pause(1, true);
        Padlock p = pad(driver, Replicas.of(1).withTimeout(Duration.ofMillis(200)));
        PadlockLock l = p.getLock("w");
        CompletableFuture<Boolean> sync = CompletableFuture.supplyAsync(() -> {
            l.lock();
            boolean held = l.isHeldByCurrentThread();
            l.unlock();
            return held;
        });
        PadlockLock other = p.getLock("w2").withHolder("x");
        CompletableFuture<Boolean> async = other.lockAsync();
        Thread.sleep(800);
        assertFalse(sync.isDone(), "lock() returned short of its replica");
        assertFalse(async.isDone(), "lockAsync() completed short of its replica");
        srv.pause(1, false);
        assertTrue(sync.get(10, TimeUnit.SECONDS));
        assertTrue(async.get(10, TimeUnit.SECONDS));
        assertTrue(other.isLocked());
        other.unlockAsync().get(5, TimeUnit.SECONDS);
    }

    @org.junit.jupiter.api.Test
    void badOptionsAreRefused() {
        assertThrows(IllegalArgumentException.class, () -> Replicas.of(0));
        assertThrows(IllegalArgumentException.class, () -> Replicas.of(1).withTimeout(Duration.ZERO));
    }
}
