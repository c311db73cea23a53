package io.padlock;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * Grants that wait for replicas ({@link Padlock.Builder#replicas}): a fresh
 * acquire is reported only once {@code count} replicas have it
 * ({@code WAIT}, and with {@link #withAof} also {@code WAITAOF}), so that a
 * failover within that time cannot hand the lock to another holder. Short of
 * that the grant is given back and the acquire fails as a timed-out one
 * does, or with {@link #warnOnShortfall} it is kept and logged. A final
 * release waits the same way and logs a shortfall. The {@code WAIT} runs on
 * the shared keeper connection: while a replica lags it holds that
 * connection up to {@code timeout}.
 */
public record Replicas(int count, Duration timeout, boolean warnOnly, boolean aof) {
    public Replicas {
        if (count < 1) {
            throw new IllegalArgumentException("replicas: count must be at least 1");
        }
        if (timeout == null || timeout.toMillis() < 1) {
            throw new IllegalArgumentException("replicas: timeout must be at least 1 ms (WAIT 0 would wait for ever)");
        }
    }

    /** {@code count} replicas within 500 ms; a shortfall gives the grant back. */
    public static Replicas of(int count) {
        return new Replicas(count, Duration.ofMillis(500), false, false);
    }

    public Replicas withTimeout(Duration timeout) {
        return new Replicas(count, timeout, warnOnly, aof);
    }

    /** Keeps a grant short of its replicas, with a log line, instead of giving it back. */
    public Replicas warnOnShortfall() {
        return new Replicas(count, timeout, true, aof);
    }

    /** Also waits until they wrote it to their AOF ({@code WAITAOF}, Redis 7.2+). */
    public Replicas withAof() {
        return new Replicas(count, timeout, warnOnly, true);
    }

    List<List<String>> waitCommands() {
        String ms = Long.toString(timeout.toMillis());
        List<List<String>> out = new ArrayList<>();
        out.add(List.of("WAIT", Integer.toString(count), ms));
        if (aof) {
            out.add(List.of("WAITAOF", "0", Integer.toString(count), ms));
        }
        return out;
    }

    /** How many replicas have every write so far, by the replies to {@link #waitCommands}. */
    long counted(List<Object> replies) {
        long n = Replies.asLong(replies.get(0));
        if (aof && replies.size() > 1) {
            n = Math.min(n, Replies.asLong(Replies.asList(replies.get(1)).get(1)));
        }
        return n;
    }
}
