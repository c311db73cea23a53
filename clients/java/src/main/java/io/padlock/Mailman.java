package io.padlock;

import java.lang.ref.WeakReference;
import java.security.SecureRandom;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.LinkedBlockingQueue;
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
    private volatile boolean closed;
    /** Bumped when the mailbox connection failed (the waits are sent again). */
    volatile long epoch;
    /** Half the shortest interval watched: the mailbox is read at least that often. */
    private volatile long pollMs = POLL_MS;
    /** The connection the mailbox is read on, for {@link #close}. */
    private volatile Link reading;
    /** The send time (nanoTime) of the latest read that found the mailbox empty. */
    private volatile long clearAt;
    private volatile boolean cleared;
    /**
     * In a cluster: a mailbox per slot, those named so far, heard of through
     * tracking (the keys each notice names; {@link #ALL} for a flush), and
     * the send time of the tracking connection's latest PING.
     */
    private final boolean cluster;
    private final Set<String> boxes = ConcurrentHashMap.newKeySet();
    private final LinkedBlockingQueue<List<String>> heard = new LinkedBlockingQueue<>();
    private static final List<String> ALL = List.of();
    private long pinged;

    Mailman(Padlock pad, Keeper keeper, String route) {
        this.pad = pad;
        this.keeper = keeper;
        this.route = route;
        this.cluster = pad.driver.cluster();
        byte[] b = new byte[16];
        RANDOM.nextBytes(b);
        this.mailbox = "padlock:mailbox:" + HexFormat.of().formatHex(b);
    }

    /** The mailbox of {@code request}: the keeper's, or in a cluster that of its key's slot. */
    String mailboxFor(List<String> request) {
        if (!cluster) {
            return mailbox;
        }
        String key = request.get(0).equals("LOCK.MACQUIRE") ? request.get(2) : request.get(1);
        String box = mailbox + ":{" + Slots.tag(Slots.of(key)) + "}";
        boxes.add(box);
        return box;
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
        // A blocking driver's read ignores the interrupt: closing its socket
        // ends it now rather than when the server's BLMPOP times out.
        Link c = reading;
        if (c != null) {
            c.discard();
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
                        conn = cluster ? track() : pad.driver.dedicated(route);
                        reading = conn;
                        if (closed) {
                            continue;
                        }
                    }
                    long poll = pollMs;
                    if (conn instanceof Tracked t) {
                        hear(t, poll);
                        continue;
                    }
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
                    if (closed) {
                        return; // close() ended the read: no reconnect to report
                    }
                    epoch++;
                    slots.values().forEach(s -> s.complete(null));
                    Thread.sleep(50);
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } finally {
            reading = null;
            if (conn != null) {
                conn.discard();
            }
        }
    }

    /**
     * Tracks this Padlock's mailboxes on the node; those named so far are
     * drained: a post made before tracking began is popped now, any later
     * one is heard of.
     */
    private Tracked track() {
        heard.clear();
        Tracked t = pad.driver.tracked(route, mailbox + ":", keys -> heard.add(keys == null ? ALL : keys));
        long sent = System.nanoTime();
        drain(t, List.copyOf(boxes));
        clearAt = sent;
        cleared = true;
        pinged = sent;
        return t;
    }

    /**
     * Hands on what the mailboxes named by notices hold, and pings the
     * tracking connection once per {@code poll}: its PONG comes after the
     * notices of every post made before the previous PING was served (they
     * go out at the end of that event-loop turn), so all of those were
     * handed on: {@code clearAt} is that PING's send time.
     */
    private void hear(Tracked t, long poll) throws InterruptedException {
        long wait = pinged + TimeUnit.MILLISECONDS.toNanos(poll) - System.nanoTime();
        if (wait > 0) {
            t.listen(Math.max(1, TimeUnit.NANOSECONDS.toMillis(wait)));
            drainHeard(t);
            return;
        }
        long sent = System.nanoTime();
        t.call(5000, List.of("PING"));
        drainHeard(t);
        clearAt = pinged;
        pinged = sent;
        if (!keeper.aliveSince(System.nanoTime() - TimeUnit.MILLISECONDS.toNanos(poll))) {
            keeper.ping();
        }
    }

    private void drainHeard(Tracked t) {
        List<String> keys;
        while ((keys = heard.poll()) != null) {
            drain(t, named(keys));
        }
    }

    private List<String> named(List<String> keys) {
        return keys == ALL ? List.copyOf(boxes) : keys.stream().filter(boxes::contains).toList();
    }

    /** Pops each mailbox until it is empty, on {@code t} if it {@link Tracked#pops pops}, else on the keeper. */
    private void drain(Tracked t, List<String> names) {
        for (String box : names) {
            while (true) {
                List<String> pop = List.of("LMPOP", "1", box, "LEFT", "COUNT", Integer.toString(DRAIN));
                Object got = t.pops() ? t.call(5000, pop) : keeper.call(5000, pop).value();
                List<?> elements = got == null ? List.of() : Replies.asList(Replies.asList(got).get(1));
                elements.forEach(e -> deliver(String.valueOf(e)));
                if (elements.size() < DRAIN) {
                    break;
                }
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
