package io.padlock.driver;

import io.padlock.Driver;
import io.padlock.Link;
import io.padlock.LinkException;
import io.padlock.ReplyException;
import io.padlock.Tracked;
import java.util.List;
import java.util.function.Consumer;
import redis.clients.jedis.CommandArguments;
import redis.clients.jedis.Connection;
import redis.clients.jedis.ConnectionPool;
import redis.clients.jedis.JedisCluster;
import redis.clients.jedis.JedisPooled;
import redis.clients.jedis.RedisClient;
import redis.clients.jedis.RedisClusterClient;
import redis.clients.jedis.UnifiedJedis;
import redis.clients.jedis.commands.ProtocolCommand;
import redis.clients.jedis.exceptions.JedisConnectionException;
import redis.clients.jedis.exceptions.JedisDataException;
import redis.clients.jedis.util.JedisClusterCRC16;

/**
 * Jedis: a connection borrowed from the client's own pool (in a cluster, the
 * pool of the node serving the key's slot), commands through
 * {@code Connection.executeCommand(CommandArguments)}.
 */
@SuppressWarnings("deprecation") // JedisPooled and JedisCluster: deprecated in Jedis 7, still what most code has
public final class JedisDriver implements Driver {
    private final UnifiedJedis jedis;
    /** In a cluster, which node serves each slot (CLUSTER SLOTS, read again when a slot has none). */
    private final JedisSlots slots;

    public JedisDriver(UnifiedJedis jedis) {
        if (!(jedis instanceof JedisPooled || jedis instanceof RedisClient || jedis instanceof JedisCluster
                || jedis instanceof RedisClusterClient)) {
            throw new IllegalArgumentException("padlock needs a JedisPooled, RedisClient, JedisCluster or "
                    + "RedisClusterClient (it borrows connections of its own from their pools)");
        }
        this.jedis = jedis;
        this.slots = new JedisSlots(() -> open("{0}"));
    }

    /**
     * Reads the slot map again: padlock's own, and Jedis' (a command of the
     * cluster client on the key follows the MOVED and renews its cache).
     */
    @Override
    public void moved(String key) {
        slots.reset();
        try {
            if (jedis instanceof JedisCluster jc) {
                jc.exists(key);
            } else if (jedis instanceof RedisClusterClient rc) {
                rc.exists(key);
            }
        } catch (RuntimeException ignored) {
            // the next request meets whatever failed here
        }
    }

    @Override
    public Link open(String key) {
        try {
            Connection c;
            if (jedis instanceof JedisCluster jc) {
                c = jc.getConnectionFromSlot(JedisClusterCRC16.getSlot(key));
            } else if (jedis instanceof RedisClusterClient rc) {
                c = rc.getConnectionFromSlot(JedisClusterCRC16.getSlot(key));
            } else if (jedis instanceof JedisPooled p) {
                c = p.getPool().getResource();
            } else {
                c = ((RedisClient) jedis).getPool().getResource();
            }
            return new JedisLink(c, null);
        } catch (JedisConnectionException e) {
            throw new LinkException("no connection: " + e.getMessage(), e);
        }
    }

    /**
     * Outside a cluster, a connection made by the pool's own factory but never
     * borrowed from it: the application's pool keeps all its connections
     * (the Jedis default of 8 included), and padlock's two live beside them.
     */
    @Override
    public Link dedicated(String key) {
        redis.clients.jedis.util.Pool<Connection> pool;
        if (jedis instanceof JedisPooled p) {
            pool = p.getPool();
        } else if (jedis instanceof RedisClient r) {
            pool = r.getPool();
        } else {
            return clusterDedicated(key);
        }
        try {
            Connection c = named(pool.getFactory().makeObject().getObject());
            return new JedisLink(c, c::close);
        } catch (JedisConnectionException e) {
            throw new LinkException("no connection: " + e.getMessage(), e);
        } catch (Exception e) {
            throw new LinkException("no connection: " + e, e);
        }
    }

    @Override
    public boolean cluster() {
        return jedis instanceof JedisCluster || jedis instanceof RedisClusterClient;
    }

    /** In a cluster, the master of the key's slot: holds of one node share its keeper. */
    @Override
    public String node(String key) {
        return cluster() ? slots.node(JedisClusterCRC16.getSlot(key)) : "";
    }

    /** In a cluster, a connection the node's pool factory makes, never borrowed from the pool. */
    private Link clusterDedicated(String key) {
        String node = node(key);
        ConnectionPool pool = clusterNodes().get(node);
        if (pool == null) {
            throw new LinkException("no pool for the cluster node " + node, null);
        }
        try {
            Connection c = named(pool.getFactory().makeObject().getObject());
            return new JedisLink(c, c::close);
        } catch (Exception e) {
            throw new LinkException("no connection: " + e, e);
        }
    }

    private java.util.Map<String, ConnectionPool> clusterNodes() {
        return jedis instanceof JedisCluster jc ? jc.getClusterNodes() : ((RedisClusterClient) jedis).getClusterNodes();
    }

    /** Named, so that CLIENT LIST tells padlock's connections from the application's. */
    static Connection named(Connection c) {
        try {
            c.executeCommand(new CommandArguments(command("CLIENT")).add("SETNAME").add("padlock"));
            return c;
        } catch (RuntimeException e) {
            c.close();
            throw e;
        }
    }

    @Override
    public Tracked tracked(String key, String prefix, Consumer<List<String>> heard) {
        JedisLink link = (JedisLink) clusterDedicated(key);
        return new JedisTracked(link.c, prefix, heard);
    }

    /** One Jedis {@link Connection}; {@code owner} (if any) is closed instead of it. */
    static final class JedisLink implements Link {
        private final Connection c;
        private final AutoCloseable owner;

        JedisLink(Connection c, AutoCloseable owner) {
            this.c = c;
            this.owner = owner;
        }

        @Override
        public synchronized Object call(long timeoutMs, List<String> args) {
            CommandArguments ca = new CommandArguments(command(args.get(0)));
            for (int i = 1; i < args.size(); i++) {
                ca.add(args.get(i));
            }
            try {
                c.setSoTimeout((int) Math.min(Integer.MAX_VALUE, Math.max(0, timeoutMs)));
                return Decode.value(c.executeCommand(ca));
            } catch (JedisConnectionException e) {
                c.setBroken();
                throw new LinkException(e.getMessage(), e);
            } catch (JedisDataException e) {
                throw new ReplyException(e.getMessage());
            }
        }

        @Override
        public void close() {
            try {
                if (owner != null) {
                    owner.close();
                } else {
                    c.close();
                }
            } catch (Exception e) {
                // a connection that fails to close is gone either way
            }
        }

        @Override
        public void discard() {
            c.setBroken();
            try {
                c.disconnect();
            } catch (RuntimeException e) {
                // already closed
            }
            close();
        }
    }

    static ProtocolCommand command(String name) {
        return Commands.named(name);
    }
}
