"""A loopback RESP proxy that loses replies the way a network blip or a
failover does: it forwards every command to the server, and when the reply
to a chosen command arrives (the server has applied it), it drops that
reply and every later one of the connection, then closes the client's side
("close") or goes silent with both sockets left open ("hang", a half-open
connection). Other connections pass through untouched.

In a test:      p = FaultProxy(server_port); p.drop("LOCK.ACQUIRE", nth=1)
From a shell:   python scripts/faultproxy.py SERVER_PORT [--drop CMD[:N]] [--hang CMD[:N]]
                (prints the port it listens on, takes more rules on stdin,
                and serves until killed)
"""

from __future__ import annotations

import socket
import sys
import threading
import time
from typing import Optional


class _Resp:
    """Counts whole RESP values in a byte stream (requests and replies,
    RESP2 and RESP3), returning where each one ends."""

    def __init__(self) -> None:
        self.buf = b""

    def feed(self, data: bytes) -> list[tuple[bytes, bytes]]:
        """The values completed by `data`: (their bytes, their first array
        element or type line). A partial value waits for more."""
        self.buf += data
        out = []
        pos = 0
        while True:
            r = self._value(pos)
            if r is None:
                break
            end, head = r
            out.append((self.buf[pos:end], head))
            pos = end
        self.buf = self.buf[pos:]
        return out

    def _line(self, pos: int) -> Optional[tuple[bytes, int]]:
        i = self.buf.find(b"\r\n", pos)
        return None if i < 0 else (self.buf[pos:i], i + 2)

    def _value(self, pos: int) -> Optional[tuple[int, bytes]]:
        got = self._line(pos)
        if got is None:
            return None
        line, nxt = got
        if not line:
            return nxt, b""
        t = line[:1]
        if t in b"+-:_,#(":
            return nxt, line
        if t in b"$=!":
            n = int(line[1:])
            if n < 0:
                return nxt, line
            end = nxt + n + 2
            return (end, self.buf[nxt:nxt + n]) if len(self.buf) >= end else None
        if t in b"*~>%|":
            n = int(line[1:])
            if n < 0:
                return nxt, line
            count = n * 2 if t in b"%|" else n
            head = b""
            for k in range(count):
                r = self._value(nxt)
                if r is None:
                    return None
                if k == 0:
                    head = r[1]
                nxt = r[0]
            return nxt, head
        # An inline command: one line.
        return nxt, line.split(b" ", 1)[0]


class FaultProxy:
    def __init__(self, target_port: int) -> None:
        self.target = target_port
        self.rules: list[dict] = []
        self.lock = threading.Lock()
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self.dropped = 0
        self.black = False
        self.hung: list[socket.socket] = []
        self._stop = False
        threading.Thread(target=self._accept, daemon=True).start()

    def drop(self, command: str, nth: int = 1, mode: str = "close") -> None:
        """Loses the reply to the nth `command` sent through the proxy from
        now on (counted over all connections), and all replies after it on
        that connection."""
        with self.lock:
            self.rules.append({"cmd": command.upper().encode(), "left": nth, "mode": mode})

    def blackhole(self) -> None:
        """From now on every connection, open or new, goes silent: a
        network cut that leaves the sockets half-open."""
        self.black = True

    def close(self) -> None:
        self._stop = True
        self.listener.close()
        for s in self.hung:
            s.close()

    def _accept(self) -> None:
        while not self._stop:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target), timeout=5)
                upstream.settimeout(None)
            except OSError:
                # The server is down (being restarted): the client sees a
                # closed connection, as it would without the proxy.
                client.close()
                continue
            _Pair(self, client, upstream)

    def _match(self, head: bytes) -> Optional[str]:
        """A command passing: the mode of the rule it triggers, if any."""
        with self.lock:
            for rule in self.rules:
                if rule["cmd"] == head.upper():
                    rule["left"] -= 1
                    if rule["left"] == 0:
                        self.rules.remove(rule)
                        return str(rule["mode"])
        return None


class _Pair:
    """One client connection and its upstream."""

    def __init__(self, proxy: FaultProxy, client: socket.socket, upstream: socket.socket) -> None:
        self.proxy, self.client, self.upstream = proxy, client, upstream
        self.sent: list[Optional[str]] = []  # per command in flight: the fault at its reply
        self.cut: Optional[str] = None
        self.lock = threading.Lock()
        threading.Thread(target=self._requests, daemon=True).start()
        threading.Thread(target=self._replies, daemon=True).start()

    def _requests(self) -> None:
        parser = _Resp()
        while True:
            try:
                data = self.client.recv(65536)
            except OSError:
                data = b""
            if not data:
                if self.cut is None:
                    self._shut(self.upstream)
                return
            with self.lock:
                if self.cut == "hang" or self.proxy.black:
                    continue
                for _, head in parser.feed(data):
                    self.sent.append(self.proxy._match(head))
            try:
                self.upstream.sendall(data)
            except OSError:
                return

    def _replies(self) -> None:
        parser = _Resp()
        while True:
            try:
                data = self.upstream.recv(65536)
            except OSError:
                data = b""
            if not data:
                if self.cut is None:
                    self._shut(self.client)
                return
            with self.lock:
                if self.cut is not None or self.proxy.black:
                    continue
                out = b""
                for raw, _ in parser.feed(data):
                    fault = self.sent.pop(0) if self.sent else None
                    if fault is not None:
                        # The reply to this command, and all after it, are lost.
                        self.cut = fault
                        break
                    out += raw
            if out:
                try:
                    self.client.sendall(out)
                except OSError:
                    return
            if self.cut is not None:
                self.proxy.dropped += 1
                if self.cut == "close":
                    # Let the server finish what it already received, then
                    # cut the client off, as a dead link would.
                    time.sleep(0.05)
                    self._shut(self.client)
                    self._shut(self.upstream)
                    return
                self.proxy.hung += [self.client, self.upstream]

    @staticmethod
    def _shut(s: socket.socket) -> None:
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        s.close()


def main() -> None:
    args = sys.argv[1:]
    p = FaultProxy(int(args[0]))
    i = 1
    while i < len(args):
        mode = {"--drop": "close", "--hang": "hang"}[args[i]]
        cmd, _, n = args[i + 1].partition(":")
        p.drop(cmd, int(n or 1), mode)
        i += 2
    print(p.port, flush=True)
    # More rules from stdin, a line each: "drop CMD [N]", "hang CMD [N]",
    # "blackhole"; each answered "ok" once in force, "dropped N" to "count".
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "blackhole":
            p.blackhole()
        elif words[0] == "count":
            print(f"dropped {p.dropped}", flush=True)
            continue
        elif words[0] in ("drop", "hang"):
            p.drop(words[1], int(words[2]) if len(words) > 2 else 1,
                   "close" if words[0] == "drop" else "hang")
        print("ok", flush=True)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
