package io.padlock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.FieldSource;

/** Read-write locks and semaphores, through Jedis and Lettuce. */
class KindsTest extends OnServer {

    @ParameterizedTest
    @FieldSource("drivers")
    void readersShareWritersAreAloneAndAReaderMayUpgrade(String driver) throws Exception {
        Padlock p = clients.standalone(driver, srv.port());
        PadlockReadWriteLock mine = p.getReadWriteLock("doc");
        PadlockReadWriteLock other = p.getReadWriteLock("doc").withHolder("other");
        assertTrue(mine.readLock().tryLock());
        assertTrue(other.readLock().tryLock(), "readers share");
        assertFalse(mine.writeLock().tryLock(), "no upgrade while another reads");
        other.readLock().unlock();
        assertTrue(mine.writeLock().tryLock(1, TimeUnit.SECONDS), "the only reader upgrades");
        assertEquals(1, mine.getReadHoldCount());
        assertEquals(1, mine.getWriteHoldCount());
        assertTrue(mine.isWriteLockedByCurrentThread());
        assertFalse(other.readLock().tryLock(), "a writer is alone");
        long fence = mine.fence();
        // downgrade: release the write hold, keep reading
        mine.writeLock().unlock();
        assertEquals(fence, mine.fence());
        assertTrue(other.readLock().tryLock());
        other.readLock().unlock();
        assertThrows(IllegalMonitorStateException.class, mine.writeLock()::unlock);
        mine.readLock().unlock();
        assertEquals(null, srv.raw("RWLOCK.INFO", "doc"));
    }

    @ParameterizedTest
    @FieldSource("drivers")
    void aWriterWaitsForReadersInOrder(String driver) throws Exception {
        Padlock p = clients.standalone(driver, srv.port());
        PadlockReadWriteLock reader = p.getReadWriteLock("queue").withHolder("reader");
        reader.readLock().lock();
        CompletableFuture<Boolean> writer = CompletableFuture.supplyAsync(() -> {
            try {
                PadlockReadWriteLock w = p.getReadWriteLock("queue").withHolder("writer");
                boolean ok = w.writeLock().tryLock(5, TimeUnit.SECONDS);
                w.writeLock().unlock();
                return ok;
            } catch (InterruptedException e) {
                return false;
            }
        });
        Thread.sleep(200);
        assertFalse(p.getReadWriteLock("queue").withHolder("late").readLock().tryLock(),
                "a reader arriving after a queued writer does not overtake it");
        reader.readLock().unlock();
        assertTrue(writer.get(5, TimeUnit.SECONDS));
    }

    @ParameterizedTest
    @FieldSource("drivers")
    void semaphorePermits(String driver) throws Exception {
        Padlock p = clients.standalone(driver, srv.port());
        PadlockSemaphore sem = p.getSemaphore("pool", 3);
        assertEquals(3, sem.availablePermits());
        sem.acquire(2);
        assertEquals(2, sem.heldPermits());
        assertEquals(1, sem.availablePermits());
        PadlockSemaphore other = p.getSemaphore("pool", 3).withHolder("other");
        assertFalse(other.tryAcquire(2), "not enough free");
        assertTrue(other.tryAcquire(1));
        assertFalse(other.tryAcquire(1, 200, TimeUnit.MILLISECONDS));
        // any thread of the process gives back the process's permits
        CompletableFuture.runAsync(() -> sem.release(1)).get();
        assertEquals(1, sem.heldPermits());
        assertTrue(other.tryAcquire(1, 1, TimeUnit.SECONDS));
        assertThrows(IllegalMonitorStateException.class, () -> sem.release(2));
        assertThrows(IllegalArgumentException.class, () -> sem.tryAcquire(4));
        sem.release(1);
        other.release(2);
        assertEquals(null, srv.raw("SEM.INFO", "pool"));
    }

    @ParameterizedTest
    @FieldSource("drivers")
    void aSemaphoreWaiterIsServedWhenPermitsReturn(String driver) throws Exception {
        Padlock p = clients.standalone(driver, srv.port());
        PadlockSemaphore a = p.getSemaphore("slots", 2).withHolder("a");
        a.acquire(2);
        CompletableFuture<Integer> b = CompletableFuture.supplyAsync(() -> {
            PadlockSemaphore s = p.getSemaphore("slots", 2).withHolder("b");
            s.acquireUninterruptibly(1);
            int held = s.heldPermits();
            s.release(1);
            return held;
        });
        Thread.sleep(200);
        assertFalse(b.isDone());
        a.release(1);
        assertEquals(1, b.get(5, TimeUnit.SECONDS));
        a.release(1);
    }

    /**
     * The process's own holder (the default) shared by threads, as
     * {@code java.util.concurrent.Semaphore}: a thread waits for permits
     * another thread of the process holds (the server would see a holder
     * waiting for itself) until that thread gives them back.
     */
    @ParameterizedTest
    @FieldSource("drivers")
    void threadsOfOneProcessWaitForEachOthersPermits(String driver) throws Exception {
        Padlock p = clients.standalone(driver, srv.port());
        PadlockSemaphore s = p.getSemaphore("shared", 1);
        s.acquire();
        assertFalse(CompletableFuture.supplyAsync(() -> {
            try {
                return s.tryAcquire(200, TimeUnit.MILLISECONDS);
            } catch (InterruptedException e) {
                throw new IllegalStateException(e);
            }
        }).get(5, TimeUnit.SECONDS), "not within its time: false, not DEADLOCK");
        CompletableFuture<Boolean> other = CompletableFuture.supplyAsync(() -> {
            try {
                return s.tryAcquire(5, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                throw new IllegalStateException(e);
            }
        });
        Thread.sleep(200);
        assertFalse(other.isDone());
        s.release();
        assertTrue(other.get(5, TimeUnit.SECONDS), "granted once the other thread gave its permit back");
        CompletableFuture<Boolean> later = s.acquireAsync(1);
        Thread.sleep(200);
        assertFalse(later.isDone(), "the future waits too, no DEADLOCK");
        s.release();
        assertTrue(later.get(5, TimeUnit.SECONDS));
        s.release();
        assertEquals(1, s.availablePermits());
    }

    /**
     * Two threads of the shared holder waiting while other processes hold
     * every permit, and another holder queued between them: the server
     * sees one wait of the shared holder at a time (the second waits in
     * the process), so nobody is told {@code DEADLOCK} and all are served
     * as permits come back. Sent together, the later wait of the shared
     * holder queued behind the other holder, queued behind the first: the
     * holder waited for itself, and one of them was told {@code DEADLOCK}.
     * A wait cancelled in line lets the next one go only after the head.
     */
    @ParameterizedTest
    @FieldSource("drivers")
    void aSharedHoldersWaitsReachTheServerOneAtATime(String driver) throws Exception {
        Padlock p = clients.standalone(driver, srv.port());
        srv.raw("SEM.ACQUIRE", "pool", "x1", "2", "10000");
        srv.raw("SEM.ACQUIRE", "pool", "x2", "2", "10000");
        PadlockSemaphore shared = p.getSemaphore("pool", 2);
        PadlockSemaphore mine = p.getSemaphore("pool", 2).withHolder("mine");
        CompletableFuture<Boolean> first = CompletableFuture.supplyAsync(() -> take(shared));
        MailboxTest.until(() -> waiters("pool") == 1, 5000);
        CompletableFuture<Boolean> between = CompletableFuture.supplyAsync(() -> take(mine));
        MailboxTest.until(() -> waiters("pool") == 2, 5000);
        CompletableFuture<Boolean> gone = shared.acquireAsync(1);
        CompletableFuture<Boolean> second = CompletableFuture.supplyAsync(() -> take(shared));
        CompletableFuture<Boolean> third = shared.acquireAsync(1);
        Thread.sleep(300);
        // One that gives up in line lets the next go only after the head.
        gone.cancel(true);
        Thread.sleep(300);
        assertFalse(second.isDone() || third.isDone(), "waiting, not told DEADLOCK");
        assertEquals(2, waiters("pool"), "the server sees one wait of the shared holder");
        srv.raw("SEM.RELEASE", "pool", "x1");
        srv.raw("SEM.RELEASE", "pool", "x2");
        assertTrue(first.get(5, TimeUnit.SECONDS) && between.get(5, TimeUnit.SECONDS));
        shared.release();
        mine.release();
        assertTrue(second.get(5, TimeUnit.SECONDS) && third.get(5, TimeUnit.SECONDS));
        assertEquals(2, shared.heldPermits());
        shared.release(2);
        assertEquals(2, shared.availablePermits());
        assertEquals(0, p.lines.size(), "no line is kept once its waits ended");
    }

    private static boolean take(PadlockSemaphore s) {
        try {
            return s.tryAcquire(10, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            throw new IllegalStateException(e);
        }
    }

    private static long waiters(String key) {
        return Long.parseLong(LockTest.info("SEM.INFO", key, "waiters"));
    }

    @ParameterizedTest
    @FieldSource("drivers")
    void topListsTheKeysWithTheMostWaiters(String driver) throws Exception {
        Padlock p = clients.standalone(driver, srv.port());
        PadlockLock owner = p.getLock("hot").withHolder("owner");
        owner.lock();
        List<CompletableFuture<Boolean>> waits = List.of("w1", "w2").stream()
                .map(h -> CompletableFuture.supplyAsync(() -> {
                    try {
                        PadlockLock l = p.getLock("hot").withHolder(h);
                        boolean got = l.tryLock(10, TimeUnit.SECONDS);
                        if (got) {
                            l.unlock();
                        }
                        return got;
                    } catch (InterruptedException e) {
                        return false;
                    }
                }))
                .toList();
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while (System.nanoTime() < end && (p.top(10).isEmpty() || p.top(10).get(0).waiters() < 2)) {
            Thread.sleep(10);
        }
        List<Hot> rows = p.top(10);
        assertEquals(1, rows.size());
        Hot hot = rows.get(0);
        assertEquals(List.of("hot", "lock", 2L, 1L), List.of(hot.key(), hot.kind(), hot.waiters(), hot.holders()));
        assertTrue(hot.oldestWaitMs() >= 0);
        assertThrows(IllegalArgumentException.class, () -> p.top(0));
        owner.unlock();
        for (CompletableFuture<Boolean> w : waits) {
            assertTrue(w.get(10, TimeUnit.SECONDS));
        }
        assertTrue(p.top(10).isEmpty());
    }
}
