package io.padlock;

/**
 * A connection of padlock's own that hears of writes to keys under a prefix
 * on one node (client tracking, {@code BCAST}): in a cluster, how one
 * connection per node hears of every slot's mailbox. The keys a notice
 * names reach the callback given to {@link Driver#tracked} before the reply
 * to any command sent after they were written.
 */
public interface Tracked extends Link {
    /**
     * Waits up to {@code waitMs} for a notice (or returns at once when one
     * came): a driver whose notices arrive on their own (RESP3 pushes) waits;
     * one whose connection is subscribed (RESP2) reads a notice meanwhile.
     */
    void listen(long waitMs) throws InterruptedException;

    /**
     * Whether this connection runs commands besides {@code PING} (RESP3,
     * tracking with {@code NOLOOP}): mailboxes are popped on it; otherwise on
     * the keeper.
     */
    boolean pops();
}
