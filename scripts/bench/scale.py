"""Costs that must not grow with what other clients do, for `make bench`:

- `LOCK.WAITFOR` with 1,000 / 10,000 / 100,000 edges declared elsewhere:
  server time per call (INFO commandstats) and its ratio to the cost at
  1,000, with `LOCK.GRAPH` (default COUNT 10,000) and a plain
  `LOCK.ACQUIRE` beside it;
- `KEEP` with 1,000 / 20,000 bound leases of ttl 1 s on idle connections,
  AOF on: server CPU (share of a core above the same server idle), lease
  writes/s and AOF bytes/s.

    python scripts/bench/scale.py [waitfor|keep]
"""

import socket
import sys
import time

import pathlib
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # scripts/: harness, faultproxy
from harness import Server, resp


def usec(r, cmd):
    s = r.info("commandstats").get(f"cmdstat_{cmd}", {})
    return s.get("usec", 0), s.get("calls", 0)


def per_call(r, cmd, send):
    """Server µs per call of `cmd` for the calls `send()` makes."""
    u0, c0 = usec(r, cmd)
    send()
    u1, c1 = usec(r, cmd)
    return (u1 - u0) / max(1, c1 - c0)


def waitfor_row(edges, probes=2000):
    srv = Server(extra=["--padlock.max-wait-edges", str(edges + probes + 10)])
    r = srv.client()
    p = r.pipeline(transaction=False)
    for i in range(edges + probes):
        p.execute_command("LOCK.ACQUIRE", f"k:{i}", f"owner:{i}", 600000)
        if i < edges:
            p.execute_command("LOCK.WAITFOR", f"k:{i}", f"w:{i}", 600000)
        if i % 5000 == 4999:
            p.execute()
    p.execute()

    def declare():
        p = r.pipeline(transaction=False)
        for j in range(edges, edges + probes):
            p.execute_command("LOCK.WAITFOR", f"k:{j}", f"probe:{j}", 600000)
        p.execute()

    def acquire():
        p = r.pipeline(transaction=False)
        for j in range(probes):
            p.execute_command("LOCK.ACQUIRE", f"free:{j}", "h", 600000)
        p.execute()

    wf = per_call(r, "lock.waitfor", declare)
    acq = per_call(r, "lock.acquire", acquire)
    graph = per_call(r, "lock.graph", lambda: [r.execute_command("LOCK.GRAPH") for _ in range(5)])
    srv.stop()
    return dict(edges=edges, waitfor=wf, acquire=acq, graph_ms=graph / 1000)


def waitfor_rows(sizes=(1000, 10_000, 100_000)):
    return [waitfor_row(n) for n in sizes]


def waitfor_formatted(measured):
    rows = [
        "**Declared waits** (`LOCK.WAITFOR`): server time per call with N edges declared by "
        "other holders (INFO commandstats, 2,000 calls), a plain `LOCK.ACQUIRE` in the same "
        "server, and one `LOCK.GRAPH` (default COUNT 10,000).",
        "",
        "| edges elsewhere | LOCK.WAITFOR µs/call | vs 1,000 edges | LOCK.ACQUIRE µs/call | "
        "LOCK.GRAPH ms |",
        "| --- | --- | --- | --- | --- |",
    ]
    first = None
    for x in measured:
        first = first or x["waitfor"]
        rows.append(f"| {x['edges']:,} | {x['waitfor']:.2f} | {x['waitfor'] / first:.2f}x | "
                    f"{x['acquire']:.2f} | {x['graph_ms']:.1f} |")
    return "\n".join(rows)


def waitfor_table(sizes=(1000, 10_000, 100_000)):
    return waitfor_formatted(waitfor_rows(sizes))


def cpu(r):
    i = r.info("cpu")
    return i["used_cpu_sys"] + i["used_cpu_user"]


def keep_row(leases, ttl=1000, conns=4, window=10):
    srv = Server(extra=["--appendonly", "yes", "--appendfsync", "everysec", "--auto-aof-rewrite-percentage", "0"])
    r = srv.client()
    c0, t0 = cpu(r), time.time()
    time.sleep(window / 2)
    idle = (cpu(r) - c0) / (time.time() - t0)
    socks = [socket.create_connection(("127.0.0.1", srv.port)) for _ in range(conns)]
    for j, s in enumerate(socks):
        batch = b"".join(resp("LOCK.ACQUIRE", f"keep:{i}", "me", ttl, "KEEP")
                         for i in range(j, leases, conns))
        s.sendall(batch)
    # Read the replies off so that the connections stay idle and healthy.
    for j, s in enumerate(socks):
        want, got = len(range(j, leases, conns)), 0
        while got < want:
            got += s.recv(1 << 20).count(b"\r\n")
    time.sleep(ttl / 1000 + 0.5)
    k0, c0, a0, t0 = (r.info("padlock")["padlock_keep_renewals"], cpu(r),
                      r.info("persistence")["aof_current_size"], time.time())
    time.sleep(window)
    dt = time.time() - t0
    rate = (r.info("padlock")["padlock_keep_renewals"] - k0) / dt
    busy = (cpu(r) - c0) / dt
    aof = (r.info("persistence")["aof_current_size"] - a0) / dt
    held = r.dbsize()
    for s in socks:
        s.close()
    srv.stop()
    return dict(leases=leases, ttl=ttl, renewals=rate, cpu=busy - idle, aof=aof, held=held)


def idle_row(conns, max_idle_ms, window=10):
    """Server CPU above idle with `conns` connections each holding one
    bound lease and sending a PING every second (a client's liveness
    watch), with keep-max-idle-ms as given (0 = off)."""
    # Arguments right after --loadmodule are the module's.
    srv = Server(extra=["keep-max-idle-ms", str(max_idle_ms), "--maxclients", str(conns + 100)])
    r = srv.client()
    c0, t0 = cpu(r), time.time()
    time.sleep(2)
    idle = (cpu(r) - c0) / (time.time() - t0)
    socks = []
    for i in range(conns):
        s = socket.create_connection(("127.0.0.1", srv.port))
        s.sendall(resp("LOCK.ACQUIRE", f"idle:{i}", "me", 30_000, "KEEP"))
        socks.append(s)
    for s in socks:
        s.recv(256)
    c0, t0 = cpu(r), time.time()
    end = t0 + window
    while time.time() < end:
        tick = time.time()
        for s in socks:
            s.sendall(b"*1\r\n$4\r\nPING\r\n")
        for s in socks:
            s.recv(256)
        time.sleep(max(0.0, 1 - (time.time() - tick)))
    dt = time.time() - t0
    busy = (cpu(r) - c0) / dt
    bound = r.info("padlock")["padlock_keep_bound"]
    for s in socks:
        s.close()
    srv.stop()
    return dict(conns=conns, max_idle_ms=max_idle_ms, cpu=busy - idle, bound=bound)


def idle_rows(sizes=(1000, 8000), max_idle_ms=10_000):
    out = []
    for n in sizes:
        off, on = idle_row(n, 0), idle_row(n, max_idle_ms)
        out.append(dict(conns=n, off=off["cpu"], on=on["cpu"], bound=on["bound"]))
    return out


def idle_formatted(measured, max_idle_ms=10_000):
    rows = [
        f"**keep-max-idle-ms** ({max_idle_ms:,} against 0 = off, same run): N connections each "
        "holding one bound lease and sending a PING a second, server CPU above the same "
        "server idle over 10 s. Target: at most 1% of a core at 8,000 with it on.",
        "",
        "| bound connections | CPU, off | CPU, on | on - off |",
        "| --- | --- | --- | --- |",
    ]
    for x in measured:
        rows.append(f"| {x['conns']:,} | {x['off'] * 100:.2f}% | {x['on'] * 100:.2f}% | "
                    f"{(x['on'] - x['off']) * 100:.2f}% |")
    return "\n".join(rows)


def keep_rows(sizes=(1000, 20_000)):
    return [keep_row(n) for n in sizes]


def keep_formatted(measured):
    rows = [
        "**KEEP** (leases the server keeps while their connection lives): N locks with ttl "
        "1 s bound on 4 idle connections, AOF on (everysec); server CPU above the same server "
        "idle, lease writes (`keep_renewals`) and AOF growth per second over 10 s. Target for "
        "20,000: at most 5% of a core and 50 KB/s of AOF.",
        "",
        "| bound leases | lease writes/s | server CPU (share of a core) | AOF bytes/s | still held |",
        "| --- | --- | --- | --- | --- |",
    ]
    for x in measured:
        rows.append(f"| {x['leases']:,} | {x['renewals']:,.0f} | {x['cpu'] * 100:.1f}% | "
                    f"{x['aof'] / 1000:,.0f} KB/s | {x['held']:,} |")
    return "\n".join(rows)


def keep_table(sizes=(1000, 20_000)):
    return keep_formatted(keep_rows(sizes))


def main():
    what = sys.argv[1:] or ["waitfor", "keep", "idle"]
    if "waitfor" in what:
        print(waitfor_table(), "\n", flush=True)
    if "keep" in what:
        print(keep_table(), flush=True)
    if "idle" in what:
        print(idle_formatted(idle_rows()), flush=True)


if __name__ == "__main__":
    main()
