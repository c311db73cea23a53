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
 * its last user leaves (no table that grows with keys ever used). It costs
 * no round trip: the keeper sends one command at a time anyway.
 */
final class HolderLines {
    /** One key and holder's line: threads and futures alike wait for the one before them to leave. */
    private static final class Line {
        private CompletableFuture<Void> tail = CompletableFuture.completedFuture(null);
        private int users;
    }

    /** One wait's place in its line, from {@link #join} until {@link #leave}. */
    final class Place {
        private final String name;
        private final Line line;
        private final CompletableFuture<Void> mine = new CompletableFuture<>();
        /** Completes once every wait before this one left. */
        final CompletableFuture<Void> ahead;

        private Place(String name, Line line) {
            this.name = name;
            this.line = line;
            synchronized (line) {
                this.ahead = line.tail;
                line.tail = mine;
            }
        }

        /**
         * Waits for {@link #ahead}: false when {@code waitMs} (when not
         * negative) ran out first; uninterruptibly unless {@code interruptibly}.
         */
        boolean await(long waitMs, boolean interruptibly) throws InterruptedException {
            try {
                if (!interruptibly && waitMs < 0) {
                    ahead.join();
                } else if (waitMs < 0) {
                    ahead.get();
                } else {
                    ahead.get(waitMs, TimeUnit.MILLISECONDS);
                }
                return true;
            } catch (TimeoutException e) {
                return false;
            } catch (ExecutionException e) {
                return true; // places are left by completing, never by failing
            }
        }

        /**
         * Leaves the line: the next wait goes once every one before this
         * one left too, so a wait that gives up in line never lets the next
         * pass the head still at the server.
         */
        void leave() {
            ahead.whenComplete((x, y) -> {
                mine.complete(null);
                lines.computeIfPresent(name, (n, l) -> l != line || --l.users > 0 ? l : null);
            });
        }
    }

    private final ConcurrentHashMap<String, Line> lines = new ConcurrentHashMap<>();

    /** A place at the end of the line of {@code key} and {@code holder}. */
    Place join(String key, String holder) {
        String name = key.length() + ":" + key + holder;
        Line line = lines.compute(name, (n, l) -> {
            Line it = l == null ? new Line() : l;
            it.users++;
            return it;
        });
        return new Place(name, line);
    }

    /** Lines in use (tests: none are left once every wait ended). */
    int size() {
        return lines.size();
    }
}
