package io.padlock;

/**
 * The hold is gone: its lease ran out, its key was deleted or replaced, or
 * another holder has it now. The work it guarded must stop. It is an
 * {@link IllegalMonitorStateException} because the thread no longer holds
 * the lock it tries to release.
 */
public class LockLostException extends IllegalMonitorStateException {
    private static final long serialVersionUID = 1L;

    public LockLostException(String message) {
        super(message);
    }
}
