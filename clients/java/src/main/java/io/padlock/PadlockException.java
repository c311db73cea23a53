package io.padlock;

/** Anything padlock reports that is not a plain "not acquired". */
public class PadlockException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public PadlockException(String message) {
        super(message);
    }

    public PadlockException(String message, Throwable cause) {
        super(message, cause);
    }
}
