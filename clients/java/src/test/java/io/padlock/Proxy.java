package io.padlock;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * A loopback proxy in front of a server that can lose one reply: armed, it
 * drops what the server answers next and closes both sides, as a network
 * blip or a failover looks to a client (the server applied the command).
 */
final class Proxy implements AutoCloseable {
    private final ServerSocket listen;
    private final int target;
    private final AtomicBoolean dropNext = new AtomicBoolean();
    private final java.util.List<Socket> open = new java.util.concurrent.CopyOnWriteArrayList<>();

    Proxy(int target) throws IOException {
        this.target = target;
        this.listen = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
        Thread t = new Thread(this::accept, "proxy");
        t.setDaemon(true);
        t.start();
    }

    int port() {
        return listen.getLocalPort();
    }

    /** The next reply from the server (on any connection) is lost, and that connection closed. */
    void loseNextReply() {
        dropNext.set(true);
    }

    /** The network between the client and the server goes: every connection closes, and no new one gets through. */
    void cut() throws IOException {
        listen.close();
        open.forEach(Proxy::close);
    }

    private void accept() {
        while (!listen.isClosed()) {
            try {
                Socket client = listen.accept();
                Socket server = new Socket(InetAddress.getLoopbackAddress(), target);
                open.add(client);
                open.add(server);
                pump(client, server, false);
                pump(server, client, true);
            } catch (IOException e) {
                return;
            }
        }
    }

    private void pump(Socket from, Socket to, boolean replies) {
        Thread t = new Thread(() -> {
            byte[] buf = new byte[65536];
            try (InputStream in = from.getInputStream(); OutputStream out = to.getOutputStream()) {
                int n;
                while ((n = in.read(buf)) > 0) {
                    if (replies && dropNext.compareAndSet(true, false)) {
                        break;
                    }
                    out.write(buf, 0, n);
                    out.flush();
                }
            } catch (IOException e) {
                // one side closed
            } finally {
                close(from);
                close(to);
            }
        }, "proxy-pump");
        t.setDaemon(true);
        t.start();
    }

    private static void close(Socket s) {
        try {
            s.close();
        } catch (IOException e) {
            // closed already
        }
    }

    @Override
    public void close() throws IOException {
        listen.close();
    }
}
