"""An uncontended acquire + release through padlock's Python and TypeScript
clients, next to `SET key v NX PX` + `DEL` sent the same way (the same
driver, its own connection, one call after the other), for `make bench`:
what a lock costs a caller when nobody else wants it. The two are
interleaved call by call, so that the machine's drift falls on both; the
medians of N each. (The Go and Java clients have the same rows in their own
benchmarks.)

    python scripts/bench/uncontended.py [n]
    python scripts/bench/uncontended.py --instructions   # the Python rows in client instructions

Latency on a shared 2-core VM moves with the machine's load (a busy
machine wakes a sleeping reader sooner), so the Python rows are also
counted in instructions the client process runs per pair (callgrind,
`valgrind` if installed): the same loop run 500 and 2,000 times, the
difference divided by 1,500, which leaves start-up and warm-up out.
Repeatable to well under 1%, and it sees the client's own cost alone.
"""

import asyncio
import json
import pathlib
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "clients" / "python" / "src"))

from harness import Server  # noqa: E402

WARMUP = 500


def median_us(xs):
    return sorted(xs)[len(xs) // 2] * 1e6


def sync_pairs(port):
    """One `SET NX PX` + `DEL` and one acquire + release, through redis-py."""
    import redis

    from padlock import Lock

    r = redis.Redis(port=port)
    lock = Lock(r, "uncontended:sync", ttl=5)

    def base():
        r.set("uncontended:set", "v", nx=True, px=5000)
        r.delete("uncontended:set")

    def padlock():
        lock.acquire()
        lock.release()
    return base, padlock


def aio_pairs(port):
    """The same through redis-py's asyncio client."""
    import redis.asyncio as aredis

    from padlock import aio

    r = aredis.Redis(port=port)
    lock = aio.Lock(r, "uncontended:aio", ttl=5)

    async def base():
        await r.set("uncontended:set", "v", nx=True, px=5000)
        await r.delete("uncontended:set")

    async def padlock():
        await lock.acquire()
        await lock.release()
    return base, padlock


def python_sync(port, n):
    base, padlock = sync_pairs(port)
    times = [], []
    for i in range(n + WARMUP):
        for f, out in zip((base, padlock), times):
            t = time.perf_counter()
            f()
            if i >= WARMUP:
                out.append(time.perf_counter() - t)
    return median_us(times[0]), median_us(times[1])


async def python_asyncio(port, n):
    base, padlock = aio_pairs(port)
    times = [], []
    for i in range(n + WARMUP):
        for f, out in zip((base, padlock), times):
            t = time.perf_counter()
            await f()
            if i >= WARMUP:
                out.append(time.perf_counter() - t)
    return median_us(times[0]), median_us(times[1])


def typescript(port, n):
    out = subprocess.run(["node", str(ROOT / "scripts" / "bench" / "uncontended.mjs"), str(port), str(n)],
                         cwd=ROOT / "clients" / "typescript", capture_output=True, text=True, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    return got["base"], got["padlock"]


def measure(n=3000):
    rows = {}
    for name, fn in [("Python (redis-py, threads)", python_sync),
                     ("Python (redis-py, asyncio)", lambda p, k: asyncio.run(python_asyncio(p, k))),
                     ("TypeScript (ioredis)", typescript)]:
        s = Server()
        try:
            rows[name] = fn(s.port, n)
        finally:
            s.stop()
        print(f"{name}: {rows[name]}", file=sys.stderr, flush=True)
    return rows


def formatted(rows, n=3000):
    lines = [f"**Uncontended acquire + release through the clients**, against `SET NX PX` + `DEL` sent "
             f"through the same driver the same way, interleaved call by call (medians of {n:,}; "
             f"`python scripts/bench/uncontended.py`). Goal: at most 1.3x.", "",
             "| client | SET NX PX + DEL µs | padlock acquire + release µs | ratio |",
             "| --- | ---: | ---: | ---: |"]
    for name, (base, pl) in rows.items():
        lines.append(f"| {name} | {base:.0f} | {pl:.0f} | {pl / base:.2f}x |")
    return "\n".join(lines)


CHILD = """
import asyncio, os, sys
sys.path[:0] = [{bench!r}, {src!r}]
import uncontended
port, n, mode = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
flavour, which = mode.split("-")
if flavour == "sync":
    f = uncontended.sync_pairs(port)[which == "pl"]
    for _ in range(200 + n):
        f()
else:
    async def main():
        f = uncontended.aio_pairs(port)[which == "pl"]
        for _ in range(200 + n):
            await f()
    asyncio.run(main())
os._exit(0)
"""


def client_instructions(port, mode, low=500, high=2000):
    """Instructions the client process runs per pair (see the docstring)."""
    import tempfile

    code = CHILD.format(bench=str(ROOT / "scripts" / "bench"), src=str(ROOT / "clients" / "python" / "src"))
    totals = []
    with tempfile.TemporaryDirectory() as d:
        for n in (low, high):
            out = f"{d}/cg.{n}"
            subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                            sys.executable, "-c", code, str(port), str(n), mode],
                           check=True, capture_output=True)
            with open(out) as f:
                totals.append(next(int(line.split()[1]) for line in f
                                   if line.startswith(("summary:", "totals:"))))
    return (totals[1] - totals[0]) / (high - low)


def instructions():
    s = Server()
    try:
        got = {m: client_instructions(s.port, m) for m in ("sync-base", "sync-pl", "aio-base", "aio-pl")}
    finally:
        s.stop()
    lines = ["| client | SET NX PX + DEL, client instructions | padlock acquire + release | ratio |",
             "| --- | ---: | ---: | ---: |"]
    for name, m in (("Python (redis-py, threads)", "sync"), ("Python (redis-py, asyncio)", "aio")):
        base, pl = got[m + "-base"], got[m + "-pl"]
        lines.append(f"| {name} | {base:,.0f} | {pl:,.0f} | {pl / base:.2f}x |")
    return "\n".join(lines)


if __name__ == "__main__":
    if sys.argv[1:] == ["--instructions"]:
        print(instructions())
    else:
        n = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
        print(formatted(measure(n), n))
