package io.padlock;

import java.util.ArrayList;
import java.util.List;

/**
 * Following a resharding: a request answered {@code MOVED} is sent again,
 * with its own request-id, to the slot's new owner (which remembers the id
 * when the slot moved atomically), at most {@link #MAX} times.
 */
final class Moves {
    static final int MAX = 8;

    private Moves() {}

    /**
     * Whether {@code e} is a redirect to follow for {@code route}'s slot on
     * its {@code moves}-th one; if so the driver has read its slot map again.
     */
    static boolean follow(Padlock pad, String route, ReplyException e, int moves) {
        if (!"MOVED".equals(e.code()) || !pad.driver.cluster() || moves >= MAX) {
            return false;
        }
        pad.driver.moved(route);
        return true;
    }

    /** A rerouted request's {@code MAILBOX}: the new node's {@code mailman}'s, or none without one. */
    static List<String> readdressed(List<String> sent, Mailman mailman) {
        int at = sent.indexOf("MAILBOX");
        if (at < 0 || at + 1 >= sent.size()) {
            return sent;
        }
        List<String> cmd = new ArrayList<>(sent);
        if (mailman == null) {
            cmd.subList(at, at + 2).clear();
        } else {
            cmd.set(at + 1, mailman.mailboxFor(cmd));
        }
        return cmd;
    }
}
