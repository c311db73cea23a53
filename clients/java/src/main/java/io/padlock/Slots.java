package io.padlock;

import java.nio.charset.StandardCharsets;

/**
 * Cluster slots, for mailboxes there: a mailbox must share its request's
 * slot, so a Padlock keeps one per slot in use, named with a short hash tag
 * of that slot (found once for all slots).
 */
final class Slots {
    private static final String ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    private static volatile String[] tags;

    private Slots() {}

    /** The slot of {@code key}: CRC16 (XMODEM) of its hash tag, or of the whole key, mod 16384. */
    static int of(String key) {
        byte[] b = key.getBytes(StandardCharsets.UTF_8);
        int from = 0;
        int to = b.length;
        int open = indexOf(b, (byte) '{', 0);
        if (open >= 0) {
            int close = indexOf(b, (byte) '}', open + 1);
            if (close > open + 1) {
                from = open + 1;
                to = close;
            }
        }
        int crc = 0;
        for (int i = from; i < to; i++) {
            crc = step(crc, b[i]);
        }
        return crc & 16383;
    }

    private static int indexOf(byte[] b, byte c, int from) {
        for (int i = from; i < b.length; i++) {
            if (b[i] == c) {
                return i;
            }
        }
        return -1;
    }

    private static int step(int crc, byte c) {
        crc ^= (c & 0xff) << 8;
        for (int i = 0; i < 8; i++) {
            crc = (crc & 0x8000) != 0 ? (crc << 1) ^ 0x1021 : crc << 1;
        }
        return crc & 0xffff;
    }

    /** A short alphanumeric hash tag whose slot is {@code slot}. */
    static String tag(int slot) {
        String[] t = tags;
        if (t == null) {
            t = build();
            tags = t;
        }
        return t[slot];
    }

    private static String[] build() {
        String[] out = new String[16384];
        int left = out.length;
        java.util.List<String> level = java.util.List.of("");
        while (left > 0) {
            java.util.List<String> grown = new java.util.ArrayList<>();
            for (String p : level) {
                for (int i = 0; i < ALPHABET.length(); i++) {
                    String w = p + ALPHABET.charAt(i);
                    grown.add(w);
                    int s = of(w);
                    if (out[s] == null) {
                        out[s] = w;
                        left--;
                    }
                }
            }
            level = grown;
        }
        return out;
    }
}
