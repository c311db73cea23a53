package io.padlock.driver;

import io.padlock.LinkException;
import io.padlock.ReplyException;
import io.padlock.Tracked;
import java.net.SocketTimeoutException;
import java.util.List;
import java.util.function.Consumer;
import redis.clients.jedis.CommandArguments;
import redis.clients.jedis.Connection;
import redis.clients.jedis.exceptions.JedisConnectionException;
import redis.clients.jedis.exceptions.JedisDataException;

/**
 * A Jedis connection of padlock's own that tracks a key prefix on itself
 * (RESP2: {@code CLIENT TRACKING ... REDIRECT} to its own id, subscribed to
 * {@code __redis__:invalidate}); notices are read by whoever reads it next:
 * {@link #listen} while idle, {@link #call} (a PING) on the way to its reply.
 */
final class JedisTracked implements Tracked {
    private final Connection c;
    private final Consumer<List<String>> heard;

    JedisTracked(Connection c, String prefix, Consumer<List<String>> heard) {
        this.c = c;
        this.heard = heard;
        try {
            c.setSoTimeout(5000);
            Object id = c.executeCommand(args("CLIENT", "ID"));
            c.executeCommand(args("CLIENT", "TRACKING", "ON", "REDIRECT", String.valueOf(id), "BCAST", "PREFIX", prefix));
            c.sendCommand(args("SUBSCRIBE", "__redis__:invalidate"));
            c.getOne();
        } catch (RuntimeException e) {
            discard();
            throw new LinkException("no tracking connection: " + e.getMessage(), e);
        }
    }

    private static CommandArguments args(String... words) {
        CommandArguments ca = new CommandArguments(Commands.named(words[0]));
        for (int i = 1; i < words.length; i++) {
            ca.add(words[i]);
        }
        return ca;
    }

    /** Only PING: a subscribed RESP2 connection runs nothing else. */
    @Override
    public synchronized Object call(long timeoutMs, List<String> args) {
        if (!args.equals(List.of("PING"))) {
            throw new IllegalArgumentException("a subscribed connection only pings");
        }
        try {
            c.setSoTimeout((int) Math.max(1, timeoutMs));
            c.sendCommand(args("PING"));
            while (true) {
                Object frame = Decode.value(c.getOne());
                if (frame instanceof List<?> l && !l.isEmpty() && "pong".equals(l.get(0))) {
                    return "PONG";
                }
                notice(frame);
            }
        } catch (JedisConnectionException e) {
            discard();
            throw new LinkException(e.getMessage(), e);
        } catch (JedisDataException e) {
            throw new ReplyException(e.getMessage());
        }
    }

    @Override
    public synchronized void listen(long waitMs) {
        try {
            c.setSoTimeout((int) Math.max(1, waitMs));
            notice(Decode.value(c.getOne()));
        } catch (JedisConnectionException e) {
            // Nothing came in time: the stream is still at a frame's start.
            if (e.getCause() instanceof SocketTimeoutException) {
                return;
            }
            discard();
            throw new LinkException(e.getMessage(), e);
        }
    }

    private void notice(Object frame) {
        if (frame instanceof List<?> l && l.size() == 3 && "message".equals(l.get(0))) {
            Object keys = l.get(2);
            heard.accept(keys instanceof List<?> k ? k.stream().map(String::valueOf).toList() : null);
        }
    }

    @Override
    public boolean pops() {
        return false;
    }

    @Override
    public void close() {
        discard();
    }

    @Override
    public void discard() {
        try {
            c.close();
        } catch (RuntimeException e) {
            // gone either way
        }
    }
}
