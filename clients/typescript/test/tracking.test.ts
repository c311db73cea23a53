// The tracking connection's RESP2 reading (`src/tracking.ts`), against a
// fake server that sends its replies cut at every byte, and its handshake
// against a real one.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer, type Socket } from "node:net";
import { RespConn, invalidated, isPong } from "../src/tracking.js";
import { TestServer, sleep, useServer } from "./server.js";

let server: TestServer;
useServer((s) => {
  server = s;
});

/** A server on a free loopback port that answers each command line with
 * the next of `replies`, written one byte at a time. */
async function fake(replies: string[]): Promise<{ port: number; close: () => void }> {
  const sockets: Socket[] = [];
  const srv = createServer((sock) => {
    sockets.push(sock);
    let buffered = "";
    sock.on("data", async (d) => {
      buffered += d.toString();
      // One reply per command (each command ends with its last argument's CRLF).
      while (buffered.startsWith("*")) {
        const n = Number(buffered.slice(1, buffered.indexOf("\r\n")));
        const parts = buffered.split("\r\n");
        if (parts.length < 1 + 2 * n + 1) return;
        buffered = parts.slice(1 + 2 * n).join("\r\n");
        const reply = replies.shift() ?? "+OK\r\n";
        for (const byte of Buffer.from(reply)) {
          sock.write(Buffer.from([byte]));
          await sleep(0);
        }
      }
    });
  });
  await new Promise<void>((ok) => srv.listen(0, "127.0.0.1", () => ok()));
  const address = srv.address();
  const port = typeof address === "object" && address ? address.port : 0;
  return { port, close: () => (sockets.forEach((s) => s.destroy()), srv.close()) };
}

test("replies cut at every byte are read whole, of every RESP2 type", async () => {
  const f = await fake([
    "+OK\r\n",
    ":42\r\n",
    "$4\r\nhé!\r\n", // a length in bytes: "é" is two
    "$-1\r\n",
    "*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n*2\r\n$3\r\nk:1\r\n$3\r\nk:2\r\n",
    "*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n*-1\r\n",
    "*2\r\n$4\r\npong\r\n$0\r\n\r\n",
    "-ERR no such thing\r\n",
  ]);
  const c = await RespConn.open({ host: "127.0.0.1", port: f.port }, 2000);
  try {
    assert.equal(await c.command(["ONE"], 2000), "OK");
    assert.equal(await c.command(["TWO"], 2000), 42);
    assert.equal(await c.command(["THREE"], 2000), "hé!");
    assert.equal(await c.command(["FOUR"], 2000), null);
    const named = await c.command(["FIVE"], 2000);
    assert.deepEqual(invalidated(named), ["k:1", "k:2"]);
    assert.equal(invalidated(await c.command(["SIX"], 2000)), undefined, "a flush names every key");
    assert.ok(isPong(await c.command(["SEVEN"], 2000)));
    await assert.rejects(c.command(["EIGHT"], 2000), /no such thing/);
    assert.deepEqual(invalidated(["subscribe", "__redis__:invalidate", 1]), [], "a subscription's reply names none");
  } finally {
    c.close();
    f.close();
  }
});

test("a connection that closes fails the reply it owes", async () => {
  const f = await fake([]);
  const c = await RespConn.open({ host: "127.0.0.1", port: f.port }, 2000);
  const owed = c.next(5000);
  f.close();
  await assert.rejects(owed);
  c.close();
});

test("the handshake against a real server: tracking redirected to itself, heard as messages", async () => {
  const c = await RespConn.open({ host: "127.0.0.1", port: server.port, clientName: "padlock" }, 2000);
  const other = server.ioredis();
  try {
    const id = await c.command(["CLIENT", "ID"], 2000);
    assert.equal(typeof id, "number");
    await c.command(["CLIENT", "TRACKING", "ON", "REDIRECT", String(id), "BCAST", "PREFIX", "box:"], 2000);
    await c.command(["SUBSCRIBE", "__redis__:invalidate"], 2000);
    await other.rpush("box:1", "x");
    const heard = await c.next(2000);
    assert.ok(heard !== undefined);
    assert.deepEqual(invalidated(heard), ["box:1"]);
    c.send(["PING"]);
    assert.ok(isPong((await c.next(2000)) ?? null));
    const names = String(await other.call("CLIENT", "LIST"));
    assert.match(names, /name=padlock/, "named as the configuration says");
  } finally {
    c.close();
  }
});
