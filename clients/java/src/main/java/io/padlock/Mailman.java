package io.padlock;

import java.lang.ref.WeakReference;
import java.security.SecureRandom;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

/**
 * One keeper's mailbox and the thread that reads it: a wait queued with
 * {@code MAILBOX} hears its outcome here, and a hold bound with
 * {@code KEEP MAILBOX} its loss ({@code -LOST}). One {@code BLMPOP} at a time
 * (up to {@link #DRAIN} elements each), and between two a {@code PING} on
 * the keeper: that is all the watching of every kept hold costs.
 */
final class Mailman {
    private static final SecureRandom RANDOM = new SecureRandom();
    /** The longest one read waits (ms). */
    static final long POLL_MS = 1000;
    /** How many mailed elements one read takes at most: fewer means it found the mailbox empty. */
    static final int DRAIN = 100;

    private final Padlock pad;
    private final Keeper keeper;
    private final String route;
    final String mailbox;
    private final Map<String, CompletableFuture<String>> slots = new ConcurrentHashMap<>();
    private final Map<String, WeakReference<SharedHold>> watched = new ConcurrentHashMap<>();
    private Thread thread;
    private boolean closed;
    /** Bumped when the mailbox connection failed (the waits are sent again). */
    volatile long epoch;
    /** Half the shortest interval watched: the mailbox is read at least that often. */
    private volatile long pollMs = POLL_MS;
    /** The send time (nanoTime) of the latest read that found the mailbox empty. */
    private volatile long clearAt;
    private volatile boolean cleared;

    Mailman(Padlock pad, Keeper keeper, String route) {
        this.pad = pad;
        this.keeper = keeper;
        this.route = route;
        byte[] b = new byte[16];
        RANDOM.nextBytes(b);
        this.mailbox = "padlock:mailbox:" + HexFormat.of().formatHex(b);
    }

    /**
     * Since when (nanoTime) the holds bound to the keeper with this mailbox are
     * known to live: their binding was there when the keeper last answered,
     * and no loss was posted before the mailbox was last read empty; or
     * {@code Long.MIN_VALUE}.
     */
    long fresh() {
        long k = keeper.aliveAt();
        if (!cleared || k == Long.MIN_VALUE) {
            return Long.MIN_VALUE;
        }
        return clearAt - k < 0 ? clearAt : k;
    }

    CompletableFuture<String> register(String rid) {
        CompletableFuture<String> slot = new CompletableFuture<>();
        slots.put(rid, slot);
        start();
        return slot;
    }

    void forget(String rid) {
        slots.remove(rid);
    }

    void watch(String rid, SharedHold hold, long intervalMs) {
        watched.put(rid, new WeakReference<>(hold));
        pollMs = Math.min(pollMs, Math.max(20, intervalMs / 2));
        start();
    }

    void unwatch(List<String> rids) {
        rids.forEach(watched::remove);
    }

    private synchronized void start() {
        if (closed || (thread != null && thread.isAlive())) {
            return;
        }
        thread = new Thread(this::run, "padlock-mailbox");
        thread.setDaemon(true);
        thread.start();
    }

    synchronized void close() {
        closed = true;
        if (thread != null) {
            thread.interrupt();
        }
    }

    private boolean idle() {
        watched.values().removeIf(r -> r.get() == null);
        return slots.isEmpty() && watched.isEmpty();
    }

    private void run() {
        Link conn = null;
        try {
            while (true) {
                synchronized (this) {
                    if (closed || idle()) {
                        thread = null;
                        return;
                    }
                }
                try {
                    if (conn == null) {
                        conn = pad.driver.dedicated(route);
                    }
                    long poll = pollMs;
                    // Up to DRAIN at a time: fewer means the mailbox is empty
                    // now, so a burst needs no extra read.
                    List<String> command = List.of("BLMPOP", String.format(java.util.Locale.ROOT, "%.3f", poll / 1000.0),
                            "1", mailbox, "LEFT", "COUNT", Integer.toString(DRAIN));
                    long sent;
                    while (true) {
                        sent = System.nanoTime();
                        Object got = conn.call(poll + 5000, command);
                        if (got == null && command.get(0).equals("BLMPOP")) {
                            // Timed out: empty until the server's timeout, which
                            // cannot come before `poll` after the send.
                            sent = Math.min(sent + TimeUnit.MILLISECONDS.toNanos(poll), System.nanoTime());
                        }
                        List<?> elements = got == null ? List.of() : Replies.asList(Replies.asList(got).get(1));
                        elements.forEach(e -> deliver(String.valueOf(e)));
                        if (elements.size() < DRAIN) {
                            break;
                        }
                        command = List.of("LMPOP", "1", mailbox, "LEFT", "COUNT", Integer.toString(DRAIN));
                    }
                    clearAt = sent;
                    cleared = true;
                    if (!keeper.aliveSince(System.nanoTime() - TimeUnit.MILLISECONDS.toNanos(poll))) {
                        keeper.ping();
                    }
                } catch (RuntimeException e) {
                    if (conn != null) {
                        conn.discard();
                        conn = null;
                    }
                    epoch++;
                    slots.values().forEach(s -> s.complete(null));
                    Thread.sleep(50);
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } finally {
            if (conn != null) {
                conn.discard();
            }
        }
    }

    private void deliver(String element) {
        int at = element.indexOf(' ');
        String rid = at < 0 ? element : element.substring(0, at);
        String outcome = at < 0 ? "" : element.substring(at + 1);
        CompletableFuture<String> slot = slots.get(rid);
        if (slot != null) {
            slot.complete(outcome);
            return;
        }
        WeakReference<SharedHold> ref = watched.get(rid);
        SharedHold hold = ref == null ? null : ref.get();
        if (hold != null && outcome.startsWith("-LOST")) {
            hold.heardLost(outcome.substring(1));
        }
    }
}
