package io.padlock;

import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import redis.clients.jedis.CommandArguments;
import redis.clients.jedis.Connection;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.exceptions.JedisConnectionException;

/**
 * Real servers with the module, on free loopback ports, for the tests: one
 * standalone, or three masters of a cluster. {@code PADLOCK_SO} names the
 * module, {@code PADLOCK_SERVER} the server binary (default redis-server).
 */
final class Servers implements AutoCloseable {
    static final String SO = System.getenv().getOrDefault("PADLOCK_SO",
            Path.of("../../target/release/libpadlock.so").toAbsolutePath().normalize().toString());
    static final String BINARY = System.getenv().getOrDefault("PADLOCK_SERVER", "redis-server");

    final List<Integer> ports = new ArrayList<>();
    private final List<Process> procs = new ArrayList<>();
    private final List<Path> dirs = new ArrayList<>();

    static Servers standalone() throws Exception {
        Servers s = new Servers();
        s.start(List.of());
        return s;
    }

    /** Three masters, slots split evenly, all agreeing the cluster is ok. */
    static Servers cluster() throws Exception {
        return cluster(BINARY);
    }

    /** {@link #cluster()} of the server binary {@code binary}. */
    static Servers cluster(String binary) throws Exception {
        Servers s = new Servers();
        for (int i = 0; i < 3; i++) {
            s.start(List.of("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                    "--cluster-node-timeout", "5000"), binary);
        }
        int[][] ranges = {{0, 5460}, {5461, 10922}, {10923, 16383}};
        for (int i = 0; i < 3; i++) {
            s.cmd(i, "CLUSTER", "ADDSLOTSRANGE", "" + ranges[i][0], "" + ranges[i][1]);
        }
        for (int i = 1; i < 3; i++) {
            s.cmd(0, "CLUSTER", "MEET", "127.0.0.1", "" + s.ports.get(i));
        }
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (true) {
            boolean ok = true;
            for (int i = 0; i < 3; i++) {
                ok &= s.cmd(i, "CLUSTER", "INFO").contains("cluster_state:ok");
                ok &= s.cmd(i, "CLUSTER", "NODES").lines().filter(l -> l.contains("master")).count() == 3;
            }
            if (ok) {
                return s;
            }
            if (System.nanoTime() > until) {
                s.close();
                throw new IllegalStateException("cluster did not become ok");
            }
            Thread.sleep(50);
        }
    }

    /** A master (node 0) and its replica (node 1), the replication stream flowing. */
    static Servers withReplica() throws Exception {
        Servers s = new Servers();
        s.start(List.of("--repl-diskless-sync-delay", "0"));
        s.start(List.of("--replicaof", "127.0.0.1", "" + s.port()));
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        // Streaming starts at the replica's first ACK: a write seen there first.
        while (!s.cmd(1, "EXISTS", "probe").equals("1")) {
            if (System.nanoTime() > until) {
                s.close();
                throw new IllegalStateException("the replica did not catch up");
            }
            s.cmd(0, "SET", "probe", "1");
            Thread.sleep(50);
        }
        s.cmd(0, "DEL", "probe");
        return s;
    }

    /** Stops (true) or resumes node {@code node}'s process: a stopped replica acknowledges nothing. */
    void pause(int node, boolean stop) throws Exception {
        new ProcessBuilder("kill", stop ? "-STOP" : "-CONT", "" + procs.get(node).pid()).start().waitFor();
    }

    int port() {
        return ports.get(0);
    }

    /**
     * A free loopback port whose cluster bus port (+10000) is free too: a
     * cluster node binds both, and an ephemeral port's +10000 may be taken
     * or past 65535.
     */
    private static int freePort() throws IOException {
        for (int i = 0; i < 100; i++) {
            try (ServerSocket probe = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
                int port = probe.getLocalPort();
                if (port + 10000 > 65535) {
                    continue;
                }
                try {
                    new ServerSocket(port + 10000, 1, InetAddress.getLoopbackAddress()).close();
                    return port;
                } catch (IOException e) {
                    // taken: another
                }
            }
        }
        throw new IOException("no free port pair");
    }

    /**
     * Starts a node. A node whose picked port another process took meanwhile
     * exits at once; it is started again on another pick (the suites of
     * `make test` run side by side and start servers too).
     */
    private void start(List<String> extra) throws Exception {
        start(extra, BINARY);
    }

    private void start(List<String> extra, String binary) throws Exception {
        for (int attempt = 0; ; attempt++) {
            int port = freePort();
            Path dir = Files.createTempDirectory("padlock-java-");
            List<String> argv = new ArrayList<>(List.of(binary, "--port", "" + port, "--bind", "127.0.0.1",
                    "--dir", dir.toString(), "--save", "", "--appendonly", "no", "--loadmodule", SO));
            argv.addAll(extra);
            Process p = new ProcessBuilder(argv).redirectErrorStream(true)
                    .redirectOutput(dir.resolve("server.log").toFile()).start();
            procs.add(p);
            dirs.add(dir);
            ports.add(port);
            for (int i = 0; i < 500 && p.isAlive(); i++) {
                try {
                    if (cmd(ports.size() - 1, "PING").equals("PONG")) {
                        return;
                    }
                } catch (IOException e) {
                    Thread.sleep(20);
                }
            }
            String log = Files.readString(dir.resolve("server.log"));
            if (p.isAlive() || !log.contains("Address already in use") || attempt == 4) {
                throw new IllegalStateException("server did not start: " + log);
            }
            procs.remove(procs.size() - 1);
            ports.remove(ports.size() - 1);
        }
    }

    /** One command on a fresh connection, the reply as text (nil: "(nil)", arrays joined by spaces). */
    String cmd(int node, String... args) throws IOException {
        try (Connection c = new Connection(new HostAndPort("127.0.0.1", ports.get(node)))) {
            CommandArguments ca = new CommandArguments(io.padlock.driver.Commands.named(args[0]));
            for (int i = 1; i < args.length; i++) {
                ca.add(args[i]);
            }
            return text(c.executeCommand(ca));
        } catch (JedisConnectionException e) {
            throw new IOException(e);
        }
    }

    /** Any command (module ones too) on node 0. */
    Object raw(String... args) {
        try (Connection c = new Connection(new HostAndPort("127.0.0.1", ports.get(0)))) {
            CommandArguments ca = new CommandArguments(io.padlock.driver.Commands.named(args[0]));
            for (int i = 1; i < args.length; i++) {
                ca.add(args[i]);
            }
            return c.executeCommand(ca);
        }
    }

    static String text(Object o) {
        if (o == null) {
            return "(nil)";
        }
        if (o instanceof byte[] b) {
            return new String(b, StandardCharsets.UTF_8);
        }
        if (o instanceof List<?> l) {
            List<String> parts = new ArrayList<>();
            l.forEach(x -> parts.add(text(x)));
            return String.join(" ", parts);
        }
        return String.valueOf(o);
    }

    @Override
    public void close() {
        for (Process p : procs) {
            try {
                new ProcessBuilder("kill", "-CONT", "" + p.pid()).start().waitFor();
            } catch (Exception e) {
                // gone already
            }
            p.destroyForcibly();
        }
        for (Process p : procs) {
            try {
                p.waitFor(10, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        for (Path d : dirs) {
            try (var walk = Files.walk(d)) {
                walk.sorted((a, b) -> b.compareTo(a)).forEach(f -> f.toFile().delete());
            } catch (IOException e) {
                // best effort
            }
        }
    }
}
