package io.padlock;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;

/**
 * One holder's hold on one key (or one set of keys), shared by every object
 * of a {@link Padlock} that names the same key and holder, so that nested
 * code reenters instead of waiting and the counts agree with the server's.
 *
 * <p>Every hold of a Padlock on one node shares that node's {@link Keeper}
 * connection, and its lease is bound there with {@code KEEP MAILBOX}: the
 * server keeps the lease as long as that connection lives, and mails a loss
 * to the keeper's mailbox. While bound, a hold's round on the Padlock's
 * scheduler sends nothing (the mailman's one {@code PING} per interval is the
 * liveness check); a replaced connection is seen by its epoch and the lease
 * bound again, within the lease's time. Waits are queued on the keeper with
 * {@code MAILBOX} (in a cluster, on a connection of their own).
 */
final class SharedHold {
    final Padlock pad;
    final Kind kind;
    final String holder;
    volatile long ttlMs;

    /** Guards every send of the hold, and the counts below. */
    final IoLock io = new IoLock();
    /** The route key's node's keeper; another after a resharding ({@link #rerouted}). Written under io. */
    volatile Keeper keeper;
    /** The keeper's epoch the lease was bound ({@code KEEP}) on, or -1. */
    private long boundEpoch = -1;
    /** The keeper's epoch this hold's latest write went out on; -1: written elsewhere (a mailed grant). */
    private long writtenEpoch = -1;
    /** The binding names the mailbox: its loss is mailed ({@link #heardLost}). */
    private boolean mailbound;
    /** The request-ids its loss may be mailed under. */
    private final List<String> lossIds = new ArrayList<>();
    /** A loss heard, until a round takes it. */
    private volatile String mailedLost;
    /** Lock count, permits held, or read + write holds: what the server counts. */
    long depth;
    long reads;
    long writes;
    long fence;
    /** A multi-lock's fences, one per key. */
    List<Long> fences = List.of();
    /** Set under {@link #io} when the hold left the registry: take a new one. */
    boolean ended;
    /** Its lease is plain (no {@code KEEP}, no rounds): see {@link Handle#plain}. */
    private boolean plain;

    /** Until when (nanoTime) the lease surely lives: counted from send times. */
    volatile long leaseUntil; // (tests read it beside held())
    private volatile boolean lost;
    /** Lost without the server saying so: it may still count holds of it (see {@link Releases#clearLeftover}). */
    volatile boolean leftover;
    private final List<Runnable> onLost = new CopyOnWriteArrayList<>();
    private Watcher.Ticket watch;

    SharedHold(Padlock pad, Kind kind, String holder, long ttlMs) {
        this.pad = pad;
        this.kind = kind;
        this.holder = holder;
        this.ttlMs = ttlMs;
        this.keeper = pad.keeper(kind.route());
    }

    boolean held() {
        return depth > 0 && !lost && mailedLost == null && System.nanoTime() - leaseUntil < 0;
    }

    private boolean bound() {
        return boundEpoch >= 0 && boundEpoch == keeper.epoch();
    }

    private long interval() {
        return Math.max(10, ttlMs / 3);
    }

    /** The server mailed this hold's loss ({@code LOST <why>}): a round marks it lost at once. */
    void heardLost(String why) {
        if (depth == 0 || ended) {
            return;
        }
        mailedLost = why;
        try {
            pad.scheduler.execute(this::watchOnce);
        } catch (RuntimeException e) {
            // the Padlock is closing
        }
    }

    boolean lost() {
        return lost;
    }

    void listen(Runnable r) {
        if (r != null && !onLost.contains(r)) {
            onLost.add(r);
        }
    }

    /**
     * One changing command on the keeper (caller holds {@link #io}), with one
     * request-id, sent again on a new connection until it is answered or
     * {@code deadline} (nanoTime) passes. Error replies are thrown as they
     * come ({@code -TRYAGAIN} is the caller's to judge). A {@code KEEP}
     * command binds the lease to the keeper's connection.
     */
    Object send(List<String> args, long deadline) {
        List<String> withId = prepared(args);
        for (int moves = 0; ; moves++) {
            try {
                return bound(withId, Padlock.resend(keeper, withId, deadline));
            } catch (ReplyException e) {
                if (!rerouted(e, moves)) {
                    throw e;
                }
                withId = readdressed(withId);
            }
        }
    }

    /** {@link #send} without a thread waiting for the reply ({@link Keeper#callAsync}); io stays the caller's. */
    java.util.concurrent.CompletableFuture<Object> sendAsync(List<String> args, long deadline) {
        return sendAsync(prepared(args), deadline, 0);
    }

    private java.util.concurrent.CompletableFuture<Object> sendAsync(List<String> withId, long deadline, int moves) {
        return pad.resendAsync(keeper, withId, deadline).handle((r, e) -> {
            if (e == null) {
                return java.util.concurrent.CompletableFuture.completedFuture(bound(withId, r));
            }
            Throwable cause = Replies.cause(e);
            if (cause instanceof ReplyException re && "MOVED".equals(re.code())) {
                // Followed off the driver's threads: reading the slot map again may block.
                return java.util.concurrent.CompletableFuture.supplyAsync(() -> rerouted(re, moves), pad.scheduler)
                        .thenCompose(on -> on ? sendAsync(readdressed(withId), deadline, moves + 1)
                                : java.util.concurrent.CompletableFuture.failedFuture(re));
            }
            return java.util.concurrent.CompletableFuture.<Object>failedFuture(cause);
        }).thenCompose(f -> f);
    }

    /** A redirect followed ({@link Moves}): on with the new owner's keeper, the old one's binding and loss ids forgotten. */
    private boolean rerouted(ReplyException e, int moves) {
        if (!Moves.follow(pad, kind.route(), e, moves)) {
            return false;
        }
        if (keeper.mailman != null) {
            keeper.mailman.unwatch(lossIds);
        }
        lossIds.clear();
        boundEpoch = writtenEpoch = -1;
        mailbound = false;
        keeper = pad.keeper(kind.route());
        return true;
    }

    private List<String> readdressed(List<String> withId) {
        List<String> cmd = Moves.readdressed(withId, keeper.mailman);
        if (cmd.contains("KEEP") && cmd.contains("MAILBOX")) {
            watchLosses(cmd.get(cmd.size() - 1));
        }
        return cmd;
    }

    /** The command with its request-id; a loss mailed under that id is heard. */
    private List<String> prepared(List<String> args) {
        List<String> withId = pad.withId(args);
        if (keeper.mailman != null && withId.contains("KEEP") && withId.contains("MAILBOX")) {
            watchLosses(withId.get(withId.size() - 1));
        }
        return withId;
    }

    /** A reply to {@code sent}: a {@code KEEP} command bound the lease to the connection it went on. */
    private Object bound(List<String> sent, Keeper.Reply r) {
        writtenEpoch = r.epoch();
        if (sent.contains("KEEP")) {
            boundEpoch = r.epoch();
            mailbound = sent.contains("MAILBOX");
        }
        return r.value();
    }

    private void watchLosses(String rid) {
        keeper.mailman.watch(rid, this, interval());
        lossIds.add(rid);
        // Only the latest bindings' ids can still be mailed.
        int keep = 2 * Math.max(1, kind.extend(holder, ttlMs, 1).size());
        if (lossIds.size() > keep) {
            List<String> old = new ArrayList<>(lossIds.subList(0, lossIds.size() - keep));
            lossIds.subList(0, lossIds.size() - keep).clear();
            keeper.mailman.unwatch(old);
        }
    }

    /**
     * A grant after a wait (caller holds io): its lease is bound to the
     * keeper with the mailbox (moving it from a wait's own connection, which
     * then goes back), and known from the send time of that binding.
     */
    void adopt(Waits.Waited w) {
        writtenEpoch = -1;
        granted(w.sentAt());
        if (w.rid() != null && !w.resent() && w.epoch() == keeper.epoch() && keeper.mailman != null) {
            // Granted on the keeper (at once, or mailed while queued there):
            // bound there with the mailbox already. (Not a grant answered to
            // a resend: that may be the server's memory of a sending on a
            // connection since replaced, bound there.) Its lease is known to live
            // from when the binding was last seen alive; when that is not
            // recent enough, it is bound again below, as after any wait.
            watchLosses(w.rid());
            boundEpoch = w.epoch();
            mailbound = true;
            long ttl = TimeUnit.MILLISECONDS.toNanos(ttlMs);
            long fresh = keeper.mailman.fresh();
            if (fresh != Long.MIN_VALUE && fresh + ttl - leaseUntil > 0) {
                leaseUntil = fresh + ttl;
            }
            if (leaseUntil - System.nanoTime() > ttl * 2 / 3) {
                return;
            }
        }
        try {
            bind(System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(ttlMs));
        } finally {
            if (w.link() != null) {
                w.link().close();
            }
        }
    }

    /**
     * A plain lease granted to a request sent at {@code sentAt}: it lives
     * {@code leaseMs} from then, with no binding and no rounds, unless the
     * hold is renewed already (a reentry keeps what the hold had).
     */
    void grantedPlain(long sentAt, long leaseMs) {
        long until = sentAt + TimeUnit.MILLISECONDS.toNanos(leaseMs);
        if (watch == null) {
            plain = true;
            leaseUntil = until;
        }
    }

    /** A plain lease extended by a request sent at {@code sentAt}: it lives {@code leaseMs} from then. */
    void extendedPlain(long sentAt, long leaseMs) {
        if (plain) {
            leaseUntil = sentAt + TimeUnit.MILLISECONDS.toNanos(leaseMs);
        }
    }

    /** Whether this is a plain lease that may have run out (nothing of it held any more). */
    boolean plainRanOut() {
        return plain && depth > 0 && System.nanoTime() - leaseUntil >= 0;
    }

    /** A grant answered to a request sent at {@code sentAt} (nanoTime): the lease lives from then on. */
    void granted(long sentAt) {
        plain = false;
        leaseUntil = sentAt + TimeUnit.MILLISECONDS.toNanos(ttlMs);
        if (watch == null) {
            long every = Math.max(10, ttlMs / 3);
            watch = pad.watcher.every(every, this::watchOnce);
        }
    }

    /** Binds the lease to the keeper with {@code KEEP} (and its mailbox). Caller holds io. */
    void bind(long deadline) {
        long start = System.nanoTime();
        for (List<String> cmd : kind.extend(holder, ttlMs, depth)) {
            if (keeper.mailman != null && cmd.contains("KEEP")) {
                cmd = new ArrayList<>(cmd);
                cmd.add("MAILBOX");
                cmd.add(keeper.mailman.mailboxFor(cmd));
            }
            send(cmd, deadline);
        }
        leaseUntil = start + TimeUnit.MILLISECONDS.toNanos(ttlMs);
    }

    /**
     * How many replicas have every write of this hold so far (caller holds
     * io): {@code WAIT} on the keeper, first after a write there when the
     * grant was written elsewhere (mailed, or before a reconnect), which
     * {@code WAIT} then counts from. A plain lease's renewal only makes the
     * server's lease longer than the one this client counts.
     */
    long replicasHaving(Replicas want) {
        long limit = want.timeout().toMillis() + 5000;
        if (writtenEpoch != keeper.epoch()) {
            long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(limit);
            if (plain) {
                for (List<String> cmd : kind.extend(holder, ttlMs, depth)) {
                    List<String> c = new ArrayList<>(cmd);
                    c.remove("KEEP");
                    send(c, deadline);
                }
            } else {
                bind(deadline);
            }
        }
        List<Object> replies = new ArrayList<>();
        for (List<String> cmd : want.waitCommands()) {
            replies.add(keeper.call(limit, cmd).value());
        }
        return want.counted(replies);
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
            if (mailedLost != null) {
                lose("the hold of " + holder + " on " + kind.route() + " is lost: " + mailedLost, true);
                return;
            }
            long start = System.nanoTime();
            if (keeper.mailman != null) {
                long fresh = keeper.mailman.fresh();
                long ttl = TimeUnit.MILLISECONDS.toNanos(ttlMs);
                if (bound() && mailbound) {
                    // Bound there, no loss mailed since: kept a ttl past that.
                    if (fresh != Long.MIN_VALUE && fresh + ttl - leaseUntil > 0) {
                        leaseUntil = fresh + ttl;
                    }
                    if (leaseUntil - (start + TimeUnit.MILLISECONDS.toNanos(interval())) > 0) {
                        return; // known to last past the next round
                    }
                }
                if (rebind() < 0) {
                    lose("the lease of " + holder + " on " + kind.route() + " is gone");
                }
                return;
            }
            long left = Long.MAX_VALUE;
            try {
                long limit = Math.max(50, Math.min(2000, TimeUnit.NANOSECONDS.toMillis(leaseUntil - start)));
                for (List<String> cmd : kind.look()) {
                    long one = kind.leaseLeft(Replies.asMap(keeper.call(limit, cmd).value()), holder);
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
            } else if (!bound() || left < ttlMs / 2) {
                // A keeper replaced since the binding: bound again.
                if (rebind() < 0) {
                    lose("the lease of " + holder + " on " + kind.route() + " is gone");
                }
            } else {
                leaseUntil = start + TimeUnit.MILLISECONDS.toNanos(left);
            }
        } catch (RuntimeException e) {
            lose("the lease of " + holder + " on " + kind.route() + " could not be checked: " + e);
        } finally {
            io.unlock();
        }
    }

    /** The lease bound again to the keeper; the ms left, or -1 when lost. */
    private long rebind() {
        try {
            bind(leaseUntil);
            return ttlMs;
        } catch (RuntimeException e) {
            return -1;
        }
    }

    /** The hold is gone without a release: nobody may count on it any more. Caller holds io. */
    void lose(String why) {
        lose(why, false);
    }

    /**
     * The same; {@code sure}: the server said it is gone, so nothing of it
     * can still be bound (otherwise the keeper's connection is replaced).
     */
    void lose(String why, boolean sure) {
        if (lost) {
            return;
        }
        lost = true;
        leftover = !sure && depth > 0;
        depth = reads = writes = 0;
        pad.registerLost(this); // registered until its holder hears of it
        finish(sure, false);
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
            watch.cancel();
            watch = null;
        }
        if (keeper.mailman != null) {
            keeper.mailman.unwatch(lossIds);
        }
        lossIds.clear();
        mailbound = false;
        if (!clean && bound()) {
            // A lease of it may still be bound: the keeper's connection is
            // replaced (the other holds bind again on their next round).
            keeper.reset();
        }
        boundEpoch = -1;
        if (forget) {
            pad.forget(this);
        }
    }
}
