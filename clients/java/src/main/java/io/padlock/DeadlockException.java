package io.padlock;

import java.util.Arrays;
import java.util.List;

/**
 * Waiting would have closed a cycle of the server's wait-for graph: nothing
 * was acquired and the caller should release what it holds and try later.
 */
public class DeadlockException extends PadlockException {
    private static final long serialVersionUID = 1L;
    private final List<String> cycle;

    public DeadlockException(String message) {
        super(message);
        String text = message.strip();
        if (text.startsWith("DEADLOCK")) {
            text = text.substring("DEADLOCK".length()).strip();
        }
        this.cycle = text.isEmpty() ? List.of() : List.copyOf(Arrays.asList(text.split(" -> ")));
    }

    /** Holder, key, holder, key, ..., back to the first holder (as the server names them). */
    public List<String> cycle() {
        return cycle;
    }
}
