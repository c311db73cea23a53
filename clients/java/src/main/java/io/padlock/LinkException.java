package io.padlock;

/**
 * The connection failed or a reply did not come in time: the request may or
 * may not have been applied. padlock resends it with its request-id, which
 * the server answers without applying it twice.
 */
public class LinkException extends PadlockException {
    private static final long serialVersionUID = 1L;

    public LinkException(String message, Throwable cause) {
        super(message, cause);
    }
}
