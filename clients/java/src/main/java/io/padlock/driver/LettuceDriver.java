package io.padlock.driver;

import io.lettuce.core.AbstractRedisClient;
import io.lettuce.core.RedisChannelHandler;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisCommandExecutionException;
import io.lettuce.core.RedisConnectionStateListener;
import io.lettuce.core.RedisException;
import io.lettuce.core.RedisFuture;
import io.lettuce.core.RedisURI;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.push.PushListener;
import io.lettuce.core.cluster.RedisClusterClient;
import io.lettuce.core.cluster.SlotHash;
import io.lettuce.core.cluster.models.partitions.RedisClusterNode;
import io.lettuce.core.codec.StringCodec;
import io.lettuce.core.protocol.CommandArgs;
import io.lettuce.core.protocol.ProtocolKeyword;
import io.padlock.Driver;
import io.padlock.Link;
import io.padlock.LinkException;
import io.padlock.ReplyException;
import io.padlock.Tracked;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedDeque;
import java.util.concurrent.Executor;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Consumer;

/**
 * Lettuce: connections of padlock's own (a Lettuce connection is shared by
 * every thread that uses it, and a wait would stall them all), made by the
 * application's {@code RedisClient}, or for a cluster by one client per node
 * on the cluster client's resources; commands through {@code dispatch}.
 * Idle connections are kept for reuse.
 */
public final class LettuceDriver implements Driver {
    private final RedisClient standalone;
    private final RedisClusterClient cluster;
    private final Map<String, RedisClient> nodes = new ConcurrentHashMap<>();
    private final Map<String, ConcurrentLinkedDeque<StatefulRedisConnection<String, String>>> idle =
            new ConcurrentHashMap<>();
    /** Connections padlock closes itself: their disconnect needs no second close. */
    private final Set<Object> closing = ConcurrentHashMap.newKeySet();

    public LettuceDriver(AbstractRedisClient client) {
        if (client instanceof RedisClient r) {
            this.standalone = r;
            this.cluster = null;
        } else if (client instanceof RedisClusterClient c) {
            this.standalone = null;
            this.cluster = c;
        } else {
            throw new IllegalArgumentException("padlock needs a Lettuce RedisClient or RedisClusterClient");
        }
    }

    /** In a cluster, the master of the key's slot: holds of one node share its keeper. */
    @Override
    public String node(String key) {
        if (cluster == null) {
            return "";
        }
        RedisURI uri = master(key).getUri();
        return uri.getHost() + ":" + uri.getPort();
    }

    @Override
    public boolean cluster() {
        return cluster != null;
    }

    /** Reads the cluster's partitions (slot map) again. */
    @Override
    public void moved(String key) {
        if (cluster != null) {
            cluster.refreshPartitions();
        }
    }

    private RedisClusterNode master(String key) {
        RedisClusterNode master = cluster.getPartitions().getMasterBySlot(SlotHash.getSlot(key));
        if (master == null) {
            cluster.refreshPartitions();
            master = cluster.getPartitions().getMasterBySlot(SlotHash.getSlot(key));
        }
        if (master == null) {
            throw new LinkException("no node serves the slot of " + key, null);
        }
        return master;
    }

    /**
     * A RESP3 connection of its own (never pooled) whose tracking notices
     * arrive as pushes, decoded on Lettuce's I/O thread before the replies
     * that follow them.
     */
    @Override
    public Tracked tracked(String key, String prefix, Consumer<List<String>> heard) {
        LettuceLink link = (LettuceLink) open(key);
        StatefulRedisConnection<String, String> c = link.c;
        Semaphore arrived = new Semaphore(0);
        c.addListener((PushListener) push -> {
            if (!"invalidate".equals(push.getType())) {
                return;
            }
            List<Object> content = push.getContent(StringCodec.UTF8::decodeKey);
            Object keys = content.size() > 1 ? content.get(1) : null;
            heard.accept(keys instanceof List<?> l ? l.stream().map(String::valueOf).toList() : null);
            arrived.release();
        });
        try {
            link.call(5000, List.of("CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", prefix, "NOLOOP"));
        } catch (RuntimeException e) {
            link.discard();
            throw e;
        }
        return new Tracked() {
            @Override
            public Object call(long timeoutMs, List<String> args) {
                return link.call(timeoutMs, args);
            }

            @Override
            public void listen(long waitMs) throws InterruptedException {
                if (arrived.tryAcquire(waitMs, TimeUnit.MILLISECONDS)) {
                    arrived.drainPermits();
                }
                if (!c.isOpen()) {
                    throw new LinkException("the tracking connection closed", null);
                }
            }

            @Override
            public boolean pops() {
                return true;
            }

            @Override
            public void close() {
                link.discard();
            }

            @Override
            public void discard() {
                link.discard();
            }
        };
    }

    @Override
    public boolean futures() {
        return true;
    }

    @Override
    public Link open(String key) {
        try {
            RedisClient client = standalone;
            String node = "";
            if (cluster != null) {
                RedisURI uri = master(key).getUri();
                node = uri.getHost() + ":" + uri.getPort();
                // Named, so that CLIENT LIST tells padlock's connections from the application's.
                client = nodes.computeIfAbsent(node, n -> RedisClient.create(cluster.getResources(),
                        RedisURI.builder(uri).withClientName("padlock").build()));
            }
            ConcurrentLinkedDeque<StatefulRedisConnection<String, String>> pool =
                    idle.computeIfAbsent(node, n -> new ConcurrentLinkedDeque<>());
            StatefulRedisConnection<String, String> c;
            while ((c = pool.pollFirst()) != null && !c.isOpen()) {
                c.closeAsync();
            }
            if (c == null) {
                c = client.connect(StringCodec.UTF8);
                // No reconnect and no replay by Lettuce: a connection that
                // drops is closed, so that only padlock resends, with its
                // request-id (and a lease bound to it is not silently kept).
                ((RedisChannelHandler<?, ?>) c).addListener(new RedisConnectionStateListener() {
                    @Override
                    public void onRedisDisconnected(RedisChannelHandler<?, ?> h) {
                        if (!closing.remove(h)) {
                            h.closeAsync();
                        }
                    }
                });
            }
            return new LettuceLink(c, pool, closing);
        } catch (RedisException e) {
            throw new LinkException("no connection: " + e.getMessage(), e);
        }
    }

    @Override
    public void close() {
        idle.values().forEach(p -> p.forEach(c -> {
            closing.add(c);
            c.closeAsync();
        }));
        nodes.values().forEach(RedisClient::shutdownAsync);
    }

    static final class LettuceLink implements Link {
        private final StatefulRedisConnection<String, String> c;
        private final ConcurrentLinkedDeque<StatefulRedisConnection<String, String>> pool;
        private final Set<Object> closing;

        LettuceLink(StatefulRedisConnection<String, String> c,
                ConcurrentLinkedDeque<StatefulRedisConnection<String, String>> pool, Set<Object> closing) {
            this.c = c;
            this.pool = pool;
            this.closing = closing;
        }

        private RedisFuture<Object> dispatch(long timeoutMs, List<String> args) {
            CommandArgs<String, String> ca = new CommandArgs<>(StringCodec.UTF8);
            for (int i = 1; i < args.size(); i++) {
                ca.add(args.get(i));
            }
            try {
                // Lettuce's own command timeout must never end a wait first.
                c.setTimeout(timeoutMs <= 0 ? Duration.ofDays(365) : Duration.ofMillis(timeoutMs + 1000));
                return c.async().dispatch(keyword(args.get(0)), new TreeOutput(), ca);
            } catch (RedisException e) {
                discard();
                throw new LinkException("the connection is closed: " + e.getMessage(), e);
            }
        }

        /**
         * Not interruptible, as a Jedis call is not: an interrupt of the caller
         * must not close a connection other holds share (the keeper); it is
         * kept for the caller to see once the reply is in.
         */
        @Override
        public Object call(long timeoutMs, List<String> args) {
            RedisFuture<Object> f;
            synchronized (this) {
                f = dispatch(timeoutMs, args);
            }
            long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
            boolean interrupted = false;
            try {
                while (true) {
                    try {
                        long left = end - System.nanoTime();
                        return timeoutMs <= 0 ? f.get()
                                : f.get(Math.max(0, left), TimeUnit.NANOSECONDS);
                    } catch (InterruptedException e) {
                        interrupted = true;
                    } catch (TimeoutException e) {
                        discard();
                        throw new LinkException("no reply within " + timeoutMs + " ms", e);
                    } catch (java.util.concurrent.ExecutionException e) {
                        throw failure(e.getCause());
                    } catch (java.util.concurrent.CancellationException e) {
                        discard();
                        throw new LinkException("the connection closed", e);
                    }
                }
            } finally {
                if (interrupted) {
                    Thread.currentThread().interrupt();
                }
            }
        }

        @Override
        public CompletableFuture<Object> send(long timeoutMs, List<String> args) {
            RedisFuture<Object> f;
            try {
                synchronized (this) {
                    f = dispatch(timeoutMs, args);
                }
            } catch (LinkException e) {
                return CompletableFuture.failedFuture(e);
            }
            CompletableFuture<Object> reply = new CompletableFuture<>();
            f.whenComplete((v, e) -> {
                if (e == null) {
                    reply.complete(v);
                } else {
                    reply.completeExceptionally(failure(e instanceof CompletionException
                            && e.getCause() != null ? e.getCause() : e));
                }
            });
            if (timeoutMs > 0) {
                reply.orTimeout(timeoutMs, TimeUnit.MILLISECONDS);
            }
            return reply.handle((v, e) -> {
                if (e instanceof TimeoutException) {
                    discard();
                    throw new LinkException("no reply within " + timeoutMs + " ms", e);
                }
                if (e != null) {
                    throw e instanceof RuntimeException r ? r : new LinkException(String.valueOf(e), e);
                }
                return v;
            });
        }

        @Override
        public Object callInterruptibly(long timeoutMs, List<String> args, Executor helper)
                throws InterruptedException {
            return reply(timeoutMs, args);
        }

        /** Sends and waits; an interrupt or a timeout closes the connection (the server drops a wait on it). */
        private Object reply(long timeoutMs, List<String> args) throws InterruptedException {
            RedisFuture<Object> f;
            synchronized (this) {
                f = dispatch(timeoutMs, args);
            }
            return Link.await(this, f, timeoutMs, this::failure);
        }

        private RuntimeException failure(Throwable cause) {
            if (cause instanceof RedisCommandExecutionException r) {
                return new ReplyException(r.getMessage());
            }
            discard();
            return new LinkException(String.valueOf(cause), cause);
        }

        @Override
        public void close() {
            if (c.isOpen()) {
                pool.offerFirst(c);
            }
        }

        @Override
        public void discard() {
            if (c.isOpen() && closing.add(c)) {
                c.closeAsync();
            }
        }
    }

    static ProtocolKeyword keyword(String name) {
        byte[] raw = name.getBytes(StandardCharsets.UTF_8);
        return new ProtocolKeyword() {
            @Override
            public byte[] getBytes() {
                return raw;
            }

            @Override
            public String toString() {
                return name;
            }
        };
    }
}
