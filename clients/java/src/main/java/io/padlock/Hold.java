package io.padlock;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.LongFunction;

/**
 * One holder's hold on one key (or one set of keys), shared by every object
 * of a {@link Padlock} that names the same key and holder, so that nested
 * code reenters instead of waiting and the counts agree with the server's.
 *
 * <p>The hold owns one connection while it lives, and its lease is bound to
 * it with {@code KEEP}: the server keeps the lease as long as that connection
 * lives. The Padlock's one scheduler reads the lease every ttl/3 (a read, not
 * a write); a failed connection is replaced and the lease bound to the new
 * one, within the lease's time. Waits run on a connection of their own, so
 * the hold's connection never blocks.
 */
final class Hold {
    final Padlock pad;
    final Kind kind;
    final String holder;
    volatile long ttlMs;

    /** Guards {@link #link} and every send on it, and the counts below. */
    final ReentrantLock io = new ReentrantLock();
    private Link link;
    /** Lock count, permits held, or read + write holds: what the server counts. */
    long depth;
    long reads;
    long writes;
    long fence;
    /** A multi-lock's fences, one per key. */
    List<Long> fences = List.of();
    /** Set under {@link #io} when the hold left the registry: take a new one. */
    boolean ended;

    /** Until when (nanoTime) the lease surely lives: counted from send times. */
    private volatile long leaseUntil;
    private volatile boolean lost;
    private final List<Runnable> onLost = new CopyOnWriteArrayList<>();
    private ScheduledFuture<?> watch;

    Hold(Padlock pad, Kind kind, String holder, long ttlMs) {
        this.pad = pad;
        this.kind = kind;
        this.holder = holder;
        this.ttlMs = ttlMs;
    }

    boolean held() {
        return depth > 0 && !lost && System.nanoTime() - leaseUntil < 0;
    }

    boolean lost() {
        return lost;
    }

    void listen(Runnable r) {
        if (r != null && !onLost.contains(r)) {
            onLost.add(r);
        }
    }

    private Link link() {
        if (link == null) {
            link = pad.driver.open(kind.route());
        }
        return link;
    }

    /**
     * One changing command on the hold's connection (caller holds {@link #io}),
     * with one request-id, sent again on a new connection until it is
     * answered or {@code deadline} (nanoTime) passes. Error replies are
     * thrown as they come ({@code -TRYAGAIN} is the caller's to judge).
     */
    Object send(List<String> args, long deadline) {
        List<String> withId = pad.withId(args);
        int attempt = 0;
        while (true) {
            long left = TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime());
            try {
                return link().call(Math.max(left, 50), withId);
            } catch (LinkException e) {
                if (link != null) {
                    link.discard();
                    link = null;
                }
                if (!Padlock.pause(attempt++, deadline)) {
                    throw e;
                }
            }
        }
    }

    /**
     * A wait, on a connection of its own (handed back after), with one
     * request-id: a resend after a failed connection asks for the same
     * request, which the server answers with the grant it made meanwhile or
     * puts back in the queue. {@code make} builds the command from the ms
     * left ({@code 0}: no end).
     */
    static Waited await(Padlock pad, Kind kind, LongFunction<List<String>> make, long deadline, boolean forever,
            boolean interruptibly) throws InterruptedException {
        String id = pad.nextId();
        int attempt = 0;
        while (true) {
            long leftMs = forever ? 0 : Math.max(1, TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime()));
            List<String> args = new ArrayList<>(make.apply(leftMs));
            args.add("ID");
            args.add(id);
            Link wait = pad.driver.open(kind.route());
            // The reply may take the whole BLOCK and then some: no timeout shorter.
            long limit = forever ? 0 : leftMs + 5000;
            long sentAt = System.nanoTime();
            try {
                Object r = interruptibly ? wait.callInterruptibly(limit, args, pad.helper) : wait.call(limit, args);
                if (r == null) {
                    wait.close();
                    return new Waited(null, null, sentAt, attempt > 0);
                }
                return new Waited(r, wait, sentAt, attempt > 0);
            } catch (LinkException e) {
                wait.discard();
                if (!again(attempt++, deadline, forever)) {
                    throw e;
                }
            } catch (ReplyException e) {
                wait.close();
                if (!"TRYAGAIN".equals(e.code()) || !again(attempt++, deadline, forever)) {
                    throw e;
                }
            } catch (InterruptedException | RuntimeException e) {
                wait.discard();
                throw e;
            }
        }
    }

    /** Pauses before a wait is asked again; false when its time is up (a wait without end never is). */
    private static boolean again(int attempt, long deadline, boolean forever) {
        if (forever) {
            Padlock.pause(attempt, System.nanoTime() + TimeUnit.SECONDS.toNanos(1));
            return true;
        }
        return Padlock.pause(attempt, deadline);
    }

    /**
     * What a wait got: the reply, and for a grant the connection it came on
     * (a {@code KEEP} grant is bound to it, unless it came on a resend,
     * which binds nothing).
     */
    record Waited(Object reply, Link link, long sentAt, boolean resent) {}

    /**
     * A grant that came on a wait's own connection (caller holds io): that
     * connection becomes the hold's, its lease bound there already; a hold
     * that has a connection binds the lease to it instead. After a wait
     * longer than half the ttl, the lease left is asked for again.
     */
    void adopt(Waited w) {
        granted(w.sentAt());
        if (link == null && !w.resent()) {
            link = w.link();
            if (System.nanoTime() - (w.sentAt() + TimeUnit.MILLISECONDS.toNanos(ttlMs / 2)) < 0) {
                return;
            }
            bind(System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(ttlMs));
        } else {
            try {
                bind(System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(ttlMs));
            } finally {
                w.link().close();
            }
        }
    }

    /** A grant answered to a request sent at {@code sentAt} (nanoTime): the lease lives from then on. */
    void granted(long sentAt) {
        leaseUntil = sentAt + TimeUnit.MILLISECONDS.toNanos(ttlMs);
        if (watch == null) {
            long every = Math.max(10, ttlMs / 3);
            watch = pad.scheduler.scheduleWithFixedDelay(this::watchOnce, every, every, TimeUnit.MILLISECONDS);
        }
    }

    /** Binds the lease to the hold's connection with {@code KEEP} (after a wait on another one). Caller holds io. */
    void bind(long deadline) {
        long start = System.nanoTime();
        for (List<String> cmd : kind.extend(holder, ttlMs, depth)) {
            send(cmd, deadline);
        }
        leaseUntil = start + TimeUnit.MILLISECONDS.toNanos(ttlMs);
    }

    /** The scheduler's round: a read while the server keeps the lease; a rebind after a failure. */
    private void watchOnce() {
        if (lost || ended) {
            return;
        }
        if (!io.tryLock()) {
            return; // in use right now: that request answers for it
        }
        try {
            if (depth == 0 || ended) {
                return;
            }
            long start = System.nanoTime();
            long left = Long.MAX_VALUE;
            try {
                long limit = Math.max(50, Math.min(2000, TimeUnit.NANOSECONDS.toMillis(leaseUntil - start)));
                for (List<String> cmd : kind.look()) {
                    long one = kind.leaseLeft(Replies.asMap(link().call(limit, cmd)), holder);
                    left = one < 0 ? -1 : Math.min(left, one);
                    if (left < 0) {
                        break;
                    }
                }
            } catch (LinkException e) {
                left = rebind();
            } catch (ReplyException e) {
                left = "WRONGTYPE".equals(e.code()) ? -1 : rebind();
            }
            if (left < 0) {
                lose("the lease of " + holder + " on " + kind.route() + " is gone");
            } else {
                leaseUntil = start + TimeUnit.MILLISECONDS.toNanos(left);
            }
        } catch (RuntimeException e) {
            lose("the lease of " + holder + " on " + kind.route() + " could not be checked: " + e);
        } finally {
            io.unlock();
        }
    }

    /** A new connection and the lease bound to it; the ms left, or -1 when lost. */
    private long rebind() {
        if (link != null) {
            link.discard();
            link = null;
        }
        try {
            bind(leaseUntil);
            return ttlMs;
        } catch (RuntimeException e) {
            return -1;
        }
    }

    /** The hold is gone without a release: nobody may count on it any more. Caller holds io. */
    void lose(String why) {
        if (lost) {
            return;
        }
        lost = true;
        depth = reads = writes = 0;
        // It stays in the registry, lost, until its holder next tries to
        // release or take it: until then the holder is told it lost it.
        finish(false, false);
        pad.log(why);
        for (Runnable r : onLost) {
            try {
                r.run();
            } catch (RuntimeException e) {
                // Reported where the JVM reports a failed task (the thread's
                // uncaught-exception handler), and the other listeners and
                // holds go on.
                pad.log("a lease-loss listener failed: " + e);
                Thread t = Thread.currentThread();
                t.getUncaughtExceptionHandler().uncaughtException(t, e);
            }
        }
    }

    /** The last hold was released (or lost): the connection goes back, closed if a lease may be bound to it. */
    void finish(boolean clean) {
        finish(clean, true);
    }

    private void finish(boolean clean, boolean forget) {
        ended = true;
        if (watch != null) {
            watch.cancel(false);
            watch = null;
        }
        if (link != null) {
            if (clean) {
                link.close();
            } else {
                link.discard();
            }
            link = null;
        }
        if (forget) {
            pad.forget(this);
        }
    }
}
