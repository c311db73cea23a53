"""What holds and waits cost the server through one process's clients, for
`make bench`: N holds, then N waiters on one held key, each in a thread (or
an asyncio task) of one process — padlock's Python client (threads and
asyncio) beside redis-py's own `Lock`, on the same server, in one run.
Reported per client: connections on the server besides the application's
own while the N hold, and while the N wait; the commands per second the
server runs while the N holds sit idle (what watching them costs); and,
for the waiters, how many acquired and in what order.

    python scripts/bench/holdcost.py [n] [--json]
"""

import asyncio
import json
import pathlib
import subprocess
import sys
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "clients" / "python" / "src"))

from harness import Server  # noqa: E402

IDLE_SECONDS = 6.0
TTL = 3.0


def calls(r):
    """Commands the server has run, all kinds."""
    return sum(v["calls"] for v in r.info("commandstats").values())


def idle_rate(r, watcher_conns):
    """Commands per second the server runs while nothing but watching
    happens (the measuring connection's own INFO calls left out)."""
    before = calls(r)
    time.sleep(IDLE_SECONDS)
    after = calls(r)
    return max(0.0, (after - before - 1) / IDLE_SECONDS)


def as_text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def server_queue(r):
    """The holders queued on "hot" in serving order (the first 100), or
    [] when nobody queues there server-side."""
    if r.type("hot") != b"pdlk-lock":
        return []
    info = r.execute_command("LOCK.INFO", "hot")
    if not info:
        return []
    fields = dict(zip(info[::2], info[1::2]))
    return [as_text(entry[0]) for entry in fields.get(b"queue", [])]


def in_threads(n, make_hold, port):
    """N holds on N keys (each in a thread that keeps it), then N waiters
    on one held key: the numbers of the table."""
    import redis

    app = redis.Redis(port=port)
    watch = redis.Redis(port=port)
    base = len(watch.client_list())
    ready = threading.Barrier(n + 1)
    done = threading.Event()
    errors = []

    def holder(i):
        h = make_hold(app, f"h:{i}")
        try:
            h.acquire()
        except Exception as e:  # noqa: BLE001 - counted, reported
            errors.append(e)
        ready.wait()
        done.wait()
        try:
            h.release()
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=holder, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    ready.wait()
    hold_conns = len(watch.client_list()) - base
    rate = idle_rate(watch, 0)
    done.set()
    for t in threads:
        t.join()

    owner = make_hold(app, "hot")
    owner.acquire()
    order, got = [], []

    def waiter(i):
        h = make_hold(app, "hot")
        try:
            if h.acquire(timeout=60):
                got.append(i)
                order.append(getattr(h, "holder", i))
                h.release()
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    waiters = []
    for i in range(n):
        t = threading.Thread(target=waiter, args=(i,), daemon=True)
        t.start()
        waiters.append(t)
        time.sleep(0.0005)  # they ask in this order
    time.sleep(0.5)  # all asked
    waiting_from = calls(watch)
    time.sleep(2.0)
    wait_rate = max(0.0, (calls(watch) - waiting_from - 1) / 2.0)
    wait_conns = len(watch.client_list()) - base
    queue = server_queue(watch)
    owner.release()
    for t in waiters:
        t.join(120)
    # Threads reach the server in the order the scheduler runs them: FIFO
    # is the server's queue order (its first 100), where there is one.
    fifo = None if not queue else [as_text(h) for h in order[:len(queue)]] == queue
    return dict(hold_conns=hold_conns, idle_rate=rate, wait_conns=wait_conns, wait_rate=wait_rate,
                acquired=len(got), fifo=fifo, errors=len(errors))


async def in_tasks(n, port):
    """The same through padlock's asyncio client (tasks, not threads)."""
    import redis
    import redis.asyncio as aredis

    from padlock import aio

    app = aredis.Redis(port=port)
    watch = redis.Redis(port=port)
    await app.ping()
    base = len(watch.client_list())
    holds = [aio.Lock(app, f"h:{i}", ttl=TTL) for i in range(n)]
    await asyncio.gather(*(h.acquire() for h in holds))
    hold_conns = len(watch.client_list()) - base
    before = calls(watch)
    await asyncio.sleep(IDLE_SECONDS)
    rate = max(0.0, (calls(watch) - before - 1) / IDLE_SECONDS)
    await asyncio.gather(*(h.release() for h in holds))

    owner = aio.Lock(app, "hot", ttl=TTL)
    await owner.acquire()
    order = []

    async def waiter(i):
        h = aio.Lock(app, "hot", ttl=TTL)
        if await h.acquire(timeout=60):
            order.append(i)
            await h.release()

    tasks = []
    for i in range(n):
        tasks.append(asyncio.create_task(waiter(i)))
        if i % 100 == 99:
            await asyncio.sleep(0)
    await asyncio.sleep(0.5)
    waiting_from = calls(watch)
    await asyncio.sleep(2.0)
    wait_rate = max(0.0, (calls(watch) - waiting_from - 1) / 2.0)
    wait_conns = len(watch.client_list()) - base
    await owner.release()
    await asyncio.gather(*tasks)
    await app.aclose()
    return dict(hold_conns=hold_conns, idle_rate=rate, wait_conns=wait_conns, wait_rate=wait_rate,
                acquired=len(order), fifo=order == sorted(order), errors=0)


class RedisPyLock:
    """redis-py's `Lock` as its docs show it: a lease of TTL, blocking
    acquire polling every 0.1 s (its default sleep)."""

    def __init__(self, r, key):
        self.lock = r.lock(key, timeout=TTL * 20, sleep=0.1)

    def acquire(self, timeout=None):
        return self.lock.acquire(blocking=True, blocking_timeout=timeout)

    def release(self):
        self.lock.release()


def node(n, port):
    """padlock's TypeScript client and redis-semaphore (scripts/bench/node)."""
    here = ROOT / "scripts" / "bench" / "node"
    if not (here / "node_modules" / "redis-semaphore").exists():
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", "-q"], cwd=here, check=True)
    if not (ROOT / "clients" / "typescript" / "dist" / "src" / "index.js").exists():
        subprocess.run(["npx", "tsc", "-p", "tsconfig.json"], cwd=ROOT / "clients" / "typescript", check=True)
    out = subprocess.run(["node", "../holdcost.mjs", str(port), str(n)], cwd=here, capture_output=True,
                         text=True, check=True)
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def jvm(n, port):
    """padlock's Java client on Lettuce and on Jedis, and Redisson's RLock
    (clients/java/src/bench, HoldCost)."""
    out = subprocess.run(["mvn", "-q", "-B", "-ntp", "-P", "bench", "compile", "exec:java",
                          "-Dbench.main=io.padlock.bench.HoldCost", f"-Dexec.args={port} {n}"],
                         cwd=ROOT / "clients" / "java", capture_output=True, text=True, check=True)
    return [json.loads(line[line.index("{"):]) for line in out.stdout.splitlines() if "{" in line]


def go(n, port):
    """padlock's Go client (clients/go/bench -holdcost)."""
    out = subprocess.run(["go", "run", ".", "-holdcost", str(n), "-addr", f"127.0.0.1:{port}"],
                         cwd=ROOT / "clients" / "go" / "bench", capture_output=True, text=True, check=True)
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def run(n, others=True):
    from padlock import Lock

    rows = {}
    for name, fn in [
        ("padlock Python (threads)", lambda port: in_threads(
            n, lambda r, k: Lock(r, k, ttl=TTL), port)),
        ("padlock Python (asyncio)", lambda port: asyncio.run(in_tasks(n, port))),
        ("redis-py Lock (threads)", lambda port: in_threads(n, RedisPyLock, port)),
    ]:
        s = Server()
        try:
            rows[name] = fn(s.port)
        finally:
            s.stop()
        print(f"{name}: {rows[name]}", file=sys.stderr, flush=True)
    for fn in (node, jvm, go) if others else ():
        s = Server()
        try:
            for row in fn(n, s.port):
                rows[row.pop("client")] = row
                print(row, file=sys.stderr, flush=True)
        finally:
            s.stop()
    return rows


FIFO = {True: "yes", False: "no", None: "no queue (polling)"}


def table(n, rows):
    lines = [f"| client | connections, {n:,} holds | connections, {n:,} waiters "
             f"| server commands/s, {n:,} idle holds | server commands/s, {n:,} waiting "
             f"| waiters served | FIFO |",
             "| --- | ---: | ---: | ---: | ---: | ---: | --- |"]
    for name, r in rows.items():
        lines.append(f"| {name} | {r['hold_conns']:,} | {r['wait_conns']:,} | {r['idle_rate']:,.0f} "
                     f"| {r['wait_rate']:,.0f} | {r['acquired']:,} | {FIFO[r['fifo']]} |")
    return "\n".join(lines)


def formatted(n, rows):
    return (f"**Holds and waits through the clients**: {n:,} holds on {n:,} keys in one process "
            f"(a thread, task, goroutine or future each), then {n:,} waiters on one held key; "
            f"connections on the server besides those the application's client has once it "
            f"answered (Redisson's pool of 25 included there), and the commands per second the "
            f"server runs while the holds sit idle ({IDLE_SECONDS:.0f} s, leases of {TTL:.0f} s: "
            f"padlock's watching, which before `MAILBOX` was one `LOCK.INFO` per hold per "
            f"interval, 1,000/s) and while the waiters wait (2 s; a script's own calls count). "
            f"redis-py's `Lock` renews nothing and polls its waits every 0.1 s on a pooled "
            f"connection each; redis-semaphore's `Mutex` renews every 0.8 of its lease and polls "
            f"every 10 ms on the application's connection; Redisson's watchdog renews every third "
            f"of its lease and its waits hear of releases through pub/sub. Waiters served within "
            f"120 s; FIFO is the order served against the order queued (padlock's: against the "
            f"server's queue where threads or goroutines race to it).\n\n" + table(n, rows))


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    n = int(args[0]) if args else 1000
    rows = run(n)
    if "--json" in sys.argv:
        print(json.dumps(rows))
    else:
        print(formatted(n, rows))


if __name__ == "__main__":
    main()
