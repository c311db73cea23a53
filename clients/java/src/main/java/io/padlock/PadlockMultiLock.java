package io.padlock;

import java.util.ArrayList;
import java.util.List;

/**
 * All or nothing over several keys ({@code LOCK.MACQUIRE}): either every key
 * is taken (or reentered) by the holder, or none. A wait queues for all keys
 * at once. In a cluster, the keys must share a {@code {hash tag}}.
 */
public final class PadlockMultiLock extends LockBase {
    PadlockMultiLock(Padlock pad, List<String> keys, String holder, long ttlMs) {
        super(pad, new Kind.LockKind(checked(keys)), holder, ttlMs);
    }

    private static List<String> checked(List<String> keys) {
        if (keys.isEmpty()) {
            throw new IllegalArgumentException("a multi-lock needs at least one key");
        }
        if (keys.stream().distinct().count() != keys.size()) {
            throw new IllegalArgumentException("a multi-lock names each key once: " + keys);
        }
        return keys;
    }

    public PadlockMultiLock withHolder(String holder) {
        return new PadlockMultiLock(pad, kind.keys, holder, ttlMs);
    }

    public List<String> keys() {
        return kind.keys;
    }

    /** The fence of each key, in order, for this thread's hold; empty when not held. */
    public List<Long> fences() {
        SharedHold h = mine();
        if (h == null || !h.held()) {
            return List.of();
        }
        return h.fences;
    }

    public int getHoldCount() {
        SharedHold h = mine();
        return h == null || h.lost() ? 0 : (int) h.depth;
    }

    private List<String> withKeys(String command) {
        List<String> a = new ArrayList<>();
        a.add(command);
        a.add(Integer.toString(kind.keys.size()));
        a.addAll(kind.keys);
        return a;
    }

    @Override
    List<String> acquireArgs(String holder, long units) {
        List<String> a = withKeys("LOCK.MACQUIRE");
        a.add(holder);
        a.add(Long.toString(ttlMs));
        return a;
    }

    @Override
    void took(SharedHold h, Object reply, long units) {
        List<Long> fences = new ArrayList<>();
        for (Object f : Replies.asList(reply)) {
            fences.add(Replies.asLong(f));
        }
        h.fences = List.copyOf(fences);
        h.fence = fences.get(0);
        h.depth++;
    }

    @Override
    List<String> releaseArgs(String holder, long units) {
        List<String> a = withKeys("LOCK.MRELEASE");
        a.add(holder);
        return a;
    }

    @Override
    boolean released(SharedHold h, Object reply, long units) {
        h.depth = Math.max(0, h.depth - 1);
        return h.depth == 0;
    }

    @Override
    public String toString() {
        return "PadlockMultiLock" + kind.keys;
    }
}
