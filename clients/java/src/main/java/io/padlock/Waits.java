package io.padlock;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.LongFunction;

/**
 * A blocking wait and what it got: through the keeper's mailbox
 * ({@link MailWait}) where the server has it, else on a connection of its
 * own.
 */
final class Waits {
    private Waits() {}

    /**
     * A wait, on a connection of its own (handed back after), with one
     * request-id: a resend after a failed connection asks for the same
     * request, which the server answers with the grant it made meanwhile or
     * puts back in the queue. {@code make} builds the command from the ms
     * left ({@code 0}: no end).
     */
    static Waited await(Padlock pad, Kind kind, LongFunction<List<String>> make, long deadline, boolean forever,
            boolean interruptibly, List<String> giveBack) throws InterruptedException {
        Keeper k = pad.keeper(kind.route());
        if (k.mailman != null) {
            return MailWait.await(pad, k, kind, make, deadline, forever, giveBack);
        }
        String id = pad.nextId();
        int attempt = 0;
        while (true) {
            long leftMs = forever ? 0 : Math.max(1, TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime()));
            List<String> args = new ArrayList<>(make.apply(leftMs));
            args.add("ID");
            args.add(id);
            Link wait = pad.driver.dedicated(kind.route());
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

    /**
     * A {@code MOVED} reply to a wait (a resharding; up to 8 redirects): the
     * driver reads its slot map again, and a hold of {@code holder} holding
     * nothing ends, so that the wait, sent again, goes to the slot's new
     * owner and its grant is kept there. False: not a redirect to follow.
     */
    static boolean moved(Padlock pad, Kind kind, String holder, ReplyException e, int moves) {
        if (!Moves.follow(pad, kind.route(), e, moves)) {
            return false;
        }
        SharedHold h = pad.existing(kind, holder);
        if (h != null) {
            h.io.lock();
            try {
                if (h.depth == 0) {
                    h.finish(true);
                }
            } finally {
                h.io.unlock();
            }
        }
        return true;
    }

    /** Pauses before a wait is asked again; false when its time is up (a wait without end never is). */
    static boolean again(int attempt, long deadline, boolean forever) {
        if (forever) {
            Padlock.pause(attempt, System.nanoTime() + TimeUnit.SECONDS.toNanos(1));
            return true;
        }
        return Padlock.pause(attempt, deadline);
    }

    /**
     * What a wait got: the reply, and for a grant on a connection of its own
     * that connection (a {@code KEEP} grant is bound to it until it is bound
     * to the keeper); null for a grant through the mailbox.
     */
    record Waited(Object reply, Link link, long sentAt, boolean resent, String rid, long epoch) {
        Waited(Object reply, Link link, long sentAt, boolean resent) {
            this(reply, link, sentAt, resent, null, -1);
        }
    }
}
