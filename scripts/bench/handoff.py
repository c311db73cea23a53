"""What a hand-off costs the server, for `make bench`: `n` locks held, a
`MAILBOX` + `KEEP` + `ID` request queued on each (as the client libraries
send it, one holder each), then each released with `ID`: instructions
inside `call()` per release that grants (the release, the grant and its
binding, the mailbox post, both request-ids).

    python scripts/bench/handoff.py [server-binary] [n]
    PADLOCK_COST_KEEP=dir python scripts/bench/handoff.py   # and keep the dump (dir/handoff.cg)
"""

import glob
import os
import shutil
import socket
import sys

import pathlib
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # scripts/: harness
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import cost
from cost import Node, load
from harness import server_and_count

N = 2000


def wire(args):
    args = [a if isinstance(a, bytes) else str(a).encode() for a in args]
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)


def measure(binary, n=N):
    m = Node(binary, callgrind=True)
    try:
        load(m.port, ["LOCK.ACQUIRE", "k:{i}", "a", "60000"], n, pipeline=64)
        c = socket.create_connection(("127.0.0.1", m.port))
        c.sendall(b"".join(wire(["LOCK.ACQUIRE", f"k:{i}", f"b{i}", 60000, "KEEP", "BLOCK", 60000,
                                 "MAILBOX", "mb", "ID", f"q:{i}"]) for i in range(n)))
        got = b""
        while got.count(b"\r\n") < n:
            got += c.recv(1 << 20)
        if got.count(b"WAITING") != n:
            raise RuntimeError("the requests did not all queue")
        m.control("-z")
        load(m.port, ["LOCK.RELEASE", "k:{i}", "a", "ID", "r:{i}"], n)
        before = set(glob.glob(m.out + "*"))
        m.control("-d")
        dump = max(set(glob.glob(m.out + "*")) - before, key=os.path.getmtime)
        if m.r.llen("mb") != n:
            raise RuntimeError("not every grant was posted")
        c.close()
        if os.environ.get("PADLOCK_COST_KEEP"):  # a directory: the dump, for callgrind_annotate
            shutil.copy(dump, os.path.join(os.environ["PADLOCK_COST_KEEP"], "handoff.cg"))
        return cost.total(dump) / n
    finally:
        m.stop()


def main():
    binary, n = server_and_count(sys.argv[1:], N)
    print(f"instructions per release that grants a MAILBOX + KEEP waiter (with ID): {measure(binary, n):,.0f}")


if __name__ == "__main__":
    main()
