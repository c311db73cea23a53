package io.padlock;

import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * The connection every hold of one {@link Padlock} on one node shares: their
 * commands, their {@code KEEP} bindings and (through its {@link Mailman})
 * their waits. Made by the driver for padlock ({@link Driver#dedicated}),
 * never taken from the application's pool; calls are serialized, each
 * bounded by its timeout.
 *
 * <p>Its {@link #epoch} moves whenever the connection is replaced: bindings
 * made on an earlier one are gone, and the holds bind again on their next
 * round; waits queued on it are sent again (their request-ids make that
 * safe).
 */
final class Keeper {
    private final Padlock pad;
    /** A key the node serves: what the driver routes the connection by. */
    private final String route;
    private Link link;
    private volatile long epoch;
    /** The async waits queued on this epoch's connection ({@link #queuedOn}). */
    private final java.util.Set<CompletableFuture<String>> queued = java.util.concurrent.ConcurrentHashMap.newKeySet();
    /** The send time (nanoTime) of the latest command answered on this epoch's connection. */
    private volatile long aliveAt = Long.MIN_VALUE;
    private volatile boolean alive;
    /** Null where waits cannot go through a mailbox (a cluster: it must share each request's slot). */
    final Mailman mailman;

    /**
     * Runs the async waits' sends (and, on drivers without futures, every
     * async command) one after another, in the order they were asked for, on
     * the Padlock's async threads: a thread that queues waits in turn is
     * served in that turn (the keeper sends one at a time anyway).
     */
    final java.util.concurrent.Executor serial;
    private final java.util.ArrayDeque<Runnable> turns = new java.util.ArrayDeque<>();
    private boolean turning;

    /** One reply, and the epoch of the connection it came on. */
    record Reply(Object value, long epoch) {}

    Keeper(Padlock pad, String route) {
        this.pad = pad;
        this.route = route;
        this.mailman = pad.driver.mailbox() ? new Mailman(pad, this, route) : null;
        this.serial = task -> {
            synchronized (turns) {
                turns.add(task);
                if (turning) {
                    return;
                }
                turning = true;
            }
            pad.async.execute(this::takeTurns);
        };
    }

    private void takeTurns() {
        while (true) {
            Runnable next;
            synchronized (turns) {
                next = turns.poll();
                if (next == null) {
                    turning = false;
                    return;
                }
            }
            try {
                next.run();
            } catch (RuntimeException e) {
                pad.log("an async wait's send failed: " + e);
            }
        }
    }

    synchronized Reply call(long timeoutMs, List<String> args) {
        if (link == null) {
            link = pad.driver.dedicated(route);
        }
        long sent = System.nanoTime();
        try {
            Object value = link.call(timeoutMs, args);
            if (!alive || sent - aliveAt > 0) {
                aliveAt = sent;
                alive = true;
            }
            return new Reply(value, epoch);
        } catch (LinkException e) {
            reset();
            throw e;
        }
    }

    /**
     * {@link #call} without a thread waiting for the reply where the driver
     * has futures ({@link Driver#futures}): sent now, in order with every
     * other command on the connection, and what follows the reply runs on
     * the Padlock's reply thread, never on the driver's I/O thread (which
     * must never wait for a keeper). Otherwise it runs in {@link #serial}'s
     * turn.
     */
    CompletableFuture<Reply> callAsync(long timeoutMs, List<String> args) {
        if (!pad.driver.futures()) {
            return CompletableFuture.supplyAsync(() -> call(timeoutMs, args), serial);
        }
        CompletableFuture<Object> reply;
        long sentEpoch;
        long sent;
        synchronized (this) {
            try {
                if (link == null) {
                    link = pad.driver.dedicated(route);
                }
            } catch (RuntimeException e) {
                return CompletableFuture.failedFuture(e);
            }
            sentEpoch = epoch;
            sent = System.nanoTime();
            reply = link.send(timeoutMs, args);
        }
        return reply.handleAsync((value, e) -> {
            if (e == null) {
                if (sentEpoch == epoch && (!alive || sent - aliveAt > 0)) {
                    aliveAt = sent;
                    alive = true;
                }
                return new Reply(value, sentEpoch);
            }
            Throwable cause = Replies.cause(e);
            if (cause instanceof LinkException) {
                resetIf(sentEpoch);
            }
            throw cause instanceof RuntimeException r ? r : new LinkException(String.valueOf(cause), cause);
        }, pad.replies);
    }

    /** {@link #reset}, unless the connection of {@code sentEpoch} is gone already. */
    private synchronized void resetIf(long sentEpoch) {
        if (epoch == sentEpoch) {
            reset();
        }
    }

    synchronized long epoch() {
        return epoch;
    }

    /**
     * Watches a wait queued on this epoch's connection: {@code slot} completes
     * with null when the connection goes (no timer per wait), and is
     * forgotten when it completes otherwise. False when the epoch moved on
     * already.
     */
    synchronized boolean queuedOn(long sentEpoch, CompletableFuture<String> slot) {
        if (sentEpoch != epoch) {
            return false;
        }
        queued.add(slot);
        slot.whenComplete((v, e) -> queued.remove(slot));
        return true;
    }

    /** Whether the keeper's connection answered since {@code since} (nanoTime). */
    boolean aliveSince(long since) {
        return alive && aliveAt - since >= 0;
    }

    long aliveAt() {
        return alive ? aliveAt : Long.MIN_VALUE;
    }

    /** The liveness check of every binding on the connection; nothing to check when it is not open. */
    void ping() {
        synchronized (this) {
            if (link == null) {
                return;
            }
        }
        call(2000, List.of("PING"));
    }

    /** Closes the connection: every binding on it ends (the holds that still live bind again). */
    synchronized void reset() {
        epoch++;
        alive = false;
        // The waits queued on the connection that went hear it now (each is
        // sent again with its request-id).
        queued.forEach(w -> w.complete(null));
        queued.clear();
        if (link != null) {
            link.discard();
            link = null;
        }
    }

    /** For good (the Padlock closes). */
    void close() {
        reset();
        if (mailman != null) {
            mailman.close();
        }
    }
}
