package io.padlock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.FieldSource;

/**
 * A caller waiting when its key's slot starts to move (an atomic slot
 * migration: Redis 8.4+ or Valkey 9+, named by PADLOCK_ASM_SERVER) is told
 * to wait again, follows the slot to its new owner (MOVED), queues there and
 * is granted there.
 */
class MigrationTest {
    static final String ASM = System.getenv("PADLOCK_ASM_SERVER");
    static Servers cluster;
    static final List<String> drivers = Clients.DRIVERS;

    @BeforeAll
    static void start() throws Exception {
        Assumptions.assumeTrue(ASM != null, "PADLOCK_ASM_SERVER is not set");
        cluster = Servers.cluster(ASM);
    }

    @AfterAll
    static void stop() {
        if (cluster != null) {
            cluster.close();
        }
    }

    static void until(String what, long seconds, BooleanSupplier ok) throws InterruptedException {
        MailboxTest.until(ok, TimeUnit.SECONDS.toMillis(seconds));
        assertTrue(ok.getAsBoolean(), "not within " + seconds + " s: " + what);
    }

    static int owner(String key) {
        int slot = Slots.of(key);
        return slot <= 5460 ? 0 : slot <= 10922 ? 1 : 2;
    }

    static String quiet(int node, String... args) {
        try {
            return cluster.cmd(node, args);
        } catch (Exception e) {
            return "";
        }
    }

    static int waiters(int node, String key) {
        List<String> info = List.of(quiet(node, "LOCK.INFO", key).split(" "));
        int at = info.indexOf("waiters");
        return at < 0 ? 0 : Integer.parseInt(info.get(at + 1));
    }

    /** Moves {@code key}'s slot from node {@code src} to {@code dst} atomically, and waits until it moved. */
    static void migrate(int src, int dst, String key) throws Exception {
        String slot = Integer.toString(Slots.of(key));
        if (cluster.cmd(src, "INFO", "server").contains("valkey_version")) {
            String id = cluster.cmd(dst, "CLUSTER", "MYID");
            cluster.cmd(src, "CLUSTER", "MIGRATESLOTS", "SLOTSRANGE", slot, slot, "NODE", id);
        } else {
            cluster.cmd(dst, "CLUSTER", "MIGRATION", "IMPORT", slot, slot);
        }
        until("the slot moved", 30, () -> quiet(dst, "EXISTS", key).equals("1")
                && quiet(src, "DBSIZE").equals("0"));
    }

    @ParameterizedTest
    @FieldSource("drivers")
    void aWaitFollowsTheSlotToItsNewOwner(String driver) throws Exception {
        String key = "{asm-java-" + driver + "}k";
        int src = owner(key);
        int dst = (src + 1) % 3;
        cluster.cmd(src, "LOCK.ACQUIRE", key, "a", "60000");
        try (Clients clients = new Clients()) {
            Padlock p = clients.cluster(driver, cluster.ports);
            PadlockLock lock = p.getLock(key);
            CompletableFuture<Boolean> got = CompletableFuture.supplyAsync(() -> {
                try {
                    boolean held = lock.tryLock(25, TimeUnit.SECONDS);
                    if (held) {
                        lock.unlock();
                    }
                    return held;
                } catch (InterruptedException e) {
                    throw new IllegalStateException(e);
                }
            });
            until("the caller waits on the source", 10, () -> waiters(src, key) == 1);
            migrate(src, dst, key);
            until("the caller queued on the new owner", 10, () -> waiters(dst, key) == 1);
            cluster.cmd(dst, "LOCK.RELEASE", key, "a");
            assertTrue(got.get(20, TimeUnit.SECONDS), "granted on the new owner");
            assertEquals("0", cluster.cmd(dst, "EXISTS", key), "and released there");
        }
    }

    @ParameterizedTest
    @FieldSource("drivers")
    void aHoldsRenewalAndReleaseFollowTheSlot(String driver) throws Exception {
        String key = "{asm-java-hold-" + driver + "}k";
        int src = owner(key);
        int dst = (src + 1) % 3;
        try (Clients clients = new Clients()) {
            Padlock p = clients.cluster(driver, cluster.ports);
            PadlockLock lock = p.getLock(key);
            // A plain lease: nothing binds it to a connection, so the move
            // does not end it.
            lock.lock(60, TimeUnit.SECONDS);
            migrate(src, dst, key);
            assertTrue(lock.isHeldByCurrentThread());
            assertTrue(lock.renew(Duration.ofSeconds(30)), "renewed on the new owner");
            long pttl = Long.parseLong(cluster.cmd(dst, "PTTL", key));
            assertTrue(pttl > 0 && pttl <= 30_000, "the new owner's lease was renewed: " + pttl);
            lock.unlockAsync().get(10, TimeUnit.SECONDS); // Lettuce's: on its own futures
            assertEquals("0", cluster.cmd(dst, "EXISTS", key), "released on the new owner");
        }
    }
}
