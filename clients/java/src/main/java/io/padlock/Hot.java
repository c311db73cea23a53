package io.padlock;

/**
 * One row of {@code LOCK.TOP}: a key with waiters right now.
 *
 * @param key the key
 * @param kind {@code lock}, {@code sem} or {@code rwlock}
 * @param waiters how many wait for it
 * @param oldestWaitMs how long the longest-waiting of them has waited
 * @param holders how many hold it
 * @param db the key's database
 */
public record Hot(String key, String kind, long waiters, long oldestWaitMs, long holders, long db) {}
