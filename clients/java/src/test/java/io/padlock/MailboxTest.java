package io.padlock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.FieldSource;
import redis.clients.jedis.Connection;
import redis.clients.jedis.RedisClient;

/**
 * Issue 39 on the JVM: every hold and wait of a Padlock shares two
 * connections of padlock's own (the keeper and the mailbox reader), none
 * borrowed from the application's pool, and losses are mailed.
 */
class MailboxTest extends OnServer {

    static int connections() {
        return Servers.text(srv.raw("CLIENT", "LIST")).trim().split("\n").length;
    }

    static String waiters(String key) {
        return LockTest.info(key, "waiters");
    }

    static void until(java.util.function.BooleanSupplier pred, long ms) throws InterruptedException {
        long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(ms);
        while (!pred.getAsBoolean() && System.nanoTime() < end) {
            Thread.sleep(5);
        }
    }

    /** Jedis with its default pool (8): a thousand holds and a thousand waiters, two connections. */
    @Test
    void jedisWithItsDefaultPoolRunsAThousandHoldsAndAThousandWaiters() throws Exception {
        try (RedisClient jedis = RedisClient.create("127.0.0.1", srv.port());
                Padlock p = Padlock.jedis(jedis)) {
            int before = connections();
            List<PadlockLock> holds = new ArrayList<>();
            for (int i = 0; i < 1000; i++) {
                PadlockLock l = p.getLock("many:" + i);
                assertTrue(l.tryLock());
                holds.add(l);
            }
            PadlockLock owner = p.getLock("hot").withHolder("owner");
            owner.lock();
            ConcurrentLinkedQueue<Integer> order = new ConcurrentLinkedQueue<>();
            CountDownLatch done = new CountDownLatch(1000);
            List<Thread> threads = new ArrayList<>();
            for (int i = 0; i < 1000; i++) {
                int n = i;
                Thread t = new Thread(() -> {
                    PadlockLock l = p.getLock("hot");
                    l.lock();
                    order.add(n);
                    l.unlock();
                    done.countDown();
                });
                t.setDaemon(true);
                t.start();
                threads.add(t);
                // Each queued before the next starts: the order is known.
                String want = Integer.toString(i + 1);
                until(() -> want.equals(waiters("hot")), 10_000);
                assertEquals(want, waiters("hot"), "queued in the order they came");
            }
            assertTrue(connections() - before <= 2, (connections() - before) + " connections of padlock's own");
            // The application's own pool is all its own: 8 at once, none waiting.
            List<Connection> mine = new ArrayList<>();
            for (int i = 0; i < 8; i++) {
                mine.add(jedis.getPool().getResource());
            }
            mine.forEach(Connection::close);
            owner.unlock();
            assertTrue(done.await(60, TimeUnit.SECONDS), "every waiter served");
            List<Integer> expected = new ArrayList<>();
            for (int i = 0; i < 1000; i++) {
                expected.add(i);
            }
            assertEquals(expected, new ArrayList<>(order), "in FIFO order");
            for (PadlockLock l : holds) {
                assertTrue(l.isHeldByCurrentThread());
                l.unlock();
            }
            assertEquals(0L, ((Number) srv.raw("DBSIZE")).longValue() - mailboxes());
        }
    }

    static long mailboxes() {
        return ((List<?>) srv.raw("KEYS", "padlock:mailbox:*")).size();
    }

    /** tryLock(t) answers in t and a little, whatever the application's pool does. */
    @Test
    void tryLockWithATimeAnswersInTimeWithThePoolExhausted() throws Exception {
        try (RedisClient jedis = RedisClient.create("127.0.0.1", srv.port());
                Padlock p = Padlock.jedis(jedis)) {
            p.getLock("busy").withHolder("other").lock();
            List<Connection> all = new ArrayList<>();
            for (int i = 0; i < 8; i++) {
                all.add(jedis.getPool().getResource());
            }
            try {
                long t0 = System.nanoTime();
                assertFalse(p.getLock("busy").tryLock(300, TimeUnit.MILLISECONDS));
                long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
                assertTrue(ms >= 290 && ms < 1000, ms + " ms");
                assertTrue(p.getLock("free").tryLock(300, TimeUnit.MILLISECONDS), "granted on padlock's own");
                p.getLock("free").unlock();
            } finally {
                all.forEach(Connection::close);
            }
        }
    }

    static long padlockConnections() {
        return Servers.text(srv.raw("CLIENT", "LIST")).lines().filter(l -> l.contains(" name=padlock ")).count();
    }

    /**
     * close() ends padlock's connections then, not when a blocking read
     * times out (Jedis: its reads ignore interrupts; Lettuce reads on its
     * own threads and names no connection of padlock's).
     */
    @Test
    void closingAPadlockClosesItsConnectionsAtOnce() throws Exception {
        try (Clients mine = new Clients()) {
            Padlock p = mine.standalone("jedis", srv.port());
            PadlockLock l = p.getLock("closing");
            l.lock();
            until(() -> padlockConnections() == 2, 3000);
            assertEquals(2, padlockConnections(), "the keeper and the mailbox reader");
            Thread.sleep(100); // the reader is inside its BLMPOP
            p.close();
            long closed = System.nanoTime();
            until(() -> padlockConnections() == 0, 3000);
            long took = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - closed);
            assertEquals(0, padlockConnections());
            assertTrue(took < 300, "gone " + took + " ms after close (the read polls every 1,000)");
        }
    }

    @ParameterizedTest
    @FieldSource("drivers")
    void aDeletedHoldIsReportedWithinMilliseconds(String driver) throws Exception {
        Padlock p = clients.standalone(driver, srv.port());
        AtomicLong lostAt = new AtomicLong();
        PadlockLock l = p.getLock("gone");
        l.onLost(() -> lostAt.set(System.nanoTime()));
        l.lock();
        Thread.sleep(200); // its first round binds its mailbox
        long deleted = System.nanoTime();
        srv.raw("DEL", "gone");
        until(() -> lostAt.get() != 0, 3000);
        assertTrue(lostAt.get() != 0, "reported");
        assertTrue(lostAt.get() - deleted < TimeUnit.SECONDS.toNanos(1), "within a second (ttl 30 s)");
        assertFalse(l.isHeldByCurrentThread());
    }

    @ParameterizedTest
    @FieldSource("drivers")
    void keptHoldsAreWatchedByOnePing(String driver) throws Exception {
        Padlock p = clients.standalone(driver, srv.port(), java.time.Duration.ofMillis(600));
        List<PadlockLock> holds = new ArrayList<>();
        for (int i = 0; i < 100; i++) {
            PadlockLock l = p.getLock("kept:" + i);
            l.lock();
            holds.add(l);
        }
        // Bound with the mailbox at once; a hold whose round came before the
        // new mailbox reader's first read binds once more.
        Thread.sleep(1500);
        srv.raw("CONFIG", "RESETSTAT");
        Thread.sleep(1500);
        String stats = Servers.text(srv.raw("INFO", "commandstats"));
        assertFalse(stats.contains("cmdstat_lock.extend"), stats);
        assertFalse(stats.contains("cmdstat_lock.info"), stats);
        assertTrue(stats.contains("cmdstat_ping"), stats);
        for (PadlockLock l : holds) {
            assertTrue(l.isHeldByCurrentThread());
            l.unlock();
        }
    }

    /** Issue 46: the interrupt and the grant in both orders: the waiter holds (and knows it) or leaves nothing. */
    @ParameterizedTest
    @FieldSource("drivers")
    void anInterruptThatRacesTheGrantNeverLeavesAHold(String driver) throws Exception {
        Padlock p = clients.standalone(driver, srv.port());
        for (int i = 0; i < 10; i++) {
            PadlockLock owner = p.getLock("race").withHolder("owner");
            owner.lock();
            java.util.concurrent.atomic.AtomicBoolean got = new java.util.concurrent.atomic.AtomicBoolean();
            Thread t = new Thread(() -> {
                PadlockLock l = p.getLock("race");
                try {
                    l.lockInterruptibly();
                    got.set(true);
                    l.unlock();
                } catch (InterruptedException e) {
                    // not acquired: nothing may be held
                }
            });
            t.start();
            until(() -> "1".equals(waiters("race")), 5000);
            if (i % 2 == 1) {
                owner.unlock();
                t.interrupt();
            } else {
                t.interrupt();
                owner.unlock();
            }
            t.join(10_000);
            assertFalse(t.isAlive());
            assertEquals(null, LockTest.info("race", "holder"), "round " + i + (got.get() ? " (granted)" : ""));
        }
    }

    /** Issue 46: a lost-hold listener that throws goes to the uncaught-exception handler; the others are still watched. */
    @Test
    void aThrowingListenerIsReportedAndTheWatchingGoesOn() throws Exception {
        Thread.UncaughtExceptionHandler before = Thread.getDefaultUncaughtExceptionHandler();
        java.util.concurrent.atomic.AtomicReference<Throwable> seen = new java.util.concurrent.atomic.AtomicReference<>();
        Thread.setDefaultUncaughtExceptionHandler((t, e) -> seen.set(e));
        try {
            Padlock p = clients.standalone("jedis", srv.port(), java.time.Duration.ofMillis(600));
            PadlockLock kept = p.getLock("kept-thrower");
            kept.lock();
            PadlockLock lost = p.getLock("thrower");
            lost.onLost(() -> {
                throw new IllegalStateException("handler failed");
            });
            lost.lock();
            srv.raw("DEL", "thrower");
            until(() -> seen.get() != null, 5000);
            assertTrue(seen.get() instanceof IllegalStateException, "reported: " + seen.get());
            Thread.sleep(1000);
            assertTrue(kept.isHeldByCurrentThread(), "the other hold is still watched");
            assertEquals("1", LockTest.info("kept-thrower", "keep"));
            kept.unlock();
        } finally {
            Thread.setDefaultUncaughtExceptionHandler(before);
        }
    }
}
