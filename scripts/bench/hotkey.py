"""One hot key: N clients queue on one lock (LOCK.ACQUIRE ... BLOCK 0) and,
side by side in the same run, N clients on one list (BLPOP ... 0). Reports
the server time per queued waiter (INFO commandstats) of each, their
ratio, and the p99 of a PING sent from another client while the waiters
queue; then checks the FIFO hand-off through all of them.

python scripts/bench/hotkey.py [N ...]   (default 1000 5000 10000; the client
raises its open-file limit to what N sockets need, up to the hard limit,
and a size the machine cannot open is left out with a note)
"""

import socket
import sys
import time

import redis

import pathlib
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # scripts/: harness, faultproxy
from harness import Server, resp


def usec(r, cmd):
    s = r.info("commandstats").get(f"cmdstat_{cmd}", {})
    return s.get("usec", 0), s.get("calls", 0)


def ping_loop(port, stop, out):
    """Another client's PINGs, one due every millisecond, until `stop` is
    set: how late each reply came after the PING was due, in ms (open
    loop: a PING due while the server stalls counts the whole stall, so
    the figure has no coordinated omission). A process of its own, so that
    the queueing client's own pauses do not count."""
    c = redis.Redis(port=port)
    times = []
    start = time.perf_counter()
    k = 0
    while not stop.is_set():
        due = start + k * 0.001
        now = time.perf_counter()
        if now < due:
            time.sleep(due - now)
        c.ping()
        done = time.perf_counter()
        # Every PING that fell due while this one waited was as late.
        while start + k * 0.001 <= done:
            times.append((done - (start + k * 0.001)) * 1000)
            k += 1
    out.put(times)


def while_pinged(port, r, cmd, work):
    """Runs `work()` while another process PINGs; returns (what it
    returned, server µs per `cmd` call it made, PING p99 ms)."""
    import multiprocessing as mp
    stop, out = mp.Event(), mp.Queue()
    pinger = mp.Process(target=ping_loop, args=(port, stop, out))
    u0, c0 = usec(r, cmd)
    pinger.start()
    try:
        got = work()
    finally:
        u1, c1 = usec(r, cmd)
        stop.set()
        pings = sorted(out.get(timeout=30))
        pinger.join()
    p99 = pings[int(len(pings) * 0.99)] if pings else 0.0
    return got, (u1 - u0) / max(1, c1 - c0), p99


def queue(port, n, make, r, cmd):
    """Opens n sockets, each sending one blocking command, while another
    process PINGs; returns (server µs per waiter, PING p99 ms, sockets)."""
    def work():
        # Connected first, then all sent at once: a burst, as many clients
        # arriving together make it.
        socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(n)]
        time.sleep(0.2)
        for i, s in enumerate(socks):
            s.sendall(make(i))
        deadline = time.time() + 60
        while r.info("clients")["blocked_clients"] < n and time.time() < deadline:
            time.sleep(0.005)
        return socks
    socks, us, p99 = while_pinged(port, r, cmd, work)
    return us, p99, socks


def queue_mailbox(port, n, r):
    """n `MAILBOX` requests on one held key, pipelined on one connection
    (each answered `WAITING`), while another process PINGs; returns
    (server µs per queued request, PING p99 ms, the connection, which stays
    open: its requests leave the queue when it closes)."""
    def work():
        time.sleep(0.2)
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"".join(resp("LOCK.ACQUIRE", "hotmb", f"m{i}", 600000, "BLOCK", 0, "MAILBOX",
                                "hotbox", "ID", f"r{i}") for i in range(n)))
        want, got = b"+WAITING\r\n" * n, b""
        s.settimeout(60)
        while len(got) < len(want):
            chunk = s.recv(1 << 20)
            if not chunk:
                break
            got += chunk
        if got != want:
            raise RuntimeError("a MAILBOX request was not answered WAITING")
        return s
    s, us, p99 = while_pinged(port, r, "lock.acquire", work)
    return us, p99, s


def mailbox_fifo(r, n):
    """The queued `MAILBOX` requests are granted in order: each release
    posts the next request's grant."""
    r.execute_command("LOCK.RELEASE", "hotmb", "owner")
    for i in range(min(n, 200)):
        element = r.lpop("hotbox")
        if element is None or not element.startswith(f"r{i} ".encode()):
            return False
        r.execute_command("LOCK.RELEASE", "hotmb", f"m{i}")
    return True


def run(n):
    srv = Server(extra=["--maxclients", str(n + 1000)])
    r = redis.Redis(port=srv.port)
    r.config_set("padlock.max-waiters-per-key", max(n, 10000))
    r.execute_command("LOCK.ACQUIRE", "hot", "owner", 600000)
    lock_us, lock_p99, lsocks = queue(
        srv.port, n, lambda i: resp("LOCK.ACQUIRE", "hot", f"w{i}", 600000, "BLOCK", 0),
        r, "lock.acquire")
    # The hand-off goes through the queue in order.
    r.execute_command("LOCK.RELEASE", "hot", "owner")
    order_ok = True
    for i in range(min(n, 200)):
        info = r.execute_command("LOCK.INFO", "hot")
        holder = dict(zip(info[::2], info[1::2]))[b"holder"]
        if holder != f"w{i}".encode():
            order_ok = False
            break
        r.execute_command("LOCK.RELEASE", "hot", holder)
    for s in lsocks:
        s.close()
    while r.info("clients")["blocked_clients"] > 0:
        time.sleep(0.05)
    list_us, list_p99, bsocks = queue(
        srv.port, n, lambda i: resp("BLPOP", "hotlist", 0), r, "blpop")
    for s in bsocks:
        s.close()
    r.execute_command("LOCK.ACQUIRE", "hotmb", "owner", 600000)
    mail_us, mail_p99, msock = queue_mailbox(srv.port, n, r)
    order_ok = mailbox_fifo(r, n) and order_ok
    msock.close()
    srv.stop()
    return dict(n=n, lock_us=lock_us, list_us=list_us, lock_p99=lock_p99, list_p99=list_p99,
                mail_us=mail_us, mail_p99=mail_p99, fifo=order_ok)


def fits(n):
    """Whether this process may open n sockets (raising its soft limit)."""
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = n + 200
    if soft >= need:
        return True
    if hard != resource.RLIM_INFINITY and hard < need:
        return False
    resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))
    return True


def rows(sizes):
    """One measured row per size (None where the machine allows too few
    open files)."""
    return [run(n) if fits(n) else dict(n=n, skipped=True) for n in sizes]


def formatted(measured):
    out = [
        "**One hot key**: N clients queue on one lock (`LOCK.ACQUIRE ... BLOCK 0`), then N on one "
        "list (`BLPOP`), all sent at once, then N `MAILBOX` requests on one lock pipelined on one "
        "connection (`... BLOCK 0 MAILBOX box ID rid`, each answered `WAITING`). Server time per "
        "queued waiter (`INFO commandstats`), and how late PINGs from another client, one due every "
        "millisecond, were answered (p99, open loop). FIFO: the first 200 served in order, blocked "
        "and mailed.",
        "",
        "| waiters on one key | LOCK.ACQUIRE BLOCK µs/waiter | BLPOP µs/waiter | ratio | "
        "PING p99 while locks queue | PING p99 while BLPOPs queue | MAILBOX µs/request | "
        "PING p99 while MAILBOX requests queue | FIFO hand-off |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for x in measured:
        if x.get("skipped"):
            out.append(f"| {x['n']:,} | (not run: this machine allows too few open files) | | | | | | | |")
            continue
        out.append(
            f"| {x['n']:,} | {x['lock_us']:.1f} | {x['list_us']:.1f} | "
            f"{x['lock_us'] / max(x['list_us'], 0.01):.1f}x | {x['lock_p99']:.2f} ms | "
            f"{x['list_p99']:.2f} ms | {x['mail_us']:.1f} | {x['mail_p99']:.2f} ms | "
            f"{'yes' if x['fifo'] else 'NO'} |")
    return "\n".join(out)


def table(sizes):
    return formatted(rows(sizes))


def main():
    print(table([int(a) for a in sys.argv[1:]] or [1000, 5000, 10000]))


if __name__ == "__main__":
    main()
