package io.padlock;

import java.util.ArrayList;
import java.util.List;
import java.util.PriorityQueue;
import java.util.concurrent.Executor;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;

/**
 * Every watched hold's rounds, on one thread per {@link Padlock}, each
 * round run on the Padlock's scheduler when it is due. An executor's own
 * periodic tasks would do the same, but waking a pool thread whenever a
 * task becomes the earliest (one with every uncontended acquire) and
 * removing each on release: here an acquire wakes nothing unless its
 * round comes first, and the rounds of holds let go are dropped in bulk.
 */
final class Watcher {
    /** A hold's rounds, every {@code everyNanos} after the last one ended, until cancelled. */
    static final class Ticket {
        private final Runnable round;
        private final long everyNanos;
        private volatile boolean cancelled;

        private Ticket(Runnable round, long everyNanos) {
            this.round = round;
            this.everyNanos = everyNanos;
        }

        void cancel() {
            cancelled = true;
        }
    }

    private record Round(long at, long seq, Ticket ticket) implements Comparable<Round> {
        @Override
        public int compareTo(Round o) {
            int c = Long.compare(at - o.at, 0);
            return c != 0 ? c : Long.compare(seq, o.seq);
        }
    }

    private final Executor runner;
    private final String name;
    private final PriorityQueue<Round> queue = new PriorityQueue<>();
    private Thread thread;
    private long seq;
    private int purgeAt = 64;
    private boolean closed;
    /** How often the thread looked at the queue (for tests). */
    long wakes;

    Watcher(Executor runner, String name) {
        this.runner = runner;
        this.name = name;
    }

    /** Runs {@code round} every {@code everyMs}, the first time {@code everyMs} from now. */
    Ticket every(long everyMs, Runnable round) {
        Ticket t = new Ticket(round, TimeUnit.MILLISECONDS.toNanos(everyMs));
        add(t);
        return t;
    }

    private synchronized void add(Ticket t) {
        if (closed) {
            return;
        }
        Round r = new Round(System.nanoTime() + t.everyNanos, seq++, t);
        queue.add(r);
        if (queue.size() >= purgeAt) {
            queue.removeIf(x -> x.ticket.cancelled);
            purgeAt = Math.max(64, 2 * queue.size());
        }
        if (thread == null) {
            thread = new Thread(this::run, name);
            thread.setDaemon(true);
            thread.start();
        } else if (queue.peek() == r) {
            notifyAll(); // only a round earlier than every other moves the wake-up
        }
    }

    synchronized int rounds() {
        return queue.size();
    }

    synchronized void close() {
        closed = true;
        queue.clear();
        notifyAll();
    }

    private void run() {
        List<Ticket> due = new ArrayList<>();
        while (true) {
            synchronized (this) {
                while (!closed && (queue.isEmpty() || queue.peek().at - System.nanoTime() > 0)) {
                    long waitNanos = queue.isEmpty() ? Long.MAX_VALUE : queue.peek().at - System.nanoTime();
                    try {
                        TimeUnit.NANOSECONDS.timedWait(this, Math.max(waitNanos, 1));
                    } catch (InterruptedException e) {
                        return;
                    }
                    wakes++;
                }
                if (closed) {
                    return;
                }
                while (!queue.isEmpty() && queue.peek().at - System.nanoTime() <= 0) {
                    Ticket t = queue.poll().ticket;
                    if (!t.cancelled) {
                        due.add(t);
                    }
                }
            }
            for (Ticket t : due) {
                try {
                    runner.execute(() -> {
                        try {
                            t.round.run();
                        } finally {
                            if (!t.cancelled) {
                                add(t);
                            }
                        }
                    });
                } catch (RejectedExecutionException e) {
                    return; // the Padlock is closing
                }
            }
            due.clear();
        }
    }
}
