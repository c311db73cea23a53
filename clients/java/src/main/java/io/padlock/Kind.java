package io.padlock;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * The commands of one kind of hold that the shared machinery needs: how to
 * renew the lease and how to read whether it still lives. Acquire and release
 * differ enough per kind that each class sends its own.
 */
abstract class Kind {
    final List<String> keys;

    Kind(List<String> keys) {
        this.keys = List.copyOf(keys);
    }

    /** The key the hold's connection is routed by (all keys share its slot). */
    String route() {
        return keys.get(0);
    }

    /** Names the hold in a {@link Padlock}'s registry. */
    abstract String name();

    /** The renewals, each sent with {@code KEEP} and its own request-id. */
    abstract List<List<String>> extend(String holder, long ttlMs, long units);

    /** Reads that tell whether the hold still lives, one per key. */
    List<List<String>> look() {
        List<List<String>> out = new ArrayList<>();
        for (String k : keys) {
            out.add(List.of(infoCommand(), k));
        }
        return out;
    }

    abstract String infoCommand();

    /** The lease left (ms) that one read shows for {@code holder}; -1 when not held. */
    abstract long leaseLeft(Map<String, Object> info, String holder);

    static final class LockKind extends Kind {
        LockKind(List<String> keys) {
            super(keys);
        }

        @Override
        String name() {
            return (keys.size() == 1 ? "lock\0" : "multi\0") + String.join("\0", keys);
        }

        @Override
        List<List<String>> extend(String holder, long ttlMs, long units) {
            List<List<String>> out = new ArrayList<>();
            for (String k : keys) {
                out.add(List.of("LOCK.EXTEND", k, holder, Long.toString(ttlMs), "KEEP"));
            }
            return out;
        }

        @Override
        String infoCommand() {
            return "LOCK.INFO";
        }

        @Override
        long leaseLeft(Map<String, Object> info, String holder) {
            if (!holder.equals(String.valueOf(info.get("holder")))) {
                return -1;
            }
            return Replies.asLong(info.get("ttl"));
        }
    }

    /**
     * Semaphores and read-write locks: a lease per holder, shown in
     * {@code holders} as an array whose {@code ttlAt}th entry is the lease
     * left. For semaphores {@code units} is the permits held (re-created
     * with them during a restart grace).
     */
    static final class LeasedKind extends Kind {
        private final String family;
        private final int ttlAt;

        private LeasedKind(String family, String key, int ttlAt) {
            super(List.of(key));
            this.family = family;
            this.ttlAt = ttlAt;
        }

        static LeasedKind semaphore(String key) {
            return new LeasedKind("SEM", key, 1);
        }

        static LeasedKind readWrite(String key) {
            return new LeasedKind("RWLOCK", key, 3);
        }

        @Override
        String name() {
            return family + "\0" + route();
        }

        @Override
        List<List<String>> extend(String holder, long ttlMs, long units) {
            List<String> cmd = new ArrayList<>(List.of(family + ".EXTEND", route(), holder, Long.toString(ttlMs)));
            if (family.equals("SEM")) {
                cmd.addAll(List.of("PERMITS", Long.toString(Math.max(1, units))));
            }
            cmd.add("KEEP");
            return List.of(cmd);
        }

        @Override
        String infoCommand() {
            return family + ".INFO";
        }

        @Override
        long leaseLeft(Map<String, Object> info, String holder) {
            Object mine = Replies.asMap(info.get("holders")).get(holder);
            return mine == null ? -1 : Replies.asLong(Replies.asList(mine).get(ttlAt));
        }
    }
}
