package io.padlock;

import java.util.HashMap;
import java.util.List;
import java.util.Map;

/** Reading replies the same whether they came as RESP2 arrays or RESP3 maps. */
final class Replies {
    private Replies() {}

    /** A field map from {@code *.INFO}'s flat array or map; empty for nil. */
    static Map<String, Object> asMap(Object reply) {
        Map<String, Object> out = new HashMap<>();
        if (reply instanceof Map<?, ?> m) {
            m.forEach((k, v) -> out.put(String.valueOf(k), v));
        } else if (reply instanceof List<?> l) {
            for (int i = 0; i + 1 < l.size(); i += 2) {
                out.put(String.valueOf(l.get(i)), l.get(i + 1));
            }
        }
        return out;
    }

    static long asLong(Object v) {
        if (v instanceof Number n) {
            return n.longValue();
        }
        if (v instanceof String s) {
            return Long.parseLong(s.strip());
        }
        throw new PadlockException("expected an integer reply, got " + v);
    }

    /** What a future failed with, out of the {@code CompletionException} around it. */
    static Throwable cause(Throwable e) {
        return e instanceof java.util.concurrent.CompletionException && e.getCause() != null ? e.getCause() : e;
    }

    static List<?> asList(Object v) {
        if (v instanceof List<?> l) {
            return l;
        }
        throw new PadlockException("expected an array reply, got " + v);
    }
}
