package io.padlock;

/** Where padlock gets its {@link Link}s: one adapter per driver. */
public interface Driver extends AutoCloseable {
    /** A connection to the node that serves {@code key} (in a cluster, its slot's master). */
    Link open(String key);

    /**
     * A connection of padlock's own to that node, not taken from the
     * application's pool (the keeper's and the mailbox reader's: they live as
     * long as the Padlock holds anything). By default {@link #open}.
     */
    default Link dedicated(String key) {
        return open(key);
    }

    /**
     * Which keeper serves {@code key}: the holds of one Padlock that share it
     * share one connection. One per server by default; a cluster driver
     * names the key's slot (its mailbox must share the slot).
     */
    default String node(String key) {
        return "";
    }

    /** Whether waits and losses may go through a mailbox ({@code MAILBOX}): not in a cluster. */
    default boolean mailbox() {
        return true;
    }

    /**
     * Whether its links {@link Link#send} without waiting (the driver has
     * futures of its own): then padlock's async forms hold no thread while a
     * command is out.
     */
    default boolean futures() {
        return false;
    }

    /** Frees what the adapter made itself; the application's client stays open. */
    @Override
    default void close() {}
}
