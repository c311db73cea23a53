package io.padlock;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.LongFunction;

/**
 * A wait without a connection of its own: queued on the keeper with
 * {@code BLOCK ... MAILBOX}, answered at once (the grant, or {@code WAITING}),
 * its outcome mailed later. No thread and no connection per wait but the
 * caller's own, parked. An interrupt takes the wait back
 * ({@code LOCK.CANCEL}) and gives back a grant that raced it.
 */
final class MailWait {
    private MailWait() {}

    /** How much later than its {@code BLOCK} timeout an outcome may be mailed at most (ms). */
    private static final long SLACK_MS = 5000;

    static Waits.Waited await(Padlock pad, Keeper k, Kind kind, LongFunction<List<String>> make, long deadline,
            boolean forever, List<String> giveBack) throws InterruptedException {
        Mailman m = k.mailman;
        String rid = null;
        int attempt = 0;
        while (true) {
            long leftMs = forever ? 0 : Math.max(1, TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime()));
            List<String> args = new ArrayList<>(make.apply(leftMs));
            int at = args.indexOf("BLOCK");
            args.add(at + 2, "MAILBOX");
            args.add(at + 3, m.mailboxFor(args));
            args.add("ID");
            // One id for every sending: a resend is answered with the grant
            // made meanwhile, or queued again.
            rid = rid != null ? rid : pad.nextId();
            args.add(rid);
            CompletableFuture<String> slot = m.register(rid);
            long sentAt = System.nanoTime();
            try {
                long mailEpoch = m.epoch;
                Keeper.Reply r = k.call(5000, args);
                if (!"WAITING".equals(String.valueOf(r.value()))) {
                    return new Waits.Waited(r.value(), null, sentAt, attempt > 0, r.value() == null ? null : rid,
                            r.epoch());
                }
                String outcome = outcome(k, m, slot, r.epoch(), mailEpoch, forever ? 0 : leftMs + SLACK_MS);
                if (outcome != null) {
                    // Granted while queued on the keeper: a KEEP grant is bound
                    // there, with the mailbox, if that connection still lives.
                    Object reply = parse(outcome);
                    return new Waits.Waited(reply, null, sentAt, attempt > 0, reply == null ? null : rid,
                            r.epoch());
                }
                // A connection was replaced: the request is sent again.
            } catch (LinkException e) {
                if (Thread.interrupted()) {
                    // A driver that answers an interrupt with a failed call.
                    takeBack(pad, k, args, rid, giveBack);
                    throw new InterruptedException();
                }
                // sent again below
            } catch (ReplyException e) {
                if (!"TRYAGAIN".equals(e.code())) {
                    throw e;
                }
            } catch (InterruptedException e) {
                takeBack(pad, k, args, rid, giveBack);
                throw e;
            } finally {
                m.forget(rid);
            }
            if (!Waits.again(attempt++, deadline, forever)) {
                throw new LinkException("the wait on " + kind.route() + " could not be queued in time", null);
            }
        }
    }

    /** The mailed outcome, or null when a connection was replaced meanwhile. */
    private static String outcome(Keeper k, Mailman m, CompletableFuture<String> slot, long epoch, long mailEpoch,
            long limitMs) throws InterruptedException {
        long end = limitMs == 0 ? Long.MAX_VALUE : System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(limitMs);
        while (true) {
            try {
                String got = slot.get(Mailman.POLL_MS, TimeUnit.MILLISECONDS);
                if (got != null) {
                    return got;
                }
                return null; // the mailbox connection failed
            } catch (TimeoutException e) {
                if (k.epoch() != epoch || m.epoch != mailEpoch) {
                    return null;
                }
                if (System.nanoTime() - end > 0) {
                    throw new LinkException("no outcome of the wait within " + limitMs + " ms", e);
                }
            } catch (ExecutionException e) {
                return null;
            }
        }
    }

    /** A mailed reply as the blocked form would have given it. */
    static Object parse(String outcome) {
        if (outcome.equals("nil")) {
            return null;
        }
        if (outcome.startsWith("-")) {
            throw new ReplyException(outcome.substring(1));
        }
        if (outcome.contains(",")) {
            List<Object> out = new ArrayList<>();
            for (String f : outcome.split(",")) {
                out.add(Long.parseLong(f));
            }
            return out;
        }
        return Long.parseLong(outcome);
    }

    /** The caller stopped waiting: the request leaves its queue, and a grant it already had is given back. */
    static void takeBack(Padlock pad, Keeper k, List<String> args, String rid, List<String> giveBack) {
        boolean interrupted = Thread.interrupted();
        try {
            if (Long.valueOf(1).equals(k.call(5000, cancelOf(args, rid)).value())) {
                return;
            }
            if (grantedMeanwhile(pad, args, k.call(5000, probeOf(args)).value())) {
                k.call(5000, giveBack);
            }
        } catch (RuntimeException e) {
            cannotTakeBack(pad, args, e);
        } finally {
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /** {@link #takeBack} without a thread waiting for its replies ({@link Keeper#callAsync}). */
    static CompletableFuture<Void> takeBackAsync(Padlock pad, Keeper k, List<String> args, String rid,
            List<String> giveBack) {
        CompletableFuture<Void> done = CompletableFuture.completedFuture(null);
        return k.callAsync(5000, cancelOf(args, rid))
                .thenCompose(cancelled -> Long.valueOf(1).equals(cancelled.value()) ? done
                        : k.callAsync(5000, probeOf(args)).thenCompose(got ->
                                grantedMeanwhile(pad, args, got.value())
                                        ? k.callAsync(5000, giveBack).thenApply(r -> (Void) null)
                                        : done))
                .exceptionally(e -> {
                    cannotTakeBack(pad, args, Replies.cause(e));
                    return null;
                });
    }

    /** {@code LOCK.CANCEL key holder request-id} for a queued request. */
    private static List<String> cancelOf(List<String> args, String rid) {
        boolean multi = args.get(0).equalsIgnoreCase("LOCK.MACQUIRE");
        String key = multi ? args.get(2) : args.get(1);
        String holder = multi ? args.get(2 + Integer.parseInt(args.get(1))) : args.get(2);
        return List.of("LOCK.CANCEL", key, holder, rid);
    }

    /** The request again with its id, waiting 1 ms: it answers the grant it had, if any. */
    private static List<String> probeOf(List<String> args) {
        List<String> probe = new ArrayList<>(args);
        probe.set(probe.indexOf("BLOCK") + 1, "1");
        return probe;
    }

    private static boolean grantedMeanwhile(Padlock pad, List<String> args, Object got) {
        if (got == null || "WAITING".equals(String.valueOf(got))) {
            return false;
        }
        pad.log("an interrupted wait on " + cancelOf(args, "").get(1) + " was granted meanwhile: given back");
        return true;
    }

    private static void cannotTakeBack(Padlock pad, List<String> args, Throwable e) {
        pad.log("could not take back an interrupted wait on " + cancelOf(args, "").get(1) + ": " + e);
    }
}
