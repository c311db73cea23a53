package io.padlock;

/**
 * Grants that wait for replicas ({@link Replicas}): what a fresh grant and
 * the last release do once the keeper's {@code WAIT} answered.
 */
final class Replicated {
    private Replicated() {}

    /** Whether a grant to {@code holder} now would be a fresh one (not a reentry). */
    static boolean fresh(Padlock pad, Kind kind, String holder) {
        SharedHold prior = pad.existing(kind, holder);
        return prior == null || prior.ended || prior.depth == 0;
    }

    /**
     * A fresh grant is reported only once enough replicas have it
     * ({@link Padlock.Builder#replicas}): short of them it is given back
     * (false, {@code giveBack} run), or kept with a log line.
     */
    static boolean enough(Padlock pad, Kind kind, String holder, Runnable giveBack) {
        Replicas want = pad.replicas;
        SharedHold h = pad.existing(kind, holder);
        if (want == null || h == null) {
            return true;
        }
        long got = 0;
        String why;
        h.io.lock();
        try {
            got = h.replicasHaving(want);
            why = got + " of " + want.count() + " replicas had it within " + want.timeout().toMillis() + " ms";
        } catch (RuntimeException e) {
            why = "the replicas could not be asked (" + e.getMessage() + ")";
        } finally {
            h.io.unlock();
        }
        if (got >= want.count()) {
            return true;
        }
        if (want.warnOnly()) {
            pad.log(kind.route() + ": granted to " + holder + ", but " + why);
            return true;
        }
        pad.log(kind.route() + ": granted to " + holder + ", but " + why + ": released");
        try {
            giveBack.run();
        } catch (RuntimeException e) {
            // gone already: nothing of it is held
        }
        return false;
    }

    /** After the last release (caller holds io): a release short of its replicas is logged. */
    static void released(Padlock pad, Kind kind, SharedHold h) {
        Replicas want = pad.replicas;
        if (want == null) {
            return;
        }
        String why;
        try {
            long got = h.replicasHaving(want);
            if (got >= want.count()) {
                return;
            }
            why = got + " of " + want.count() + " replicas had it within " + want.timeout().toMillis() + " ms";
        } catch (RuntimeException e) {
            why = "the replicas could not be asked (" + e.getMessage() + ")";
        }
        pad.log("the release of " + kind.route() + " by " + h.holder + ": " + why);
    }
}
