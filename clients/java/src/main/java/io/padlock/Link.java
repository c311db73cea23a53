package io.padlock;

import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

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
     * The same, interruptibly: an interrupt closes the connection (so the
     * server drops a wait on it at once) and throws. The default runs the call
     * on {@code helper}; drivers with their own futures override it.
     */
    default Object callInterruptibly(long timeoutMs, List<String> args, Executor helper)
            throws InterruptedException {
        CompletableFuture<Object> reply = CompletableFuture.supplyAsync(() -> call(timeoutMs, args), helper);
        try {
            return reply.get(timeoutMs + 1000, TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            discard();
            throw e;
        } catch (TimeoutException e) {
            discard();
            throw new LinkException("no reply within " + timeoutMs + " ms", e);
        } catch (ExecutionException e) {
            if (e.getCause() instanceof RuntimeException r) {
                throw r;
            }
            throw new LinkException("call failed", e.getCause());
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
