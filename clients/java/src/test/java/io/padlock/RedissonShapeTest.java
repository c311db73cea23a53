package io.padlock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.FieldSource;

/** The calls Redisson users make, on PadlockLock: plain leases, forceUnlock, remainTimeToLive. */
class RedissonShapeTest extends OnServer {

    Padlock pad(String driver) {
        return clients.standalone(driver, srv.port());
    }

    /** A leaseTime lease runs out while its holder sleeps, as Redisson's does. */
    @ParameterizedTest
    @FieldSource("drivers")
    void aLeaseTimeRunsOutWhileTheHolderLives(String driver) throws Exception {
        PadlockLock lock = pad(driver).getLock("lease");
        lock.lock(500, TimeUnit.MILLISECONDS);
        assertEquals("0", LockTest.info("lease", "keep"), "a leaseTime lease is not kept");
        long ttl = lock.remainTimeToLive();
        assertTrue(ttl > 0 && ttl <= 500, "remainTimeToLive " + ttl);
        assertTrue(lock.isLocked());
        assertEquals(1, lock.getHoldCount());
        Thread.sleep(800);
        assertFalse(lock.isLocked(), "the lease ran out");
        assertEquals(-2, lock.remainTimeToLive());
        assertThrows(IllegalMonitorStateException.class, lock::unlock);
        // Taken again afresh by the same thread, counted from one.
        assertTrue(lock.tryLock(1, 5, TimeUnit.SECONDS));
        assertEquals("1", LockTest.info("lease", "count"));
        lock.unlock();
        assertFalse(lock.isLocked());
    }

    @ParameterizedTest
    @FieldSource("drivers")
    void tryLockWithWaitAndLease(String driver) throws Exception {
        Padlock p = pad(driver);
        PadlockLock mine = p.getLock("busy");
        mine.lock();
        boolean other = CompletableFuture.supplyAsync(() -> {
            try {
                return p.getLock("busy").tryLock(200, 1000, TimeUnit.MILLISECONDS);
            } catch (InterruptedException e) {
                return false;
            }
        }).get();
        assertFalse(other, "waited 200 ms for a held lock");
        CompletableFuture<Boolean> waiter = CompletableFuture.supplyAsync(() -> {
            try {
                PadlockLock l = p.getLock("busy");
                boolean got = l.tryLock(5, 1, TimeUnit.SECONDS);
                if (got) {
                    l.unlock();
                }
                return got;
            } catch (InterruptedException e) {
                return false;
            }
        });
        Thread.sleep(100);
        mine.unlock();
        assertTrue(waiter.get(), "granted once released");
    }

    /** forceUnlock frees a lock whoever holds it; the holder hears its loss, a waiter is served. */
    @ParameterizedTest
    @FieldSource("drivers")
    void forceUnlockFreesWhoeverHolds(String driver) throws Exception {
        Padlock holderSide = pad(driver);
        Padlock admin = pad(driver);
        PadlockLock held = holderSide.getLock("stuck");
        held.lock();
        assertTrue(admin.getLock("stuck").forceUnlock(), "a held lock was there");
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(2);
        while (!held.isLost() && System.nanoTime() < deadline) {
            Thread.sleep(10);
        }
        assertTrue(held.isLost(), "the holder heard that its lock was taken away");
        assertFalse(admin.getLock("stuck").forceUnlock(), "nothing left to free");
        assertThrows(IllegalMonitorStateException.class, held::unlock);
    }

    /** lockAsync: a thousand pending futures on Lettuce, no thread per wait, served in turn. */
    @org.junit.jupiter.api.Test
    void thousandsOfPendingFuturesOnFewThreads() throws Exception {
        Padlock p = pad("lettuce");
        PadlockLock first = p.getLock("hot").withHolder("first");
        first.lock();
        int before = Thread.activeCount();
        java.util.List<java.util.concurrent.CompletableFuture<Void>> done = new java.util.ArrayList<>();
        for (int i = 0; i < 1000; i++) {
            PadlockLock l = p.getLock("hot").withHolder("w" + i);
            done.add(l.lockAsync().thenCompose(got -> l.unlockAsync()));
        }
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (!"1000".equals(LockTest.info("hot", "waiters")) && System.nanoTime() < end) {
            Thread.sleep(10);
        }
        assertEquals("1000", LockTest.info("hot", "waiters"));
        int grew = Thread.activeCount() - before;
        assertTrue(grew < 20, grew + " threads for 1,000 pending futures");
        first.unlock();
        java.util.concurrent.CompletableFuture.allOf(done.toArray(new java.util.concurrent.CompletableFuture<?>[0]))
                .get(30, TimeUnit.SECONDS);
        assertFalse(first.isLocked());
    }

    /**
     * On Lettuce no thread waits for an async command's reply: with the
     * server holding back writes, every lockAsync's queueing, every
     * unlockAsync's release and every tryLockAsync is out on the keeper's
     * connection at once (a
     * thread per command would send them one at a time: the keeper is one
     * connection), and all complete once the server answers.
     */
    @org.junit.jupiter.api.Test
    void asyncCommandsAreOutAtOnceOnLettuce() throws Exception {
        Padlock p = pad("lettuce");
        PadlockLock warm = p.getLock("warm").withHolder("x");
        warm.lock(); // the keeper and the mailbox reader connected
        warm.unlock();
        int n = 50;
        java.util.List<PadlockLock> locks = new java.util.ArrayList<>();
        for (int i = 0; i < n; i++) {
            locks.add(p.getLock("a:" + i).withHolder("h" + i));
        }
        java.util.List<CompletableFuture<?>> taken = new java.util.ArrayList<>();
        srv.raw("CLIENT", "PAUSE", "700", "WRITE");
        locks.forEach(l -> taken.add(l.lockAsync()));
        assertTrue(pendingBytes() > 20 * 60, "every queueing out at once");
        assertTrue(taken.stream().noneMatch(CompletableFuture::isDone));
        CompletableFuture.allOf(taken.toArray(new CompletableFuture<?>[0])).get(10, TimeUnit.SECONDS);
        assertEquals(Long.valueOf(n), srv.raw("DBSIZE"));
        java.util.List<CompletableFuture<Void>> given = new java.util.ArrayList<>();
        srv.raw("CLIENT", "PAUSE", "700", "WRITE");
        locks.forEach(l -> given.add(l.unlockAsync()));
        assertTrue(pendingBytes() > 20 * 40, "every release out at once");
        assertTrue(given.stream().noneMatch(CompletableFuture::isDone));
        CompletableFuture.allOf(given.toArray(new CompletableFuture<?>[0])).get(10, TimeUnit.SECONDS);
        assertEquals(Long.valueOf(0), srv.raw("DBSIZE"));
        assertTrue(locks.stream().noneMatch(PadlockLock::isLocked));
        java.util.List<CompletableFuture<Boolean>> tries = new java.util.ArrayList<>();
        srv.raw("CLIENT", "PAUSE", "700", "WRITE");
        locks.forEach(l -> tries.add(l.tryLockAsync()));
        assertTrue(pendingBytes() > 20 * 60, "every try out at once");
        CompletableFuture.allOf(tries.toArray(new CompletableFuture<?>[0])).get(10, TimeUnit.SECONDS);
        assertTrue(tries.stream().allMatch(CompletableFuture::join), "each try got its free lock");
        assertTrue(locks.stream().allMatch(PadlockLock::isLocked));
        for (PadlockLock l : locks) {
            l.unlockAsync().get(5, TimeUnit.SECONDS);
        }
        assertEquals(Long.valueOf(0), srv.raw("DBSIZE"));
    }

    /** The most bytes sent by one client that the (paused) server has not read as commands yet, within 500 ms. */
    private static long pendingBytes() throws InterruptedException {
        long most = 0;
        long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(500);
        while (System.nanoTime() < end && most < 20 * 60) {
            for (String line : Servers.text(srv.raw("CLIENT", "LIST")).split("\n")) {
                java.util.regex.Matcher m = java.util.regex.Pattern.compile(" qbuf=(\\d+)").matcher(line);
                if (m.find()) {
                    most = Math.max(most, Long.parseLong(m.group(1)));
                }
            }
            Thread.sleep(5);
        }
        return most;
    }

    /** Cancelling a pending lockAsync leaves the queue; the lock is never left with it. */
    @org.junit.jupiter.api.Test
    void cancellingAPendingFutureLeavesTheQueue() throws Exception {
        Padlock p = pad("lettuce");
        PadlockLock first = p.getLock("q").withHolder("first");
        first.lock();
        var pending = p.getLock("q").withHolder("second").lockAsync();
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while (!"1".equals(LockTest.info("q", "waiters")) && System.nanoTime() < end) {
            Thread.sleep(10);
        }
        pending.cancel(true);
        end = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while (!"0".equals(LockTest.info("q", "waiters")) && System.nanoTime() < end) {
            Thread.sleep(10);
        }
        assertEquals("0", LockTest.info("q", "waiters"));
        first.unlock();
        Thread.sleep(100);
        assertFalse(first.isLocked(), "the cancelled future never took it");
    }

    /** A lock granted after a wait longer than its ttl is held at once: its lease is known to live. */
    @ParameterizedTest
    @FieldSource("drivers")
    void heldRightAfterALongWait(String driver) throws Exception {
        Padlock p = clients.standalone(driver, srv.port(), java.time.Duration.ofSeconds(1));
        PadlockLock first = p.getLock("long").withHolder("first");
        first.lock();
        CompletableFuture<long[]> waiter = CompletableFuture.supplyAsync(() -> {
            PadlockLock l = p.getLock("long");
            l.lock();
            long[] seen = {l.isHeldByCurrentThread() ? 1 : 0, l.fence()};
            l.unlock();
            return seen;
        });
        Thread.sleep(1500);
        first.unlock();
        long[] seen = waiter.get(10, TimeUnit.SECONDS);
        assertEquals(1, seen[0], "held right after the grant");
        assertTrue(seen[1] > 0, "with its fence");
    }
}
