"""What one waiter costs the server, for `make bench` (docs/commands.md: a MAILBOX waiter
costs at most what a BLPOP waiter costs): the whole server process under
callgrind (every instruction of the event loop, networking and reply
included, not only `call()`), from the moment `n` waiters (a holder each,
as a client's callers are) start to queue
until the last has its outcome, divided by `n`. Side by side on one binary:

- `BLPOP`: n connections each `BLPOP l:i 0`, then one connection `RPUSH`es
  each list (pipelined): each waiter woken with its element;
- `LOCK.ACQUIRE ... BLOCK`: n locks held, n connections each block on one,
  then one connection releases each (pipelined): each waiter granted;
- `LOCK.ACQUIRE ... BLOCK ... MAILBOX`: n locks held, one connection
  pipelines the n acquires (each answered `WAITING`), then one connection
  releases each (each grant posted to a mailbox), and the outcomes are read
  back (`LPOP`, as a client's mailbox reader does): queue, grant, post and
  read;
- the same MAILBOX waiters timing out (BLOCK 1) instead of being granted;
- on one hot key: n connections `BLPOP` one list, then n `RPUSH`es wake
  them in turn; against n `MAILBOX` requests on one held lock, pipelined
  on one connection, then served one after the other (the owner's release
  grants the first, each grantee's release the next: n + 1 releases for
  n `RPUSH`es), and the outcomes read back.

    python scripts/bench/waitcost.py [server-binary] [n]
"""

import glob
import os
import socket
import sys
import time

import redis

import pathlib
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # scripts/: harness, faultproxy
from cost import Node

N = 2000


def resp(*args):
    return args


def wire(args):
    args = [a if isinstance(a, bytes) else str(a).encode() for a in args]
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)


def pipeline(port, commands, client=None):
    """Sends every command on one connection and reads every reply (on
    `client` when given, which stays open: requests it queued with `MAILBOX`
    leave their queues when it closes)."""
    c = client or redis.Redis(port=port, socket_timeout=120)
    p = c.pipeline(transaction=False)
    for cmd in commands:
        p.execute_command(*cmd)
    replies = p.execute(raise_on_error=False)
    if client is None:
        c.close()
    return replies


def blockers(port, commands):
    socks = []
    for cmd in commands:
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(wire(cmd))
        socks.append(s)
    return socks


def drain(socks):
    for s in socks:
        s.settimeout(30)
        s.recv(1 << 16)
        s.close()


def window(node, run):
    node.control("-z")
    run()
    before = set(glob.glob(node.out + "*"))
    node.control("-d")
    dump = max(set(glob.glob(node.out + "*")) - before, key=os.path.getmtime)
    with open(dump) as f:
        for line in f:
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    raise RuntimeError("no totals")


def wait_until(r, pred, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return
        time.sleep(0.05)
    raise RuntimeError("timed out")


def hold_all(node, n):
    node.r.flushall()
    pipeline(node.port, [resp("LOCK.ACQUIRE", f"k:{i}", "owner", 600000) for i in range(n)])


def measure(binary, n=N):
    node = Node(binary, callgrind="all")
    out = {}
    try:
        r = node.r

        def blpops(lists):
            """n connections `BLPOP` (list i of `lists`), then one pushes to each in turn."""
            def run():
                socks = blockers(node.port, [resp("BLPOP", lists[i], 0) for i in range(n)])
                wait_until(r, lambda: r.info("clients")["blocked_clients"] == n)
                pipeline(node.port, [resp("RPUSH", lists[i], "x") for i in range(n)])
                drain(socks)
            return run
        r.flushall()
        out["BLPOP (block, woken by RPUSH)"] = window(node, blpops([f"l:{i}" for i in range(n)])) / n

        def block():
            socks = blockers(node.port, [resp("LOCK.ACQUIRE", f"k:{i}", f"w{i}", 60000, "BLOCK", 0)
                                         for i in range(n)])
            wait_until(r, lambda: r.info("padlock")["padlock_blocked_clients"] == n)
            pipeline(node.port, [resp("LOCK.RELEASE", f"k:{i}", "owner") for i in range(n)])
            drain(socks)
        hold_all(node, n)
        out["LOCK.ACQUIRE BLOCK (block, granted)"] = window(node, block) / n

        def mailed(acquires, serve, outcome):
            """The `MAILBOX` requests queued on one connection kept open,
            `serve()`d, then every outcome read back (each checked)."""
            def run():
                c = redis.Redis(port=node.port, socket_timeout=120)
                try:
                    if any(x != b"WAITING" for x in pipeline(node.port, acquires, c)):
                        raise RuntimeError("a MAILBOX request was not queued")
                    serve()
                    got = pipeline(node.port, [resp("LPOP", "mb") for _ in range(n)])
                finally:
                    c.close()
                if not all(x is not None and outcome(x.split(b" ", 1)[1]) for x in got):
                    raise RuntimeError("not every queued request had its outcome mailed")
            return run
        granted = bytes.isdigit

        def releases(names):
            return lambda: pipeline(node.port, [resp("LOCK.RELEASE", k, h) for k, h in names])

        hold_all(node, n)
        out["LOCK.ACQUIRE BLOCK MAILBOX (queued, granted, posted, read)"] = window(node, mailed(
            [resp("LOCK.ACQUIRE", f"k:{i}", f"w{i}", 60000, "BLOCK", 0, "MAILBOX", "mb", "ID", f"r{i}")
             for i in range(n)],
            releases([(f"k:{i}", "owner") for i in range(n)]), granted)) / n

        hold_all(node, n)
        out["LOCK.ACQUIRE BLOCK 1 MAILBOX (queued, timed out, posted, read)"] = window(node, mailed(
            [resp("LOCK.ACQUIRE", f"k:{i}", f"w{i}", 60000, "BLOCK", 1, "MAILBOX", "mb", "ID", f"t{i}")
             for i in range(n)],
            lambda: wait_until(r, lambda: r.llen("mb") == n), lambda x: x == b"nil")) / n

        r.flushall()
        out["one hot key: BLPOP (block, woken by RPUSH)"] = window(node, blpops(["hotlist"] * n)) / n

        r.flushall()
        r.execute_command("LOCK.ACQUIRE", "hot", "owner", 600000)
        # The owner's release grants the first, each grantee's the next.
        out["one hot key: LOCK.ACQUIRE BLOCK MAILBOX (queued, granted, posted, read)"] = window(node, mailed(
            [resp("LOCK.ACQUIRE", "hot", f"w{i}", 60000, "BLOCK", 0, "MAILBOX", "mb", "ID", f"h{i}")
             for i in range(n)],
            releases([("hot", h) for h in ["owner"] + [f"w{i}" for i in range(n)]]), granted)) / n
        return out
    finally:
        node.stop()


def formatted(res, n):
    """The table `make bench` writes into docs/benchmarks.md."""
    lines = [f"**One waiter's whole cost** ({n:,} waiters on {n:,} keys, then {n:,} on one hot key; the whole "
             "server process under callgrind from the first queued to the last served, per waiter; target for "
             "`MAILBOX`: at most 1.5x a `BLPOP` waiter). Lower is better.", "",
             "| waiter | instructions per waiter | vs BLPOP |", "| --- | --- | --- |"]
    for name, v in res.items():
        base = res["one hot key: BLPOP (block, woken by RPUSH)" if name.startswith("one hot key")
                   else "BLPOP (block, woken by RPUSH)"]
        lines.append(f"| {name} | {v:,.0f} | {v / base:.2f}x |")
    return "\n".join(lines)


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else "redis-server"
    n = int(sys.argv[2]) if len(sys.argv) > 2 else N
    print(formatted(measure(binary, n), n))


if __name__ == "__main__":
    main()
