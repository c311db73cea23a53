package io.padlock;

/** Where padlock gets its {@link Link}s: one adapter per driver. */
public interface Driver extends AutoCloseable {
    /** A connection to the node that serves {@code key} (in a cluster, its slot's master). */
    Link open(String key);

    /** Frees what the adapter made itself; the application's client stays open. */
    @Override
    default void close() {}
}
