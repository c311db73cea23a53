"""What waiting costs in a cluster, for `make bench` (issue: one process,
two connections): N asyncio waiters in one process on K keys of K slots
spread over a three-master cluster, queued while the keys are held, then
served. A mailbox must share its request's slot, so the client keeps one
mailbox per slot and hears of them through client tracking on one
connection per master. Reported: padlock's connections on the busiest
master (counted against the application's own before any lock), FIFO
order per key, the application's own PING latency while they queue and
are served, and the time to serve them all.

    python scripts/bench/clusterwaits.py [n] [keys]
"""

import asyncio
import os
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "clients" / "python" / "src"))

from harness import Server  # noqa: E402
from clientwaits import Pinger  # noqa: E402


def start_cluster(n=3, extra=()):
    nodes = [Server(extra=["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", *extra])
             for _ in range(n)]
    step = 16384 // n
    for i, s in enumerate(nodes):
        c = s.client()
        c.execute_command("CLUSTER", "ADDSLOTSRANGE", i * step, 16383 if i == n - 1 else (i + 1) * step - 1)
        if i:
            c.execute_command("CLUSTER", "MEET", "127.0.0.1", nodes[0].port)
        c.close()
    end = time.time() + 30
    while time.time() < end:
        if all(b"cluster_state:ok" in s.client().execute_command("CLUSTER", "INFO")
               and len(s.client().execute_command("CLUSTER", "SLOTS")) == n for s in nodes):
            return nodes
        time.sleep(0.1)
    raise RuntimeError("the cluster did not form")


class GlidePing:
    """The application's own glide cluster client, pinged like redis-py's."""

    def __init__(self, client):
        self.client = client

    async def ping(self):
        await self.client.ping()


async def asyncio_cluster(nodes, n, k, on_glide=False):
    from redis.asyncio.cluster import RedisCluster

    from padlock import aio

    if on_glide:
        import glide

        cfg = glide.GlideClusterClientConfiguration([glide.NodeAddress("127.0.0.1", nodes[0].port)])
        own = await glide.GlideClusterClient.create(cfg)
        app, locks = GlidePing(own), aio.glide(glide.GlideClusterClient, cfg)
    else:
        app = locks = RedisCluster(host="127.0.0.1", port=nodes[0].port)
        await app.ping(target_nodes=RedisCluster.ALL_NODES)
    raws = [s.client() for s in nodes]
    base = [len(r.client_list()) for r in raws]
    keys = [f"hot:{i}" for i in range(k)]
    owners = [aio.Lock(locks, key, ttl=60, holder="owner") for key in keys]
    for o in owners:
        await o.acquire()
    order = {key: [] for key in keys}

    async def waiter(i):
        key = keys[i % k]
        lock = aio.Lock(locks, key, ttl=60)
        await lock.acquire()
        order[key].append(i)
        await lock.release()

    def queued():
        total = 0
        for key in keys:
            for r in raws:
                try:
                    raw = r.execute_command("LOCK.INFO", key)
                except Exception:  # noqa: BLE001 - MOVED: another node's key
                    continue
                total += int(dict(zip(raw[::2], raw[1::2]))[b"waiters"]) if raw else 0
        return total

    pinger = Pinger(app)
    tasks = []
    for i in range(n):
        tasks.append(asyncio.create_task(waiter(i)))
        if i % 500 == 499:
            await asyncio.sleep(0)
    while queued() < n:
        await asyncio.sleep(0.05)
    conns = [len(r.client_list()) - b for r, b in zip(raws, base)]
    t0 = time.perf_counter()
    for o in owners:
        await o.release()
    await asyncio.gather(*tasks)
    served = time.perf_counter() - t0
    pinged = await pinger.stop()
    await (own.close() if on_glide else app.aclose())
    fifo = all(order[key] == sorted(order[key]) for key in keys)
    name = "Python asyncio on valkey-glide" if on_glide else "Python asyncio (redis-py)"
    return {"client": f"{name}, 3-master cluster", "waiters": n, "keys": k,
            "connections_per_master": max(conns), "fifo": fifo,
            **pinged, "served_s": served}


def formatted(rows):
    lines = ["**Waiting in a cluster**: N asyncio waiters in one process on K keys of K slots over three "
             "masters, queued while held, then served; a mailbox per slot, heard of through client tracking "
             "on one connection per master. Connections: padlock's on the busiest master (besides the "
             "application's own).", "",
             "| client | waiters | keys (slots) | connections per master | FIFO per key | PING p50 | PING p99 "
             "| served in |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r['client']} | {r['waiters']:,} | {r['keys']} | {r['connections_per_master']} "
                     f"| {'yes' if r['fifo'] else 'no'} | {r['ping_p50_ms']:.2f} ms | {r['ping_p99_ms']:.2f} ms "
                     f"| {r['served_s']:.1f} s |")
    return "\n".join(lines)


def measure(n, k):
    nodes = start_cluster(extra=["--padlock.max-waiters-per-key", str(max(n, 10000))])
    try:
        rows = [asyncio.run(asyncio_cluster(nodes, n, k))]
        try:
            import glide  # noqa: F401 - the optional driver
        except ImportError:
            return rows
        return rows + [asyncio.run(asyncio_cluster(nodes, n, k, on_glide=True))]
    finally:
        for s in nodes:
            s.stop()


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10000
    k = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    os.environ.setdefault("PADLOCK_SO", str(ROOT / "target" / "release" / "libpadlock.so"))
    print(formatted(measure(n, k)))


if __name__ == "__main__":
    main()
