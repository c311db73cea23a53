package io.padlock;

/** The server answered an error; {@link #code()} is its first word. */
public class ReplyException extends PadlockException {
    private static final long serialVersionUID = 1L;

    public ReplyException(String message) {
        super(message);
    }

    /** {@code NOTHELD}, {@code DEADLOCK}, {@code TRYAGAIN}, {@code WRONGTYPE}, {@code OOM}, {@code ERR}, ... */
    public String code() {
        String m = getMessage() == null ? "" : getMessage().strip();
        int sp = m.indexOf(' ');
        return sp < 0 ? m : m.substring(0, sp);
    }
}
