package io.padlock;

import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

/**
 * A counting semaphore ({@code SEM.*}) shaped like
 * {@code java.util.concurrent.Semaphore}. Permits belong to a holder: by
 * default this {@link Padlock}'s id, so every thread of the process draws
 * from and gives back to one count, and any thread may release, as with
 * {@code Semaphore}; {@link #withHolder} gives a unit of work its own
 * permits and lease. Waits are first come, first served.
 */
public final class PadlockSemaphore extends Handle {
    private final String key;
    private final int limit;

    PadlockSemaphore(Padlock pad, String key, int limit, String holder, long ttlMs) {
        super(pad, Kind.LeasedKind.semaphore(key), holder != null ? holder : pad.id(), ttlMs);
        if (limit < 1) {
            throw new IllegalArgumentException("limit must be at least 1");
        }
        this.key = key;
        this.limit = limit;
    }

    public PadlockSemaphore withHolder(String holder) {
        return new PadlockSemaphore(pad, key, limit, holder, ttlMs);
    }

    public String key() {
        return key;
    }

    public int limit() {
        return limit;
    }

    public void acquire() throws InterruptedException {
        acquire(1);
    }

    /** Waits for {@code permits} until granted or interrupted. */
    public void acquire(int permits) throws InterruptedException {
        takeShared(check(permits), -1, true);
    }

    public void acquireUninterruptibly(int permits) {
        boolean interrupted = false;
        while (true) {
            try {
                takeShared(check(permits), -1, false);
                break;
            } catch (InterruptedException e) {
                interrupted = true;
            }
        }
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
    }

    public boolean tryAcquire() {
        return tryAcquire(1);
    }

    /** Only when {@code permits} are free now and nobody waits ahead. */
    public boolean tryAcquire(int permits) {
        try {
            return take(check(permits), 0, false);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
    }

    public boolean tryAcquire(long time, TimeUnit unit) throws InterruptedException {
        return tryAcquire(1, time, unit);
    }

    public boolean tryAcquire(int permits, long time, TimeUnit unit) throws InterruptedException {
        return takeShared(check(permits), Math.max(0, unit.toMillis(time)), true);
    }

    /**
     * {@code take} in this holder's line ({@link HolderLines}): one request
     * of a holder per key at the server at a time, the rest waiting here
     * in order. The server refuses a holder waiting for permits it holds
     * itself (a wait for itself, {@code DEADLOCK}), where
     * {@code java.util.concurrent.Semaphore} waits for another thread's
     * release: the head of the line makes that wait here, until a thread
     * of this Padlock gives permits back, or 50 ms (another process may),
     * then asks again. Such waits are not in the server's queue, so not
     * first come, first served with other processes.
     */
    private boolean takeShared(long permits, long waitMs, boolean interruptibly) throws InterruptedException {
        if (waitMs == 0) {
            return take(permits, 0, interruptibly); // queues nothing at the server
        }
        long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(waitMs);
        HolderLines.Place place = pad.lines.join(key, holder());
        try {
            if (!place.await(waitMs, interruptibly)) {
                return false;
            }
            while (true) {
                long left = waitMs < 0 ? -1 : Math.max(0, TimeUnit.NANOSECONDS.toMillis(end - System.nanoTime()));
                try {
                    return take(permits, left, interruptibly);
                } catch (DeadlockException e) {
                    if (!ownOnly(e)) {
                        throw e;
                    }
                    if (left == 0) {
                        return false;
                    }
                }
                synchronized (pad.semaphoreReleases) {
                    pad.semaphoreReleases.wait(waitMs < 0 ? 50 : Math.max(1, Math.min(left, 50)));
                }
            }
        } finally {
            place.leave();
        }
    }

    public void release() {
        release(1);
    }

    /** {@link #acquire(int)} without a thread waiting: completes (true) once granted. Cancel it to leave the queue. */
    public CompletableFuture<Boolean> acquireAsync(int permits) {
        long n = check(permits);
        CompletableFuture<Boolean> out = new CompletableFuture<>();
        AtomicReference<CompletableFuture<Boolean>> taking = new AtomicReference<>();
        // Its place in this holder's line, left when it ends in any way.
        HolderLines.Place place = pad.lines.join(key, holder());
        out.whenComplete((v, e) -> {
            place.leave();
            CompletableFuture<Boolean> t = taking.get();
            if (t != null) {
                t.cancel(true); // (a grant that raced it is given back by the take)
            }
        });
        place.ahead.whenComplete((x, y) -> takeSharedAsync(n, out, taking));
        return out;
    }

    /**
     * {@link #takeShared} without a thread: at the head of this holder's
     * line, asks the server; a wait for its own permits asks again every
     * 50 ms.
     */
    private void takeSharedAsync(long permits, CompletableFuture<Boolean> out,
            AtomicReference<CompletableFuture<Boolean>> taking) {
        if (out.isDone()) {
            return;
        }
        CompletableFuture<Boolean> t = takeAsync(permits, -1);
        taking.set(t);
        if (out.isDone()) {
            t.cancel(true);
            return;
        }
        t.whenComplete((v, e) -> {
            Throwable c = e == null ? null : Replies.cause(e);
            if (c instanceof DeadlockException d && ownOnly(d)) {
                try {
                    pad.scheduler.schedule(() -> takeSharedAsync(permits, out, taking), 50, TimeUnit.MILLISECONDS);
                } catch (java.util.concurrent.RejectedExecutionException closed) {
                    out.completeExceptionally(d);
                }
            } else if (c != null) {
                out.completeExceptionally(c);
            } else if (!out.complete(v) && Boolean.TRUE.equals(v)) {
                giveAsync(permits); // granted as the caller cancelled: given back
            }
        });
    }

    /** A cycle through this holder and this key alone: a wait for permits this holder holds itself. */
    private boolean ownOnly(DeadlockException e) {
        return e.cycle().stream().allMatch(x -> x.equals(key) || x.equals(holder()));
    }

    /** {@link #release(int)} on one of padlock's threads, for the calling thread's holder. */
    public CompletableFuture<Void> releaseAsync(int permits) {
        return giveAsync(permits);
    }

    /** Gives back {@code permits}; more than the holder has: {@link IllegalMonitorStateException}. */
    public void release(int permits) {
        SharedHold h = mine();
        if (h != null && !h.lost() && permits > h.depth) {
            throw new IllegalMonitorStateException(holder() + " holds " + h.depth + " permit(s) of " + key + ", not " + permits);
        }
        give(check(permits));
        synchronized (pad.semaphoreReleases) {
            pad.semaphoreReleases.notifyAll();
        }
    }

    /** Permits free now (one read). */
    public int availablePermits() {
        Object info = pad.driver.open(key).callAndClose(5000, List.of("SEM.INFO", key));
        if (info == null) {
            return limit;
        }
        return (int) Replies.asLong(Replies.asMap(info).get("available"));
    }

    /** Permits this holder holds (0 when lost). */
    public int heldPermits() {
        SharedHold h = mine();
        return h == null || h.lost() ? 0 : (int) h.depth;
    }

    /** True while this holder holds permits and their lease cannot have run out. */
    public boolean isHeld() {
        SharedHold h = mine();
        return h != null && h.held();
    }

    public void onLost(Runnable listener) {
        this.onLost = listener;
    }

    private int check(int permits) {
        if (permits < 1 || permits > limit) {
            throw new IllegalArgumentException("permits must be 1 to " + limit + ", not " + permits);
        }
        return permits;
    }

    @Override
    List<String> acquireArgs(String holder, long units) {
        return List.of("SEM.ACQUIRE", key, holder, Integer.toString(limit), Long.toString(ttlMs),
                "PERMITS", Long.toString(units));
    }

    @Override
    void took(SharedHold h, Object reply, long units) {
        h.depth = Replies.asLong(reply);
    }

    @Override
    List<String> releaseArgs(String holder, long units) {
        return List.of("SEM.RELEASE", key, holder, "PERMITS", Long.toString(units));
    }

    @Override
    boolean released(SharedHold h, Object reply, long units) {
        h.depth = Replies.asLong(reply);
        return h.depth == 0;
    }

    @Override
    public String toString() {
        return "PadlockSemaphore[" + key + ", " + limit + "]";
    }
}
