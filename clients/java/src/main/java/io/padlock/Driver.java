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

    /**
     * Whether waits and losses may go through a mailbox ({@code MAILBOX}):
     * in a cluster only where the driver can {@link #tracked track}.
     */
    default boolean mailbox() {
        return true;
    }

    /** Whether keys live in a cluster (a mailbox then shares each request's slot). */
    default boolean cluster() {
        return false;
    }

    /**
     * A node answered {@code MOVED} for {@code key} (a resharding): the slot
     * map this adapter and its driver keep is read again, so that
     * {@link #node} and {@link #open} name the slot's new owner.
     */
    default void moved(String key) {}

    /**
     * In a cluster, a connection of padlock's own to {@code key}'s node that
     * hears of writes to keys starting with {@code prefix} and hands the keys
     * named to {@code heard} ({@code null}: every key may have changed, a
     * flush); see {@link Tracked}.
     */
    default Tracked tracked(String key, String prefix, java.util.function.Consumer<java.util.List<String>> heard) {
        throw new UnsupportedOperationException("this driver cannot track keys");
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
