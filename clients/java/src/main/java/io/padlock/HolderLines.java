package io.padlock;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * Where this process's waits of one holder on one key line up, so that the
 * server sees at most one of them at a time. The server's wait-for graph
 * counts a holder as one party that waits for one key at a time; a holder
 * that threads share (a semaphore's default, the process's) with two
 * requests queued at once looks stuck on itself as soon as either is
 * (queued behind the other, or behind permits a sibling took meanwhile),
 * and then another holder queued behind it is told {@code DEADLOCK} though
 * the sibling threads will release. In line, only the head asks the server;
 * the rest wait here, first come, first served, and a line is dropped when
 * its last user leaves (no table that grows with keys ever used).
 */
final class HolderLines {
    /** One key and holder's line: threads and futures alike wait for the one before them to leave. */
    static final class Line {
        private CompletableFuture<Void> tail = CompletableFuture.completedFuture(null);
        private int users;

        /** Puts {@code mine} last; the returned future completes when the one before it leaves. */
        synchronized CompletableFuture<Void> behind(CompletableFuture<Void> mine) {
            CompletableFuture<Void> before = tail;
            tail = mine;
            return before;
        }
    }

    private final ConcurrentHashMap<String, Line> lines = new ConcurrentHashMap<>();

    private static String name(String key, String holder) {
        return key.length() + ":" + key + holder;
    }

    /** The line of {@code key} and {@code holder}, counted as used until {@link #leave}. */
    Line enter(String key, String holder) {
        return lines.compute(name(key, holder), (n, l) -> {
            Line line = l == null ? new Line() : l;
            line.users++;
            return line;
        });
    }

    /**
     * Leaves {@code line}: the next one ({@code mine}'s) goes once every
     * one before it left too, so a wait that gives up in line never lets
     * the next pass the head still at the server.
     */
    void leave(String key, String holder, Line line, CompletableFuture<Void> before, CompletableFuture<Void> mine) {
        before.whenComplete((x, y) -> {
            mine.complete(null);
            lines.computeIfPresent(name(key, holder), (n, l) -> l != line || --l.users > 0 ? l : null);
        });
    }

    /**
     * Waits for {@code before} to leave: false when {@code waitMs} (when not
     * negative) ran out first; uninterruptibly unless {@code interruptibly}.
     */
    static boolean await(CompletableFuture<Void> before, long waitMs, boolean interruptibly)
            throws InterruptedException {
        try {
            if (!interruptibly && waitMs < 0) {
                before.join();
            } else if (waitMs < 0) {
                before.get();
            } else {
                before.get(waitMs, TimeUnit.MILLISECONDS);
            }
            return true;
        } catch (TimeoutException e) {
            return false;
        } catch (ExecutionException e) {
            return true; // lines are left by completing, never by failing
        }
    }

    /** Lines in use (tests: none are left once every wait ended). */
    int size() {
        return lines.size();
    }
}
