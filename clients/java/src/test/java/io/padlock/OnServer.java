package io.padlock;

import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;

/** One standalone server per test class, flushed before each test; Padlocks on both drivers. */
abstract class OnServer {
    static final List<String> drivers = Clients.DRIVERS;
    static Servers srv;
    Clients clients;

    @BeforeAll
    static void start() throws Exception {
        srv = Servers.standalone();
    }

    @AfterAll
    static void stop() {
        srv.close();
    }

    @BeforeEach
    void open() {
        clients = new Clients();
        srv.raw("FLUSHALL");
    }

    @AfterEach
    void close() {
        clients.close();
    }
}
