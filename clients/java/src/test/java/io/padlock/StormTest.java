package io.padlock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.FieldSource;

/**
 * Holds and waits of many threads while the server kills the Padlock's
 * connections at random (the keeper with the holds bound to it and the
 * waits queued on it, the mailbox reader, the driver's own): a grant is
 * answered only while {@code isHeld} confirms it, at most a key's limit
 * say held at once, fences rise in the order the holds began, and nothing
 * is left held or queued at the end. Some sections outlive the ttl, held
 * only through the client binding the lease again after each kill.
 */
class StormTest extends OnServer {
    static final long TTL = 500;
    static final int LIMIT = 2;
    static final double SECONDS = Double.parseDouble(System.getenv().getOrDefault("PADLOCK_STORM_SECONDS", "5"));

    static int cap(String key) {
        return key.equals("s") ? LIMIT : 1;
    }

    /** The ids of the server's normal connections but the one asking. */
    static List<String> others() {
        List<String> ids = new ArrayList<>();
        for (String line : Servers.text(srv.raw("CLIENT", "LIST", "TYPE", "normal")).split("\n")) {
            if (line.contains("cmd=client|list")) {
                continue;
            }
            for (String f : line.trim().split(" ")) {
                if (f.startsWith("id=")) {
                    ids.add(f.substring(3));
                }
            }
        }
        return ids;
    }

    @ParameterizedTest
    @FieldSource("drivers")
    void threadsThroughAStormOfKilledConnections(String driver) throws Exception {
        Padlock p = clients.standalone(driver, srv.port(), Duration.ofMillis(TTL));
        List<String> problems = new ArrayList<>();
        Map<String, Set<Integer>> inside = new HashMap<>(Map.of("a", new HashSet<>(), "b", new HashSet<>(), "s", new HashSet<>()));
        Map<String, Long> lastFence = new HashMap<>(Map.of("a", 0L, "b", 0L));
        List<Map.Entry<String, Set<Integer>>> crowds = new ArrayList<>();
        Map<Integer, Boolean> heldAtEnd = new HashMap<>();
        AtomicInteger kills = new AtomicInteger();
        AtomicInteger late = new AtomicInteger();
        int[] sections = {0};
        long end = System.nanoTime() + (long) (SECONDS * 1e9);

        Thread killer = new Thread(() -> {
            Random rng = new Random(7);
            while (System.nanoTime() < end) {
                try {
                    Thread.sleep(20 + rng.nextInt(100));
                } catch (InterruptedException e) {
                    return;
                }
                List<String> ids = others();
                if (!ids.isEmpty()) {
                    try {
                        srv.raw("CLIENT", "KILL", "ID", ids.get(rng.nextInt(ids.size())));
                        kills.incrementAndGet();
                    } catch (RuntimeException e) {
                        // gone meanwhile
                    }
                }
            }
        });
        List<Thread> workers = new ArrayList<>();
        for (int n = 0; n < 6; n++) {
            Random rng = new Random(100 + n);
            // Half the threads take the process's permits (the default
            // holder, one count for all its threads), half their own.
            String me = n % 2 == 0 ? null : "t" + n;
            workers.add(new Thread(() -> {
                while (System.nanoTime() < end) {
                    String key = List.of("a", "b", "s").get(rng.nextInt(3));
                    PadlockLock lock = key.equals("s") ? null : p.getLock(key);
                    PadlockSemaphore sem = key.equals("s") ? (me == null ? p.getSemaphore(key, LIMIT) : p.getSemaphore(key, LIMIT).withHolder(me)) : null;
                    boolean got;
                    try {
                        got = lock != null ? lock.tryLock(10, TimeUnit.SECONDS) : sem.tryAcquire(10, TimeUnit.SECONDS);
                    } catch (LinkException e) {
                        // A wait leaves the queue with its connection and
                        // queues again at the back: under kills every few
                        // dozen ms one may not get its turn in time.
                        late.incrementAndGet();
                        continue;
                    } catch (Exception e) {
                        synchronized (problems) {
                            problems.add("acquire " + key + ": " + e);
                        }
                        continue;
                    }
                    if (!got) {
                        late.incrementAndGet();
                        continue;
                    }
                    boolean heldNow = lock != null ? lock.isHeldByCurrentThread() : sem.isHeld();
                    int at;
                    synchronized (problems) {
                        if (!heldNow) {
                            problems.add(key + ": a grant answered that isHeld denies");
                        }
                        if (lock != null) {
                            long fence = lock.fence();
                            if (fence <= lastFence.get(key)) {
                                problems.add(key + ": fence " + fence + " after " + lastFence.get(key));
                            }
                            lastFence.put(key, Math.max(fence, lastFence.get(key)));
                        }
                        at = ++sections[0];
                        inside.get(key).add(at);
                        if (inside.get(key).size() > cap(key)) {
                            crowds.add(Map.entry(key, new HashSet<>(inside.get(key))));
                        }
                    }
                    try {
                        Thread.sleep(rng.nextDouble() < 0.1 ? (long) (TTL * (1.2 + rng.nextDouble() * 0.6)) : rng.nextInt(5));
                    } catch (InterruptedException e) {
                        return;
                    }
                    SharedHold hold = lock != null ? lock.mine() : sem.mine();
                    long known = hold == null ? 0 : hold.leaseUntil - System.nanoTime();
                    boolean still = lock != null ? lock.isHeldByCurrentThread() : sem.isHeld();
                    synchronized (problems) {
                        inside.get(key).remove(at);
                        heldAtEnd.put(at, still);
                    }
                    long releasing = System.nanoTime();
                    try {
                        if (lock != null) {
                            lock.unlock();
                        } else {
                            sem.release();
                        }
                    } catch (RuntimeException e) {
                        // Said held, the server said otherwise: a fault,
                        // unless the release took past the lease the
                        // client knew of (its connection killed meanwhile,
                        // it got through only after the lease ran out).
                        if (still && System.nanoTime() - releasing < known) {
                            synchronized (problems) {
                                problems.add("release " + key + " within " + known / 1_000_000 + " ms of lease: " + e);
                            }
                        }
                    }
                }
            }));
        }
        killer.start();
        workers.forEach(Thread::start);
        for (Thread w : workers) {
            w.join(TimeUnit.SECONDS.toMillis((long) SECONDS + 30));
            assertTrue(!w.isAlive(), "a worker hung");
        }
        killer.join();
        for (Map.Entry<String, Set<Integer>> c : crowds) {
            long still = c.getValue().stream().filter(n -> heldAtEnd.getOrDefault(n, true)).count();
            if (still > cap(c.getKey())) {
                problems.add(c.getKey() + ": " + still + " said held at once");
            }
        }
        assertEquals(List.of(), problems.subList(0, Math.min(10, problems.size())));
        assertTrue(kills.get() > 10, "kills " + kills.get());
        assertTrue(sections[0] > 20, "sections " + sections[0]);
        assertTrue(late.get() * 50 < sections[0], late.get() + " waits of " + sections[0] + " sections ran out of time");
        long lost = heldAtEnd.values().stream().filter(h -> !h).count();
        System.out.println(driver + ": sections " + sections[0] + ", lost " + lost + ", kills " + kills.get() + ", late " + late.get());
        MailboxTest.until(() -> Servers.text(srv.raw("EXISTS", "a", "b", "s")).equals("0")
                && Servers.text(srv.raw("INFO", "padlock")).contains("padlock_mailbox_waiters:0"), 5000);
        assertEquals("0", Servers.text(srv.raw("EXISTS", "a", "b", "s")), "nothing left held");
        assertTrue(Servers.text(srv.raw("INFO", "padlock")).contains("padlock_mailbox_waiters:0"), "nothing left queued");
    }
}
