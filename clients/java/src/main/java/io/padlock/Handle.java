package io.padlock;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.TimeUnit;

/**
 * The base of every handle the user holds ({@link PadlockLock},
 * {@link PadlockSemaphore}, ...): what each does the same way. It finds the
 * caller's holder and that holder's {@link SharedHold}, tries on the keeper
 * (with {@code KEEP}), waits through the mailbox, binds the lease after a
 * wait, releases and counts.
 */
abstract class Handle {
    final Padlock pad;
    final Kind kind;
    /** An explicit holder, or null: the calling thread's. */
    final String fixedHolder;
    final long ttlMs;
    /**
     * A plain lease: acquired without {@code KEEP} and never renewed, it runs
     * out {@link #ttlMs} after the acquire while the holder lives (Redisson's
     * {@code leaseTime}, Spring Integration's {@code DistributedLock} ttl).
     */
    final boolean plain;
    volatile Runnable onLost;

    Handle(Padlock pad, Kind kind, String fixedHolder, long ttlMs) {
        this(pad, kind, fixedHolder, ttlMs, false);
    }

    Handle(Padlock pad, Kind kind, String fixedHolder, long ttlMs, boolean plain) {
        if (fixedHolder != null && fixedHolder.isEmpty()) {
            throw new IllegalArgumentException("holder must not be empty");
        }
        if (!plain && ttlMs < 300) {
            throw new IllegalArgumentException("ttl below 300 ms cannot be kept with KEEP");
        }
        if (ttlMs < 1) {
            throw new IllegalArgumentException("a lease must be at least 1 ms");
        }
        this.pad = pad;
        this.kind = kind;
        this.fixedHolder = fixedHolder;
        this.ttlMs = ttlMs;
        this.plain = plain;
    }

    /** The holder this call acts for: the explicit one, or this client's id and the thread's. */
    public String holder() {
        return fixedHolder != null ? fixedHolder : pad.defaultHolder();
    }

    /** The acquire command for {@code units}, without {@code BLOCK}, {@code KEEP} or {@code ID}. */
    abstract List<String> acquireArgs(String holder, long units);

    /** Counts a grant's reply into the hold (caller holds its io). */
    abstract void took(SharedHold h, Object reply, long units);

    /** The release command for {@code units}. */
    abstract List<String> releaseArgs(String holder, long units);

    /** Counts a release's reply; true when nothing is held any more. */
    abstract boolean released(SharedHold h, Object reply, long units);

    /**
     * Takes {@code units}: at once if free, else waiting {@code waitMs}
     * ({@code < 0}: without end; {@code 0}: not at all). False when not
     * granted in time.
     */
    final boolean take(long units, long waitMs, boolean interruptibly) throws InterruptedException {
        return take(holder(), units, waitMs, interruptibly);
    }

    private boolean take(String holder, long units, long waitMs, boolean interruptibly) throws InterruptedException {
        Releases.clearBeforeTake(this, holder);
        while (true) {
            boolean fresh = Replicated.fresh(pad, kind, holder);
            if (!takeOnce(holder, units, waitMs, interruptibly)) {
                return false;
            }
            if (!fresh || Replicated.enough(pad, kind, holder, () -> give(holder, units))) {
                return true;
            }
            if (waitMs >= 0) {
                return false; // short of its replicas: failed as a timed-out wait fails
            }
            // A wait without end (lock()) waits again.
        }
    }

    private boolean takeOnce(String holder, long units, long waitMs, boolean interruptibly) throws InterruptedException {
        if (interruptibly && Thread.interrupted()) {
            throw new InterruptedException();
        }
        long start = System.nanoTime();
        boolean forever = waitMs < 0;
        long deadline = forever ? Long.MAX_VALUE : start + TimeUnit.MILLISECONDS.toNanos(waitMs);
        // A wait through the mailbox is granted at once when it can be: one
        // round trip, bound with the mailbox. Otherwise one try first.
        if (waitMs == 0 || pad.keeper(kind.route()).mailman == null) {
            Boolean got = tryNow(holder, units);
            if (got != null) {
                return got;
            }
            if (waitMs == 0) {
                return false;
            }
        }
        return waitFor(holder, units, deadline, forever, interruptibly);
    }

    /** One try on the keeper: true when granted, null when not (yet). */
    private Boolean tryNow(String holder, long units) {
        SharedHold first = locked(holder);
        try {
            long sent = System.nanoTime();
            Object r;
            try {
                r = first.send(tryArgs(holder, units), sent + TimeUnit.MILLISECONDS.toNanos(Math.min(ttlMs, 5000)));
            } catch (RuntimeException e) {
                return tried(first, units, sent, null, e);
            }
            return tried(first, units, sent, r, null);
        } finally {
            first.io.unlock();
        }
    }

    /**
     * {@link #tryNow} without a thread waiting for the reply (a driver with
     * futures): the hold's io is taken here and given back once the reply is
     * counted in. Null when the hold is busy right now: then the caller tries
     * the slow way.
     */
    private CompletableFuture<Boolean> tryNowAsync(String holder, long units) {
        SharedHold first = pad.hold(kind, holder, ttlMs);
        if (!first.io.tryLock()) {
            return null;
        }
        if (first.ended || first.plainRanOut()) {
            first.io.unlock(); // a hold just ending: the slow way takes a new one
            return null;
        }
        long sent = System.nanoTime();
        CompletableFuture<Object> reply;
        try {
            reply = first.sendAsync(tryArgs(holder, units), sent + TimeUnit.MILLISECONDS.toNanos(Math.min(ttlMs, 5000)));
        } catch (RuntimeException e) {
            giveBackIfIdle(first);
            first.io.unlock();
            return CompletableFuture.failedFuture(e);
        }
        return reply.handle((r, e) -> {
            try {
                return Boolean.TRUE.equals(tried(first, units, sent, r, e == null ? null : Replies.cause(e)));
            } finally {
                first.io.unlock();
            }
        });
    }

    private List<String> tryArgs(String holder, long units) {
        List<String> now = new ArrayList<>(acquireArgs(holder, units));
        if (!plain) {
            now.add("KEEP");
        }
        return now;
    }

    /** A try's reply (or what it failed with) counted in (caller holds io): true when granted, null when not (yet). */
    private Boolean tried(SharedHold first, long units, long sent, Object r, Throwable failed) {
        if (failed != null) {
            if (!(failed instanceof ReplyException re) || !"TRYAGAIN".equals(re.code())) {
                giveBackIfIdle(first);
                if (failed instanceof ReplyException re) {
                    throw Handle.translate(re);
                }
                throw failed instanceof RuntimeException e ? e : new LinkException(String.valueOf(failed), failed);
            }
            r = null; // a restart grace: a wait is served once it ends
        }
        if (r == null) {
            giveBackIfIdle(first);
            return null;
        }
        took(first, r, units);
        first.listen(onLost);
        if (plain) {
            first.grantedPlain(sent, ttlMs);
        } else {
            first.ttlMs = ttlMs;
            first.granted(sent);
        }
        return true;
    }

    private boolean waitFor(String holder, long units, long deadline, boolean forever, boolean interruptibly)
            throws InterruptedException {
        for (int moves = 0; ; moves++) {
            Waits.Waited w;
            try {
                w = Waits.await(pad, kind, left -> waitArgs(holder, units, left), deadline, forever, interruptibly,
                        releaseArgs(holder, units));
            } catch (ReplyException e) {
                if (Waits.moved(pad, kind, holder, e, moves)) {
                    continue;
                }
                throw Handle.translate(e);
            }
            Boolean got = adoptWait(holder, units, w);
            if (got != null) {
                return got;
            }
            if (!forever && System.nanoTime() - deadline >= 0) {
                return false; // granted, but gone before it could be kept: waited for again while time is left
            }
        }
    }

    /** A wait's command for {@code left} ms ({@code 0}: no end). */
    private List<String> waitArgs(String holder, long units, long left) {
        List<String> a = new ArrayList<>(acquireArgs(holder, units));
        a.add("BLOCK");
        a.add(Long.toString(left));
        if (!plain) {
            a.add("KEEP");
        }
        return a;
    }

    /** A wait's outcome counted in, its lease bound (or timed); null: a grant that ran out before it could be bound. */
    private Boolean adoptWait(String holder, long units, Waits.Waited w) {
        if (w.reply() == null) {
            return false;
        }
        SharedHold h = locked(holder);
        try {
            boolean fresh = h.depth == 0 && h.reads == 0 && h.writes == 0;
            took(h, w.reply(), units);
            h.listen(onLost);
            if (plain) {
                h.grantedPlain(w.sentAt(), ttlMs);
                if (w.link() != null) {
                    w.link().close();
                }
                return true;
            }
            h.ttlMs = ttlMs;
            try {
                h.adopt(w);
            } catch (RuntimeException e) {
                if (fresh && e instanceof ReplyException re && "NOTHELD".equals(re.code())) {
                    h.depth = h.reads = h.writes = 0;
                    h.finish(true);
                    return null;
                }
                h.lose("the lease of " + holder + " on " + kind.route() + " ran out right after its wait");
                throw new LockLostException("granted, but lost before its lease could be kept: " + e.getMessage());
            }
            return true;
        } finally {
            h.io.unlock();
        }
    }

    /** The holder's live hold, locked (the caller unlocks its io). */
    private SharedHold locked(String holder) {
        while (true) {
            SharedHold h = pad.hold(kind, holder, ttlMs);
            h.io.lock();
            if (!h.ended && h.plainRanOut()) {
                // A plain lease past its end: nothing of it is held any more.
                h.finish(true);
            }
            if (!h.ended) {
                return h;
            }
            h.io.unlock();
            pad.forget(h);
        }
    }

    /** A hold that holds nothing gives its connection back while its owner waits elsewhere. */
    private static void giveBackIfIdle(SharedHold h) {
        if (h.depth == 0) {
            h.finish(true);
        }
    }

    /** Gives back {@code units}; throws {@link IllegalMonitorStateException} when not held. */
    final void give(long units) {
        give(holder(), units);
    }

    private void give(String holder, long units) {
        SharedHold h = pad.existing(kind, holder);
        if (h == null) {
            throw new IllegalMonitorStateException(kind.route() + " is not held by " + holder);
        }
        h.io.lock();
        try {
            Releases.check(h, releaseArgs(holder, 1));
            Object r;
            try {
                r = h.send(releaseArgs(holder, units), System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(ttlMs));
            } catch (RuntimeException e) {
                throw Releases.failed(h, e);
            }
            if (released(h, r, units)) {
                Replicated.released(pad, kind, h);
                h.finish(true);
            }
        } finally {
            h.io.unlock();
        }
    }

    /**
     * {@link #take} without parking a thread while it waits: the wait goes
     * through the mailbox, its future completes from the mailbox reader. The
     * holder is the calling thread's (or the explicit one), taken now.
     * Cancelling the future leaves the server's queue, and a grant that raced
     * the cancel is given back. A try ({@code waitMs == 0}) on a driver with
     * futures holds no thread either; in a cluster (no mailbox), and for a
     * try on the other drivers, the call runs on one of padlock's threads.
     */
    final CompletableFuture<Boolean> takeAsync(long units, long waitMs) {
        return takeAsync(holder(), units, waitMs);
    }

    private CompletableFuture<Boolean> takeAsync(String holder, long units, long waitMs) {
        Keeper k = pad.keeper(kind.route());
        // (A grant that waits for replicas waits on one of padlock's threads.)
        CompletableFuture<Boolean> quick = waitMs == 0 && pad.driver.futures() && pad.replicas == null
                ? tryNowAsync(holder, units) : null;
        if (quick != null) {
            return quick;
        }
        if (k.mailman == null || waitMs == 0) {
            return CompletableFuture.supplyAsync(() -> {
                try {
                    return take(holder, units, waitMs, true);
                } catch (InterruptedException e) {
                    throw new CompletionException(e);
                }
            }, pad.helper);
        }
        boolean forever = waitMs < 0;
        long deadline = forever ? Long.MAX_VALUE : System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(waitMs);
        boolean fresh = Replicated.fresh(pad, kind, holder);
        CompletableFuture<Waits.Waited> wait = AsyncWait.start(pad, k, kind, left -> waitArgs(holder, units, left),
                deadline, forever, releaseArgs(holder, units));
        CompletableFuture<Boolean> out = new CompletableFuture<>();
        out.whenComplete((v, e) -> {
            if (e instanceof CancellationException) {
                wait.cancel(true);
            }
        });
        wait.whenComplete((w, e) -> pad.async.execute(() -> {
            if (e != null) {
                Throwable t = e instanceof CompletionException && e.getCause() != null ? e.getCause() : e;
                out.completeExceptionally(t instanceof ReplyException r ? Handle.translate(r) : t);
                return;
            }
            try {
                Boolean adopted = adoptWait(holder, units, w);
                boolean got = Boolean.TRUE.equals(adopted);
                if (adopted == null || got && fresh && !Replicated.enough(pad, kind, holder, () -> give(holder, units))) {
                    long left = forever ? -1 : TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime());
                    if (!forever && (adopted != null || left <= 0)) {
                        out.complete(false); // short of its replicas: failed as a timed-out wait fails
                        return;
                    }
                    // A wait without end waits again (and one whose grant was gone, while time is left).
                    CompletableFuture<Boolean> again = takeAsync(holder, units, left);
                    out.whenComplete((v, x) -> again.cancel(true));
                    again.whenComplete((v, x) -> {
                        if (x != null) {
                            out.completeExceptionally(Replies.cause(x));
                        } else {
                            out.complete(v);
                        }
                    });
                    return;
                }
                if (!out.complete(got) && got) {
                    give(holder, units); // cancelled while it was counted in: given back
                }
            } catch (RuntimeException ex) {
                out.completeExceptionally(ex);
            }
        }));
        return out;
    }

    /**
     * {@link #give}, the holder the calling thread's (taken now). On a driver
     * with futures ({@link Driver#futures}) no thread waits for the reply:
     * the hold's io is taken here and given back once the reply is counted
     * in. A hold busy right now (its round, another call), and the other
     * drivers, release on one of padlock's async threads.
     */
    final CompletableFuture<Void> giveAsync(long units) {
        String holder = holder();
        SharedHold h = pad.existing(kind, holder);
        if (h == null || !pad.driver.futures() || pad.replicas != null || !h.io.tryLock()) {
            return CompletableFuture.runAsync(() -> give(holder, units), pad.async);
        }
        CompletableFuture<Object> reply;
        try {
            Releases.check(h);
            reply = h.sendAsync(releaseArgs(holder, units), System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(ttlMs));
        } catch (RuntimeException e) {
            h.io.unlock();
            return CompletableFuture.failedFuture(e);
        }
        return reply.handle((r, e) -> {
            try {
                if (e != null) {
                    throw Releases.failed(h, Replies.cause(e));
                }
                if (released(h, r, units)) {
                    h.finish(true);
                }
                return null;
            } finally {
                h.io.unlock();
            }
        });
    }

    /** The hold of the calling thread's holder, or null. */
    final SharedHold mine() {
        SharedHold h = pad.existing(kind, holder());
        return h == null || h.ended ? null : h;
    }

    static RuntimeException translate(ReplyException e) {
        if ("DEADLOCK".equals(e.code())) {
            return new DeadlockException(e.getMessage());
        }
        return e;
    }
}
