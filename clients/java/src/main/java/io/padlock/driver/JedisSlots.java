package io.padlock.driver;

import io.padlock.Link;
import io.padlock.LinkException;
import java.util.List;
import java.util.function.Supplier;

/** Which master serves each slot of a Jedis cluster, as {@code host:port} (the keys of its node pools). */
final class JedisSlots {
    private final Supplier<Link> any;
    private volatile String[] owners;

    JedisSlots(Supplier<Link> any) {
        this.any = any;
    }

    String node(int slot) {
        String[] o = owners;
        if (o == null || o[slot] == null) {
            o = load();
            owners = o;
        }
        if (o[slot] == null) {
            throw new LinkException("no node serves slot " + slot, null);
        }
        return o[slot];
    }

    /** Forgets the map: the next look reads it again (a slot moved). */
    void reset() {
        owners = null;
    }

    /** {@code CLUSTER SLOTS} on a connection borrowed and given back at once. */
    private String[] load() {
        Object got = any.get().callAndClose(5000, List.of("CLUSTER", "SLOTS"));
        String[] out = new String[16384];
        if (got instanceof List<?> ranges) {
            for (Object r : ranges) {
                if (r instanceof List<?> range && range.size() >= 3 && range.get(2) instanceof List<?> master
                        && master.size() >= 2) {
                    String node = master.get(0) + ":" + master.get(1);
                    int from = ((Number) range.get(0)).intValue();
                    int to = ((Number) range.get(1)).intValue();
                    for (int s = Math.max(0, from); s <= Math.min(16383, to); s++) {
                        out[s] = node;
                    }
                }
            }
        }
        return out;
    }
}
