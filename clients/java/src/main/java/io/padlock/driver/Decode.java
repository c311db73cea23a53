package io.padlock.driver;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/** Driver replies to the shapes {@link io.padlock.Link#call} promises. */
final class Decode {
    private Decode() {}

    static Object value(Object v) {
        if (v instanceof byte[] b) {
            return new String(b, StandardCharsets.UTF_8);
        }
        if (v instanceof List<?> l) {
            List<Object> out = new ArrayList<>(l.size());
            for (Object o : l) {
                out.add(value(o));
            }
            return out;
        }
        if (v instanceof Map<?, ?> m) {
            Map<Object, Object> out = new LinkedHashMap<>();
            m.forEach((k, x) -> out.put(value(k), value(x)));
            return out;
        }
        if (v instanceof Integer i) {
            return i.longValue();
        }
        return v;
    }
}
