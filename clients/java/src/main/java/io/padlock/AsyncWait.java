package io.padlock;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.LongFunction;

/**
 * A mailbox wait ({@link MailWait}) that parks no thread: its future
 * completes from the mailbox reader when the outcome is mailed. Each command
 * (the queueing, a resend, the take-back) goes out through
 * {@link Keeper#callAsync}: on Lettuce no thread waits for its reply, on the
 * other drivers it is one short call on the Padlock's async threads.
 * Cancelling the future takes the wait back ({@code LOCK.CANCEL}) and gives
 * back a grant that raced it.
 */
final class AsyncWait {
    private final Padlock pad;
    private final Keeper k;
    private final Kind kind;
    private final LongFunction<List<String>> make;
    private final long deadline;
    private final boolean forever;
    private final List<String> giveBack;
    private final String rid;
    final CompletableFuture<Waits.Waited> result = new CompletableFuture<>();
    private volatile List<String> sent = List.of();
    private final java.util.concurrent.atomic.AtomicBoolean back = new java.util.concurrent.atomic.AtomicBoolean();
    private int attempt;

    private AsyncWait(Padlock pad, Keeper k, Kind kind, LongFunction<List<String>> make, long deadline,
            boolean forever, List<String> giveBack) {
        this.pad = pad;
        this.k = k;
        this.kind = kind;
        this.make = make;
        this.deadline = deadline;
        this.forever = forever;
        this.giveBack = giveBack;
        this.rid = pad.nextId();
    }

    static CompletableFuture<Waits.Waited> start(Padlock pad, Keeper k, Kind kind,
            LongFunction<List<String>> make, long deadline, boolean forever, List<String> giveBack) {
        AsyncWait w = new AsyncWait(pad, k, kind, make, deadline, forever, giveBack);
        w.result.whenComplete((v, e) -> {
            if (e instanceof CancellationException) {
                pad.async.execute(w::takeBack);
            }
        });
        k.serial.execute(w::send);
        return w.result;
    }

    /** Queues the request (again, with the same id): answered at once, or its outcome mailed. */
    private void send() {
        if (result.isDone()) {
            return;
        }
        Mailman m = k.mailman;
        long leftMs = forever ? 0 : Math.max(1, TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime()));
        List<String> args = new ArrayList<>(make.apply(leftMs));
        int at = args.indexOf("BLOCK");
        args.add(at + 2, "MAILBOX");
        args.add(at + 3, m.mailboxFor(args));
        args.add("ID");
        args.add(rid);
        sent = args;
        CompletableFuture<String> slot = m.register(rid);
        long sentAt = System.nanoTime();
        long mailEpoch = m.epoch;
        k.callAsync(5000, args).whenComplete((r, e) -> {
            if (e != null) {
                m.forget(rid);
                Throwable cause = Replies.cause(e);
                if (cause instanceof LinkException
                        || cause instanceof ReplyException re && "TRYAGAIN".equals(re.code())) {
                    again((RuntimeException) cause);
                } else {
                    result.completeExceptionally(cause);
                }
                return;
            }
            if (result.isCancelled()) {
                m.forget(rid);
                takeBack(); // cancelled while it was being queued
                return;
            }
            queued(r, slot, sentAt, mailEpoch);
        });
    }

    /** The keeper's answer to the queueing: the grant at once, or WAITING and its outcome mailed. */
    private void queued(Keeper.Reply r, CompletableFuture<String> slot, long sentAt, long mailEpoch) {
        Mailman m = k.mailman;
        if (!"WAITING".equals(String.valueOf(r.value()))) {
            m.forget(rid);
            result.complete(new Waits.Waited(r.value(), null, sentAt, attempt > 0,
                    r.value() == null ? null : rid, r.epoch()));
            return;
        }
        long epoch = r.epoch();
        // A replaced keeper drops the queued wait (a failed mailbox connection
        // completes every slot itself).
        if (!k.queuedOn(epoch, slot) || m.epoch != mailEpoch) {
            slot.complete(null);
        }
        if (!forever) {
            long limit = TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime()) + 5000;
            slot.completeOnTimeout(null, Math.max(limit, 1), TimeUnit.MILLISECONDS);
        }
        slot.whenComplete((outcome, e) -> {
            m.forget(rid);
            if (outcome == null) {
                // The mailbox or the keeper connection failed, or no outcome in
                // time: sent again (a resend answers the grant made meanwhile).
                k.serial.execute(() -> again(new LinkException("a mailbox wait's connection was replaced", null)));
                return;
            }
            try {
                // Granted while queued on the keeper: bound there if it lives.
                Object reply = MailWait.parse(outcome);
                result.complete(new Waits.Waited(reply, null, sentAt, attempt > 0, reply == null ? null : rid,
                        epoch));
            } catch (RuntimeException ex) {
                result.completeExceptionally(ex);
            }
        });
    }

    private void again(RuntimeException why) {
        if (result.isDone()) {
            return;
        }
        if (!forever && System.nanoTime() - deadline > 0) {
            result.completeExceptionally(new LinkException("the wait on " + kind.route() + " could not be queued in time", why));
            return;
        }
        long ms = Math.min(500, 20L << Math.min(attempt++, 5));
        pad.scheduler.schedule(() -> k.serial.execute(this::send), ms, TimeUnit.MILLISECONDS);
    }

    /** The caller stopped waiting: the request leaves its queue, and a grant it already had is given back. */
    private void takeBack() {
        List<String> args = sent;
        // Once: a second would give back a grant made to a later request.
        if (args.isEmpty() || !back.compareAndSet(false, true)) {
            return;
        }
        MailWait.takeBackAsync(pad, k, args, rid, giveBack);
    }
}
