package io.padlock.driver;

import io.lettuce.core.codec.StringCodec;
import io.lettuce.core.output.CommandOutput;
import java.nio.ByteBuffer;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;

/**
 * Any reply as {@code Long}, {@code String}, {@code Double}, {@code Boolean},
 * nested {@code List}s or {@code null}: Lettuce's outputs are typed per
 * command, and padlock's replies mix integers, nil, arrays and maps (a RESP3
 * map arrives as its flat key, value list).
 */
final class TreeOutput extends CommandOutput<String, String, Object> {
    /** Open arrays, innermost first, each with the elements it still waits for. */
    private final Deque<List<Object>> open = new ArrayDeque<>();
    private final Deque<Integer> wanted = new ArrayDeque<>();

    TreeOutput() {
        super(StringCodec.UTF8, null);
    }

    private void add(Object v) {
        if (open.isEmpty()) {
            output = v;
            return;
        }
        open.peek().add(v);
        int left = wanted.pop() - 1;
        if (left > 0) {
            wanted.push(left);
            return;
        }
        List<Object> done = open.pop();
        add(done);
    }

    private void start(int count) {
        if (count < 0) {
            add(null);
        } else if (count == 0) {
            add(new ArrayList<>());
        } else {
            open.push(new ArrayList<>(count));
            wanted.push(count);
        }
    }

    /** Every aggregate (array, set, push; a map as twice its count) arrives here. */
    @Override
    public void multi(int count) {
        start(count);
    }

    @Override
    public void set(ByteBuffer bytes) {
        add(bytes == null ? null : StringCodec.UTF8.decodeValue(bytes));
    }

    @Override
    public void setSingle(ByteBuffer bytes) {
        set(bytes);
    }

    @Override
    public void set(long integer) {
        add(integer);
    }

    @Override
    public void set(double number) {
        add(number);
    }

    @Override
    public void set(boolean value) {
        add(value);
    }
}
