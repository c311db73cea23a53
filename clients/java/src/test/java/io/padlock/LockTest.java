package io.padlock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.Lock;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.FieldSource;

/** Locks on a real server, through Jedis and through Lettuce. */
class LockTest extends OnServer {

    Padlock pad(String driver) {
        return clients.standalone(driver, srv.port());
    }

    /** The server's view: field → value of LOCK.INFO (empty when free). */
    static String info(String key, String field) {
        return info("LOCK.INFO", key, field);
    }

    /** One field of {@code command}'s reply ({@code LOCK.INFO}, {@code SEM.INFO}, ...); null when absent. */
    static String info(String command, String key, String field) {
        Object reply = srv.raw(command, key);
        if (reply == null) {
            return null;
        }
        List<?> flat = (List<?>) reply;
        for (int i = 0; i + 1 < flat.size(); i += 2) {
            if (Servers.text(flat.get(i)).equals(field)) {
                return Servers.text(flat.get(i + 1));
            }
        }
        return null;
    }

    /**
     * An uncontended acquire wakes no thread of padlock's: its hold's first
     * round is timed by the watcher, which wakes only for the earliest
     * round, and released holds' rounds are dropped in bulk.
     */
    @ParameterizedTest
    @FieldSource("drivers")
    void anAcquireWakesNoWatcher(String driver) throws Exception {
        Padlock p = pad(driver);
        PadlockLock anchor = p.getLock("wake:anchor"); // an earlier round: the watcher sleeps on it
        anchor.lock();
        try {
            Thread.sleep(100);
            PadlockLock lock = p.getLock("wake:k");
            long wakes;
            synchronized (p.watcher) {
                wakes = p.watcher.wakes;
            }
            for (int i = 0; i < 1000; i++) {
                lock.lock();
                lock.unlock();
            }
            long woke;
            synchronized (p.watcher) {
                woke = p.watcher.wakes - wakes;
            }
            assertTrue(woke < 20, "the watcher woke " + woke + " times for 1,000 acquires");
            assertTrue(p.watcher.rounds() <= 130, p.watcher.rounds() + " rounds queued: released holds' not purged");
        } finally {
            anchor.unlock();
        }
    }

    /** The seeds' scenario: a function holding the lock calls one that takes it again. */
    @ParameterizedTest
    @FieldSource("drivers")
    void nestedCallsReenterInOneThread(String driver) throws Exception {
        Padlock p = pad(driver);
        PadlockLock outer = p.getLock("order:1001");
        outer.lock();
        try {
            PadlockLock inner = p.getLock("order:1001");
            assertTrue(inner.tryLock(1, TimeUnit.SECONDS), "the inner call reenters instead of waiting");
            assertEquals(2, inner.getHoldCount());
            assertEquals("2", info("order:1001", "count"));
            assertEquals(outer.fence(), inner.fence());
            inner.unlock();
            assertTrue(outer.isHeldByCurrentThread());
            assertEquals("1", info("order:1001", "count"));
            // Another thread is another holder.
            boolean other = CompletableFuture.supplyAsync(() -> p.getLock("order:1001").tryLock()).get();
            assertFalse(other);
        } finally {
            outer.unlock();
        }
        assertEquals(null, info("order:1001", "count"));
        assertFalse(outer.isHeldByCurrentThread());
    }

    @ParameterizedTest
    @FieldSource("drivers")
    void anExplicitHolderIsSharedAcrossThreads(String driver) throws Exception {
        Padlock p = pad(driver);
        PadlockLock job = p.getLock("job").withHolder("job-42");
        assertTrue(job.tryLock());
        boolean reentered = CompletableFuture.supplyAsync(() -> {
            boolean ok = job.tryLock();
            job.unlock();
            return ok;
        }).get();
        assertTrue(reentered);
        assertEquals("job-42", info("job", "holder"));
        assertEquals("1", info("job", "count"));
        assertFalse(p.getLock("job").tryLock(), "the thread's own holder is someone else");
        job.unlock();
    }

    @ParameterizedTest
    @FieldSource("drivers")
    void theLockContract(String driver) throws Exception {
        Padlock p = pad(driver);
        PadlockLock lock = p.getLock("contract");
        assertThrows(IllegalMonitorStateException.class, lock::unlock, "unlock of what this thread does not hold");
        assertThrows(UnsupportedOperationException.class, lock::newCondition);
        lock.lock();
        Throwable t = CompletableFuture.supplyAsync(() -> {
            try {
                lock.unlock();
                return null;
            } catch (Throwable e) {
                return e;
            }
        }).get();
        assertTrue(t instanceof IllegalMonitorStateException, "unlock by a non-owner thread: " + t);
        long started = System.nanoTime();
        assertFalse(CompletableFuture.supplyAsync(lock::tryLock).get(), "tryLock() does not wait");
        assertTrue(System.nanoTime() - started < TimeUnit.SECONDS.toNanos(1));
        assertEquals(1, lock.getHoldCount());
        lock.unlock();
        assertEquals(0, lock.getHoldCount());
    }

    @ParameterizedTest
    @FieldSource("drivers")
    void tryLockWithATimeGivesUpAfterIt(String driver) throws Exception {
        Padlock p = pad(driver);
        PadlockLock lock = p.getLock("busy").withHolder("other");
        assertTrue(lock.tryLock());
        long started = System.nanoTime();
        assertFalse(p.getLock("busy").tryLock(300, TimeUnit.MILLISECONDS));
        long took = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started);
        assertTrue(took >= 250 && took < 3000, "waited " + took + " ms");
        assertEquals("0", info("busy", "waiters"));
        lock.unlock();
    }

    @ParameterizedTest
    @FieldSource("drivers")
    void waitsAreServedInArrivalOrder(String driver) throws Exception {
        Padlock p = pad(driver);
        PadlockLock first = p.getLock("fair").withHolder("first");
        first.lock();
        List<String> order = Collections.synchronizedList(new ArrayList<>());
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < 5; i++) {
            String name = "w" + i;
            Thread t = new Thread(() -> {
                PadlockLock l = p.getLock("fair").withHolder(name);
                l.lock();
                order.add(name);
                l.unlock();
            });
            t.start();
            threads.add(t);
            // each queued before the next starts
            long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
            while (!String.valueOf(i + 1).equals(info("fair", "waiters")) && System.nanoTime() < until) {
                Thread.sleep(5);
            }
        }
        first.unlock();
        for (Thread t : threads) {
            t.join(10_000);
        }
        assertEquals(List.of("w0", "w1", "w2", "w3", "w4"), order);
    }

    @ParameterizedTest
    @FieldSource("drivers")
    void anInterruptLeavesTheQueue(String driver) throws Exception {
        Padlock p = pad(driver);
        PadlockLock held = p.getLock("intr").withHolder("owner");
        held.lock();
        AtomicReference<Throwable> caught = new AtomicReference<>();
        Thread t = new Thread(() -> {
            try {
                p.getLock("intr").lockInterruptibly();
            } catch (Throwable e) {
                caught.set(e);
            }
        });
        t.start();
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while (!"1".equals(info("intr", "waiters")) && System.nanoTime() < until) {
            Thread.sleep(5);
        }
        t.interrupt();
        t.join(5000);
        assertTrue(caught.get() instanceof InterruptedException, "got " + caught.get());
        until = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while (!"0".equals(info("intr", "waiters")) && System.nanoTime() < until) {
            Thread.sleep(5);
        }
        assertEquals("0", info("intr", "waiters"), "the server dropped the wait");
        held.unlock();
        assertEquals(null, info("intr", "holder"), "never granted to the interrupted waiter");
    }

    @ParameterizedTest
    @FieldSource("drivers")
    void aDeadlockAcrossTwoThreadsIsReportedWithItsCycle(String driver) throws Exception {
        Padlock p = pad(driver);
        CountDownLatch both = new CountDownLatch(2);
        CountDownLatch tWaits = new CountDownLatch(1);
        AtomicReference<Throwable> fromT = new AtomicReference<>();
        Thread t = new Thread(() -> {
            PadlockLock a = p.getLock("acct:1").withHolder("t1");
            a.lock();
            both.countDown();
            try {
                both.await();
                tWaits.countDown();
                PadlockLock b = p.getLock("acct:2").withHolder("t1");
                b.lock();
                b.unlock();
            } catch (Throwable e) {
                fromT.set(e);
            } finally {
                a.unlock();
            }
        });
        t.start();
        PadlockLock b = p.getLock("acct:2").withHolder("t2");
        b.lock();
        both.countDown();
        tWaits.await();
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while (!"1".equals(info("acct:2", "waiters")) && System.nanoTime() < until) {
            Thread.sleep(5);
        }
        DeadlockException d = assertThrows(DeadlockException.class, () -> p.getLock("acct:1").withHolder("t2").lock());
        assertEquals(List.of("t2", "acct:1", "t1", "acct:2", "t2"), d.cycle());
        b.unlock();
        t.join(5000);
        assertEquals(null, fromT.get());
    }

    @ParameterizedTest
    @FieldSource("drivers")
    void aKilledConnectionIsReplacedAndTheLeaseBoundAgain(String driver) throws Exception {
        Padlock p = clients.standalone(driver, srv.port(), Duration.ofMillis(900));
        PadlockLock lock = p.getLock("killed");
        lock.lock();
        assertEquals("1", info("killed", "keep"));
        srv.raw("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes");
        Thread.sleep(1500); // longer than the ttl: only a new binding keeps it
        assertTrue(lock.isHeldByCurrentThread());
        assertEquals("1", info("killed", "keep"));
        lock.unlock();
        assertEquals(null, info("killed", "holder"));
    }

    @ParameterizedTest
    @FieldSource("drivers")
    void aDeletedOrReplacedKeyIsALostHold(String driver) throws Exception {
        Padlock p = clients.standalone(driver, srv.port(), Duration.ofMillis(600));
        for (String how : List.of("DEL", "SET")) {
            PadlockLock lock = p.getLock("gone");
            CountDownLatch heard = new CountDownLatch(1);
            lock.onLost(heard::countDown);
            lock.lock();
            if (how.equals("DEL")) {
                srv.raw("DEL", "gone");
            } else {
                srv.raw("SET", "gone", "a string");
            }
            assertTrue(heard.await(3, TimeUnit.SECONDS), how + ": the loss is reported");
            assertFalse(lock.isHeldByCurrentThread());
            assertTrue(lock.isLost());
            assertThrows(IllegalMonitorStateException.class, lock::unlock);
            srv.raw("DEL", "gone");
        }
    }

    @ParameterizedTest
    @FieldSource("drivers")
    void aLostReplyDoesNotDoubleAReentry(String driver) throws Exception {
        try (Proxy proxy = new Proxy(srv.port())) {
            Padlock p = clients.standalone(driver, proxy.port());
            PadlockLock lock = p.getLock("resent");
            lock.lock();
            proxy.loseNextReply();
            lock.lock(); // applied, its reply lost, resent with the same request-id
            assertEquals(2, lock.getHoldCount());
            assertEquals("2", info("resent", "count"));
            proxy.loseNextReply();
            lock.unlock();
            assertEquals("1", info("resent", "count"), "a lost release reply frees one level, not two");
            lock.unlock();
            assertEquals(null, info("resent", "count"));
        }
    }

    /**
     * A hold judged lost with no answer (marked here as a renewal that got
     * none marks it) is still counted by the server. Its unlock releases
     * what is left there before it says the hold was lost, and the thread's
     * next lock is a fresh hold with a new fence, not a reentry of the lost one.
     */
    @ParameterizedTest
    @FieldSource("drivers")
    void aHoldLostUnansweredIsReleasedWhenItsHolderLetsGo(String driver) throws Exception {
        Padlock p = pad(driver);
        PadlockLock lock = p.getLock("leftover");
        lock.lock();
        long old = lock.fence();
        SharedHold h = p.existing(lock.kind, lock.holder());
        lose(h, false);
        assertEquals("1", info("leftover", "count"), "still counted by the server");
        assertThrows(LockLostException.class, lock::unlock);
        assertEquals(null, info("leftover", "count"), "released when its holder let go");
        lock.lock();
        assertTrue(lock.fence() > old, "a fresh hold, not a reentry");
        lock.unlock();
        assertEquals(null, info("leftover", "count"));
    }

    /** Marks {@code h} lost as its watcher would ({@code sure}: the server said so; else no answer came). */
    static void lose(SharedHold h, boolean sure) {
        h.io.lock();
        try {
            h.lose("lost (test)", sure);
        } finally {
            h.io.unlock();
        }
    }

    /**
     * A lost hold stays registered until its holder hears of it, but holders
     * that never come back (a virtual thread's) cannot pile them up: past the
     * bound the oldest is forgotten, and its holder hears "not held".
     */
    @Test
    void lostHoldsStayRegisteredWithinABound() {
        Padlock p = pad("jedis");
        p.maxLost = 3;
        PadlockLock lock = p.getLock("bounded");
        for (int i = 0; i < 5; i++) {
            lose(p.hold(lock.kind, "gone-" + i, 1000), true);
        }
        assertNull(p.existing(lock.kind, "gone-0"), "the oldest forgotten");
        assertNull(p.existing(lock.kind, "gone-1"));
        for (int i = 2; i < 5; i++) {
            assertTrue(p.existing(lock.kind, "gone-" + i).lost(), "the newest still told");
        }
    }

    /**
     * A {@code KEEP} acquire whose reply was lost is resent with its id and
     * answered from the server's memory of the first sending, which bound the
     * lease to the connection that closed: it is bound again on the new one,
     * so the hold outlives its ttl. (A wait answered so is the storm's to
     * find: {@link StormTest}.)
     */
    @ParameterizedTest
    @FieldSource("drivers")
    void aKeptLeaseAnsweredToAResendIsBoundAgain(String driver) throws Exception {
        try (Proxy proxy = new Proxy(srv.port())) {
            Padlock p = clients.standalone(driver, proxy.port(), Duration.ofMillis(600));
            PadlockLock lock = p.getLock("kept");
            proxy.loseNextReply();
            lock.lock();
            Thread.sleep(1500); // the first connection's binding would have run out
            assertEquals("1", info("kept", "keep"), "bound on the new connection");
            assertTrue(lock.isHeldByCurrentThread());
            lock.unlock();
        }
    }

    @ParameterizedTest
    @FieldSource("drivers")
    void multiLocksAreAllOrNothing(String driver) throws Exception {
        Padlock p = pad(driver);
        PadlockLock b = p.getLock("b").withHolder("other");
        b.lock();
        PadlockMultiLock ab = p.getMultiLock("a", "b");
        assertFalse(ab.tryLock());
        assertEquals(null, info("a", "holder"), "a untouched");
        b.unlock();
        assertTrue(ab.tryLock(1, TimeUnit.SECONDS));
        assertEquals(2, ab.fences().size());
        assertEquals(ab.holder(), info("a", "holder"));
        assertEquals(ab.holder(), info("b", "holder"));
        ab.unlock();
        assertEquals(null, info("a", "holder"));
        assertEquals(null, info("b", "holder"));
        assertThrows(IllegalArgumentException.class, () -> p.getMultiLock("a", "a"));
    }

    @ParameterizedTest
    @FieldSource("drivers")
    void holdsCloseWithTryWithResources(String driver) throws Exception {
        Padlock p = pad(driver);
        PadlockLock lock = p.getLock("twr");
        try (LockBase.Held h = lock.hold()) {
            assertTrue(h.isHeld());
            h.check();
            assertNotNull(info("twr", "holder"));
        }
        assertEquals(null, info("twr", "holder"));
        Lock asLock = lock;
        assertTrue(asLock.tryLock());
        asLock.unlock();
    }
}
