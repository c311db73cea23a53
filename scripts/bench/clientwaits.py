"""What a waiting caller costs through padlock's own clients, for `make
bench` (issue: one process, two connections): N waiters on one key in one
process — Python asyncio, TypeScript (ioredis), Java on Lettuce and on Jedis
with its default pool of 8 — queued while the key is
held, then served one after another. Reported per client: padlock's
connections on the server while they wait (besides the application's own),
whether they were served in FIFO order, the application's own PING latency
(p50/p99, one every millisecond on its own connection in the same process)
while they queue and are served, client memory per waiter, and the time to
serve them all.

    python scripts/bench/clientwaits.py [n]
"""

import asyncio
import json
import os
import pathlib
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "clients" / "python" / "src"))

from harness import Server  # noqa: E402


def rss():
    """This process's resident memory (bytes)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def percentile(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))] if xs else 0.0


class Pinger:
    """The application's own PING, one every millisecond on its own client
    in the same process, timed (ms) until `stop()`."""

    def __init__(self, app):
        self.app, self.times, self._stop = app, [], False
        self._task = asyncio.create_task(self._run())

    async def _run(self):
        while not self._stop:
            t0 = time.perf_counter()
            await self.app.ping()
            self.times.append((time.perf_counter() - t0) * 1000)
            await asyncio.sleep(0.001)

    async def stop(self):
        self._stop = True
        await self._task
        return {"ping_p50_ms": percentile(self.times, 0.5), "ping_p99_ms": percentile(self.times, 0.99)}


async def python_asyncio(port, n):
    import redis.asyncio as aredis

    from padlock import aio

    app = aredis.Redis(port=port)
    watch = aredis.Redis(port=port)
    await app.ping()
    base = len(await watch.client_list())
    owner = aio.Lock(app, "hot", ttl=60)
    await owner.acquire()
    order = []

    async def waiter(i):
        lock = aio.Lock(app, "hot", ttl=60)
        await lock.acquire()
        order.append(i)
        await lock.release()

    pinger = Pinger(app)
    before = rss()
    tasks = []
    for i in range(n):
        tasks.append(asyncio.create_task(waiter(i)))
        if i % 500 == 499:
            await asyncio.sleep(0)  # let them queue in the order they came
    while int(dict(zip(*[iter(await watch.execute_command("LOCK.INFO", "hot"))] * 2))[b"waiters"]) < n:
        await asyncio.sleep(0.01)
    mem = (rss() - before) / n
    conns = len(await watch.client_list()) - base
    t0 = time.perf_counter()
    await owner.release()
    await asyncio.gather(*tasks)
    served = time.perf_counter() - t0
    pinged = await pinger.stop()
    await app.aclose()
    await watch.aclose()
    return {"client": "Python asyncio", "waiters": n, "connections": conns, "fifo": order == list(range(n)), **pinged,
            "bytes_per_waiter": mem, "served_s": served}


def typescript(port, n):
    dist = ROOT / "clients" / "typescript" / "dist" / "src" / "index.js"
    if not dist.exists():
        subprocess.run(["npx", "tsc", "-p", "tsconfig.json"], cwd=ROOT / "clients" / "typescript", check=True)
    out = subprocess.run(["node", "--expose-gc", str(ROOT / "scripts" / "bench" / "clientwaits.mjs"), str(port), str(n)],
                         cwd=ROOT / "clients" / "typescript", capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def java(port, n):
    """Java on Lettuce and on Jedis with its default pool (clients/java/src/bench, Waiters)."""
    out = subprocess.run(["mvn", "-q", "-B", "-ntp", "-P", "bench", "compile", "exec:java",
                          "-Dbench.main=io.padlock.bench.Waiters", f"-Dexec.args={port} {n}"],
                         cwd=ROOT / "clients" / "java", capture_output=True, text=True, check=True)
    # (Maven may put a colour reset before the first line.)
    return [json.loads(line[line.index("{"):]) for line in out.stdout.splitlines() if "{" in line]


def formatted(rows):
    lines = ["**Waiting through the clients**: N waiters on one key in one process, queued while it is held, "
             "then served in turn; padlock's connections on the server while they wait (besides the "
             "application's), the application's own PING (one per ms, its own connection, same process), "
             "client memory per waiter (resident memory for Python, JS heap for TypeScript, Java heap). "
             "Java's waiters are `lockAsync()` futures, on Lettuce and on Jedis with its default pool of 8 "
             "(padlock borrows none of the 8).", "",
             "| client | waiters | connections | FIFO | PING p50 | PING p99 | bytes per waiter | served in |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r['client']} | {r['waiters']:,} | {r['connections']} | {'yes' if r['fifo'] else 'no'} "
                     f"| {r['ping_p50_ms']:.2f} ms | {r['ping_p99_ms']:.2f} ms | {r['bytes_per_waiter']:,.0f} "
                     f"| {r['served_s']:.1f} s |")
    return "\n".join(lines)


def measure(n):
    rows = []
    s = Server(extra=["--padlock.max-waiters-per-key", str(max(n, 10000))])
    try:
        rows.append(asyncio.run(python_asyncio(s.port, n)))
        s.client().flushall()
        rows.append(typescript(s.port, n))
        s.client().flushall()
        rows.extend(java(s.port, n))
    finally:
        s.stop()
    return rows


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10000
    os.environ.setdefault("PADLOCK_SO", str(ROOT / "target" / "release" / "libpadlock.so"))
    print(formatted(measure(n)))


if __name__ == "__main__":
    main()
