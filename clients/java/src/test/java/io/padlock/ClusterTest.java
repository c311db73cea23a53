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

    /** padlock's connections to node {@code i} (named so). */
    static int padlockConnections(int i) throws Exception {
        String list = cluster.cmd(i, "CLIENT", "LIST");
        return list.split(" name=padlock ", -1).length - 1;
    }

    /** Padlock's connections on node {@code i} as CLIENT LIST shows them. */
    static String padlockClients(int i) throws Exception {
        return java.util.Arrays.stream(cluster.cmd(i, "CLIENT", "LIST").split("\n"))
                .filter(l -> l.contains(" name=padlock "))
                .collect(java.util.stream.Collectors.joining("; "));
    }

    /** Kills padlock's tracking connections (flag t) on every node; how many. */
    static int killTrackers() throws Exception {
        int killed = 0;
        for (int i = 0; i < 3; i++) {
            for (String line : cluster.cmd(i, "CLIENT", "LIST").split("\n")) {
                java.util.Map<String, String> f = new java.util.HashMap<>();
                for (String kv : line.trim().split(" ")) {
                    int at = kv.indexOf('=');
                    if (at > 0) {
                        f.put(kv.substring(0, at), kv.substring(at + 1));
                    }
                }
                if ("padlock".equals(f.get("name")) && f.getOrDefault("flags", "").contains("t")) {
                    cluster.cmd(i, "CLIENT", "KILL", "ID", f.get("id"));
                    killed++;
                }
            }
        }
        return killed;
    }

    static int waiters(String key) throws Exception {
        int node = nodesHolding(key).iterator().next();
        List<String> info = List.of(cluster.cmd(node, "LOCK.INFO", key).split(" "));
        return Integer.parseInt(info.get(info.indexOf("waiters") + 1));
    }

    /**
     * Issue 39 in a cluster: waits on keys of many slots on three
     * masters go through a mailbox per slot, heard of through tracking: two
     * connections of padlock's per node however many wait; a loss is mailed.
     */
    @ParameterizedTest
    @FieldSource("drivers")
    void clusterWaitsShareTwoConnectionsPerNode(String driver) throws Exception {
        // An earlier test's connections are gone first (closed sockets leave
        // the server's list a moment later, more on a busy machine).
        for (int i = 0; i < 3; i++) {
            for (int t = 0; t < 750 && padlockConnections(i) > 0; t++) {
                Thread.sleep(20);
            }
        }
        try (Clients clients = new Clients()) {
            Padlock p = clients.cluster(driver, cluster.ports);
            List<String> keys = new java.util.ArrayList<>();
            for (int i = 0; i < 15; i++) {
                keys.add("cmail:" + driver + ":" + i);
            }
            List<PadlockLock> held = new java.util.ArrayList<>();
            for (String k : keys) {
                PadlockLock l = p.getLock(k);
                l.lock();
                held.add(l);
            }
            java.util.concurrent.ExecutorService pool = java.util.concurrent.Executors.newFixedThreadPool(60);
            List<java.util.concurrent.Future<Boolean>> waits = new java.util.ArrayList<>();
            for (int i = 0; i < 60; i++) {
                String k = keys.get(i % keys.size());
                waits.add(pool.submit(() -> {
                    PadlockLock l = p.getLock(k);
                    if (!l.tryLock(30, TimeUnit.SECONDS)) {
                        return false;
                    }
                    l.unlock();
                    return true;
                }));
            }
            long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(15);
            int queued = 0;
            while (System.nanoTime() < end) {
                queued = 0;
                for (String k : keys) {
                    queued += waiters(k);
                }
                if (queued == 60) {
                    break;
                }
                Thread.sleep(20);
            }
            assertEquals(60, queued, "every wait queued");
            int total = 0;
            for (int i = 0; i < 3; i++) {
                int n = padlockConnections(i);
                assertTrue(n <= 2, "node " + i + ": " + n + " connections of padlock's for 60 waits: "
                        + padlockClients(i));
                total += n;
            }
            assertTrue(total >= 3, "a keeper on every node at least");
            // A wait that times out hears so through its slot's mailbox.
            assertFalse(CompletableFuture.supplyAsync(() -> {
                try {
                    return p.getLock(keys.get(3)).tryLock(200, TimeUnit.MILLISECONDS);
                } catch (InterruptedException e) {
                    throw new IllegalStateException(e);
                }
            }).get());
            // Every tracking connection killed while the waits are queued:
            // they are sent again with their ids, the mailboxes swept anew.
            assertEquals(3, killTrackers(), "a tracking connection per master");
            // A loss, mailed: far sooner than a round would find it.
            String lost = keys.get(0);
            cluster.cmd(nodesHolding(lost).iterator().next(), "DEL", lost);
            PadlockLock first = held.get(0);
            long t0 = System.nanoTime();
            while (!first.isLost() && System.nanoTime() - t0 < TimeUnit.MILLISECONDS.toNanos(1500)) {
                Thread.sleep(10);
            }
            assertTrue(first.isLost(), "the loss was heard");
            for (PadlockLock l : held.subList(1, held.size())) {
                l.unlock();
            }
            for (java.util.concurrent.Future<Boolean> w : waits) {
                assertTrue(w.get(30, TimeUnit.SECONDS), "every wait granted through its slot's mailbox");
            }
            pool.shutdown();
            for (int i = 0; i < 3; i++) {
                assertTrue(padlockConnections(i) <= 2);
            }
        }
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
