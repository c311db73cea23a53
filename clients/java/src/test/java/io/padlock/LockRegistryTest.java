package io.padlock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.padlock.spring.PadlockLockRegistry;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.Lock;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.FieldSource;
import org.springframework.integration.leader.Context;
import org.springframework.integration.leader.DefaultCandidate;
import org.springframework.integration.support.leader.LockRegistryLeaderInitiator;
import org.springframework.integration.support.locks.DistributedLock;

/** Spring Integration's LockRegistry contract on PadlockLockRegistry, against a real server. */
class LockRegistryTest extends OnServer {

    PadlockLockRegistry registry(String driver) {
        return new PadlockLockRegistry(clients.standalone(driver, srv.port(), Duration.ofSeconds(1)), "reg");
    }

    @ParameterizedTest
    @FieldSource("drivers")
    void reentrantPerThreadAndOwnedByIt(String driver) throws Exception {
        PadlockLockRegistry reg = registry(driver);
        Lock lock = reg.obtain("a");
        assertSame(lock, reg.obtain("a"), "one lock object per key");
        assertTrue(lock.tryLock());
        assertTrue(lock.tryLock(), "reentrant in its thread");
        assertEquals("2", LockTest.info("reg:a", "count"));
        boolean other = CompletableFuture.supplyAsync(() -> reg.obtain("a").tryLock()).get();
        assertTrue(!other, "another thread does not get it");
        Throwable t = CompletableFuture.runAsync(() -> reg.obtain("a").unlock())
                .handle((v, e) -> e == null ? null : e.getCause()).get();
        assertTrue(t instanceof IllegalMonitorStateException, "unlock by a non-owner throws: " + t);
        lock.unlock();
        lock.unlock();
        assertThrows(IllegalMonitorStateException.class, lock::unlock);
        assertThrows(TimeoutException.class, () -> {
            Lock held = reg.obtain("b");
            held.lock();
            try {
                CompletableFuture.runAsync(() -> {
                    try {
                        reg.executeLocked("b", Duration.ofMillis(100), () -> { });
                    } catch (Exception e) {
                        throw new RuntimeException(e);
                    }
                }).join();
            } catch (java.util.concurrent.CompletionException e) {
                throw e.getCause().getCause();
            } finally {
                held.unlock();
            }
        });
    }

    /** A ttl lease runs out; unlocking after it throws; renewLock keeps it. */
    @ParameterizedTest
    @FieldSource("drivers")
    void ttlLeasesAndRenewal(String driver) throws Exception {
        PadlockLockRegistry reg = registry(driver);
        DistributedLock lock = reg.obtain("t");
        lock.lock(Duration.ofMillis(400));
        Thread.sleep(700);
        assertThrows(IllegalMonitorStateException.class, lock::unlock, "unlock after expiry throws");
        assertTrue(lock.tryLock(Duration.ofSeconds(1), Duration.ofMillis(600)));
        reg.renewLock("t", Duration.ofSeconds(3));
        Thread.sleep(900);
        assertEquals("1", LockTest.info("reg:t", "count"), "renewed past its first ttl");
        lock.unlock();
        assertThrows(IllegalStateException.class, () -> reg.renewLock("t"));
        reg.expireUnusedOlderThan(0);
        assertNotSame(lock, reg.obtain("t"), "an unused lock object is forgotten");
    }

    /** Aggregator-style: many threads obtain and lock one key; never two inside. */
    @ParameterizedTest
    @FieldSource("drivers")
    void manyThreadsOneKey(String driver) throws Exception {
        PadlockLockRegistry reg = registry(driver);
        AtomicInteger inside = new AtomicInteger();
        AtomicInteger most = new AtomicInteger();
        int[] count = {0};
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < 16; i++) {
            Thread t = new Thread(() -> {
                for (int j = 0; j < 25; j++) {
                    Lock l = reg.obtain("group-7");
                    l.lock();
                    try {
                        most.accumulateAndGet(inside.incrementAndGet(), Math::max);
                        count[0]++;
                        inside.decrementAndGet();
                    } finally {
                        l.unlock();
                    }
                }
            });
            threads.add(t);
            t.start();
        }
        for (Thread t : threads) {
            t.join();
        }
        assertEquals(1, most.get(), "two threads inside at once");
        assertEquals(400, count[0]);
    }

    static final class Counting extends DefaultCandidate {
        final AtomicInteger leading = new AtomicInteger();

        Counting(String id) {
            super(id, "role");
        }

        @Override
        public void onGranted(Context ctx) {
            leading.incrementAndGet();
        }

        @Override
        public void onRevoked(Context ctx) {
            leading.decrementAndGet();
        }
    }

    /** Two instances elect one leader; when the leader's process goes, the other takes over. */
    @ParameterizedTest
    @FieldSource("drivers")
    void leaderElectionFailsOver(String driver) throws Exception {
        Clients second = new Clients();
        List<LockRegistryLeaderInitiator> started = new ArrayList<>();
        try {
            PadlockLockRegistry r1 = registry(driver);
            PadlockLockRegistry r2 = new PadlockLockRegistry(second.standalone(driver, srv.port(), Duration.ofSeconds(1)), "reg");
            Counting c1 = new Counting("one");
            Counting c2 = new Counting("two");
            LockRegistryLeaderInitiator i1 = new LockRegistryLeaderInitiator(r1, c1);
            LockRegistryLeaderInitiator i2 = new LockRegistryLeaderInitiator(r2, c2);
            for (LockRegistryLeaderInitiator i : List.of(i1, i2)) {
                i.setHeartBeatMillis(100);
                i.setBusyWaitMillis(50);
                i.start();
                started.add(i);
            }
            waitUntil(() -> c1.leading.get() + c2.leading.get() == 1, 5000);
            for (int k = 0; k < 10; k++) {
                assertEquals(1, c1.leading.get() + c2.leading.get(), "one leader at a time");
                Thread.sleep(50);
            }
            Counting leader = c1.leading.get() == 1 ? c1 : c2;
            Counting follower = leader == c1 ? c2 : c1;
            // The leader's process goes: its connections close, its lease runs out.
            if (leader == c1) {
                clients.close();
                clients = new Clients();
            } else {
                second.close();
            }
            waitUntil(() -> follower.leading.get() == 1, 10_000);
            waitUntil(() -> leader.leading.get() == 0, 10_000);
        } finally {
            started.forEach(LockRegistryLeaderInitiator::stop);
            second.close();
        }
    }

    /** The leader's connections cut (its process lives but cannot reach the server): the other takes over. */
    @ParameterizedTest
    @FieldSource("drivers")
    void leaderElectionFailsOverWhenTheLeadersConnectionIsCut(String driver) throws Exception {
        Clients second = new Clients();
        List<LockRegistryLeaderInitiator> started = new ArrayList<>();
        try (Proxy proxy = new Proxy(srv.port())) {
            PadlockLockRegistry r1 = new PadlockLockRegistry(clients.standalone(driver, proxy.port(), Duration.ofSeconds(1)), "reg");
            PadlockLockRegistry r2 = new PadlockLockRegistry(second.standalone(driver, srv.port(), Duration.ofSeconds(1)), "reg");
            Counting c1 = new Counting("behind-proxy");
            Counting c2 = new Counting("direct");
            LockRegistryLeaderInitiator i1 = new LockRegistryLeaderInitiator(r1, c1);
            LockRegistryLeaderInitiator i2 = new LockRegistryLeaderInitiator(r2, c2);
            for (LockRegistryLeaderInitiator i : List.of(i1, i2)) {
                i.setHeartBeatMillis(100);
                i.setBusyWaitMillis(50);
            }
            i1.start();
            started.add(i1);
            waitUntil(() -> c1.leading.get() == 1, 5000);
            i2.start();
            started.add(i2);
            Thread.sleep(500);
            assertEquals(0, c2.leading.get(), "one leader at a time");
            proxy.cut();
            waitUntil(() -> c2.leading.get() == 1, 10_000);
            waitUntil(() -> c1.leading.get() == 0, 10_000);
        } finally {
            started.forEach(LockRegistryLeaderInitiator::stop);
            second.close();
        }
    }

    static void waitUntil(java.util.function.BooleanSupplier ok, long ms) throws InterruptedException {
        long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(ms);
        while (!ok.getAsBoolean()) {
            if (System.nanoTime() > end) {
                throw new AssertionError("not within " + ms + " ms");
            }
            Thread.sleep(10);
        }
    }
}
