package io.padlock;

import java.util.List;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executor;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Function;

/**
 * One connection padlock uses on its own: a {@code KEEP} lease binds to the
 * connection that asked for it, and a wait occupies its connection, so holds
 * and waits never share the driver's multiplexed or pooled connections with
 * the application. A driver adapter implements it with the driver's own
 * custom-command API.
 */
public interface Link extends AutoCloseable {
    /**
     * Sends one command and waits for its reply. Replies arrive as {@code Long},
     * {@code String}, {@code List<Object>}, {@code Map<Object, Object>} or
     * {@code null}.
     *
     * @param timeoutMs how long the reply may take; longer than any {@code BLOCK} sent
     * @throws ReplyException the server answered an error
     * @throws LinkException the connection failed or the reply did not come in time
     */
    Object call(long timeoutMs, List<String> args);

    /**
     * Sends one command without waiting for its reply, where the driver has
     * futures of its own ({@link Driver#futures}): the future completes with
     * the reply, or fails with a {@link ReplyException} or a
     * {@link LinkException} (a timeout discards the connection). Commands go
     * out in the order they are sent; the future may complete on the
     * driver's I/O thread, which must never wait on padlock.
     */
    default CompletableFuture<Object> send(long timeoutMs, List<String> args) {
        throw new UnsupportedOperationException("this driver sends and waits");
    }

    /**
     * The same, interruptibly: an interrupt closes the connection (so the
     * server drops a wait on it at once) and throws. The default runs the call
     * on {@code helper}; drivers with their own futures override it.
     */
    default Object callInterruptibly(long timeoutMs, List<String> args, Executor helper)
            throws InterruptedException {
        CompletableFuture<Object> reply = CompletableFuture.supplyAsync(() -> call(timeoutMs, args), helper);
        return await(this, reply, timeoutMs + 1000, cause -> cause instanceof RuntimeException r
                ? r
                : new LinkException("call failed", cause));
    }

    /**
     * Waits for {@code reply} at most {@code timeoutMs} (0: no end). An
     * interrupt, a timeout or a cancellation discards {@code link} (the
     * server drops a wait on it); a failed reply throws what
     * {@code failure} makes of its cause.
     */
    static Object await(Link link, Future<Object> reply, long timeoutMs,
            Function<Throwable, RuntimeException> failure) throws InterruptedException {
        try {
            return timeoutMs <= 0 ? reply.get() : reply.get(timeoutMs, TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            link.discard();
            throw e;
        } catch (TimeoutException e) {
            link.discard();
            throw new LinkException("no reply within " + timeoutMs + " ms", e);
        } catch (ExecutionException e) {
            throw failure.apply(e.getCause());
        } catch (CancellationException e) {
            link.discard();
            throw new LinkException("the connection closed", e);
        }
    }

    /** One read on a connection that goes back right after. */
    default Object callAndClose(long timeoutMs, List<String> args) {
        try {
            Object r = call(timeoutMs, args);
            close();
            return r;
        } catch (LinkException e) {
            discard();
            throw e;
        } catch (RuntimeException e) {
            close();
            throw e;
        }
    }

    /** Back to the driver for reuse: nothing padlock keeps is bound to it. */
    @Override
    void close();

    /** Closed for good: a lease may still be bound to it, or its state is unknown. */
    void discard();
}
