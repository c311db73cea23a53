package io.padlock.driver;

import java.nio.charset.StandardCharsets;
import redis.clients.jedis.commands.ProtocolCommand;

/** Jedis' name for a command it does not know. */
public final class Commands {
    private Commands() {}

    public static ProtocolCommand named(String name) {
        byte[] raw = name.getBytes(StandardCharsets.UTF_8);
        return () -> raw;
    }
}
