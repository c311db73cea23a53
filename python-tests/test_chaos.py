"""Chaos on a fixed seed: workers acquire, release and wait with BLOCK on a
few keys of every kind with short leases, while an operator pauses writes
or all clients, flushes, swaps and moves databases, renames, copies,
restores, changes expiries, reloads, rewrites the AOF, squeezes maxmemory,
and kills or unblocks clients. The server must live; at the end every
blocked client has been answered and no wait edge is left.

`make test` runs it for a few seconds; `make chaos` for a minute
(PADLOCK_CHAOS_SECONDS)."""

import os
import random
import threading
import time

import redis

from conftest import wait_for

SECONDS = float(os.environ.get("PADLOCK_CHAOS_SECONDS", "6"))
LOCKS = ["l1", "l2"]
SEMS = ["s1"]
RWS = ["rw1"]
MULTI = ["{c}a", "{c}b"]


def connected(server, ids, name):
    """A worker's connection, its id where the operator kills from; tried
    again for a while, as the server may be restarting."""
    deadline = time.time() + 30
    while True:
        try:
            c = server.client(socket_timeout=15)
            ids[name] = c.client_id()
            return c
        except redis.ConnectionError:  # (loading too)
            if time.time() > deadline:
                raise
            time.sleep(0.02)


def worker(server, seed, stop, stats, ids, idx):
    rng = random.Random(seed)
    holder = f"w{idx}"

    def connect():
        return connected(server, ids, idx)

    c = connect()
    while not stop.is_set():
        op = rng.randrange(9)
        ttl = rng.randint(30, 400)
        block = rng.randint(20, 400)
        try:
            if op == 0:
                c.execute_command("LOCK.ACQUIRE", rng.choice(LOCKS), holder, ttl, "BLOCK", block)
            elif op == 1:
                c.execute_command("LOCK.RELEASE", rng.choice(LOCKS), holder)
            elif op == 2:
                c.execute_command("SEM.ACQUIRE", SEMS[0], holder, 2, ttl,
                                  "PERMITS", rng.randint(1, 2), "BLOCK", block)
            elif op == 3:
                c.execute_command("SEM.RELEASE", SEMS[0], holder)
            elif op == 4:
                c.execute_command("LOCK.MACQUIRE", 2, *MULTI, holder, ttl, "BLOCK", block)
            elif op == 5:
                c.execute_command("LOCK.MRELEASE", 2, *MULTI, holder)
            elif op == 6:
                c.execute_command("RWLOCK.ACQUIRE", RWS[0], holder, rng.choice(["READ", "WRITE"]),
                                  ttl, "BLOCK", block)
            elif op == 7:
                c.execute_command("RWLOCK.RELEASE", RWS[0], holder, rng.choice(["READ", "WRITE"]))
            else:
                c.execute_command("LOCK.ACQUIRE", rng.choice(LOCKS), holder, ttl)
            stats["ok"] += 1
        except redis.TimeoutError:
            stats["hung"] += 1
            c = connect()
        except redis.ConnectionError:
            stats["dropped"] += 1
            time.sleep(0.01)
            c = connect()
        except redis.ResponseError:
            stats["errors"] += 1
    c.close()


def operator(server, rng, stop, stats, ids, more=(), reload=True):
    """The operator's acts; `more` adds acts (each a function of the
    client and the rng) drawn as often as each of the sixteen. `reload`:
    `DEBUG RELOAD` is one of them (see test_chaos_holds for why a run that
    compares a replica's lists leaves it out)."""
    op_client = server.client(socket_timeout=30)
    keys = LOCKS + SEMS + MULTI + RWS
    paused_until = 0.0
    while not stop.is_set():
        time.sleep(rng.uniform(0.01, 0.06))
        act = rng.randrange(16 + len(more))
        k = rng.choice(keys)
        stats["started"] = stats.get("started", 0) + 1
        try:
            if act >= 16:
                more[act - 16](op_client, rng)
            elif act == 0:
                ms = rng.randint(20, 250)
                op_client.execute_command("CLIENT", "PAUSE", ms, rng.choice(["WRITE", "ALL"]))
                paused_until = time.monotonic() + ms / 1000 + 0.05
            elif act == 1:
                op_client.flushdb(asynchronous=rng.random() < 0.5)
            elif act == 2:
                op_client.flushall(asynchronous=rng.random() < 0.5)
            elif act == 3:
                op_client.swapdb(0, 1)
            elif act == 4:
                op_client.move(k, 1)
            elif act == 5:
                op_client.rename(k, rng.choice(keys))
            elif act == 6:
                op_client.copy(k, rng.choice(keys), replace=True)
            elif act == 7:
                dump = op_client.dump(k)
                if dump:
                    op_client.restore(rng.choice(keys), rng.choice([0, 200]), dump, replace=True)
            elif act == 8:
                op_client.pexpire(k, rng.randint(1, 300))
            elif act == 9:
                op_client.persist(k)
            elif act == 10:
                if not reload:
                    continue
                op_client.execute_command("DEBUG", "RELOAD")
            elif act == 11:
                op_client.bgrewriteaof()
            elif act == 12:
                used = op_client.info("memory")["used_memory"]
                op_client.config_set("maxmemory", used + rng.randint(-20000, 20000))
                time.sleep(rng.uniform(0.01, 0.05))
                op_client.config_set("maxmemory", 0)
            elif act == 13:
                cid = rng.choice(list(ids.values()))
                op_client.execute_command("CLIENT", "KILL", "ID", cid)
            elif act == 14:
                if time.monotonic() < paused_until:
                    # Redis 7.0 and 8.0 crash on `CLIENT UNBLOCK id
                    # TIMEOUT` of a client a pause holds, padlock loaded
                    # or not (valkey-io/valkey#2111; 8.6 answers 0).
                    continue
                cid = rng.choice(list(ids.values()))
                op_client.execute_command("CLIENT", "UNBLOCK", cid, rng.choice(["TIMEOUT", "ERROR"]))
            else:
                op_client.delete(k)
            stats["ops"] += 1
        except redis.ResponseError:
            stats["op_errors"] += 1
        except redis.ConnectionError:
            stats["op_dropped"] += 1
        finally:
            stats["finished"] = stats.get("finished", 0) + 1
    op_client.config_set("maxmemory", 0)


def run(server, stop, op, workers, stats, seconds=SECONDS):
    """Lets the operator act for `seconds` beside the running workers,
    the server checked alive throughout; then stops them all, each having
    had its last answer."""
    op.start()
    deadline = time.time() + seconds
    while time.time() < deadline:
        time.sleep(0.25)
        assert server.alive() or stats.get("restarting"), server.tail()
    stop.set()
    op.join(30)
    for t in workers:
        t.join(30)
        assert not t.is_alive(), "a worker never got its answer"
    print(stats)
    assert server.alive()


def test_chaos(make_server):
    server = make_server(extra=[
        "--appendonly", "yes", "--maxmemory-policy", "allkeys-lru",
        "--aof-use-rdb-preamble", "no",
    ])
    r = server.client(socket_timeout=30)
    stop = threading.Event()
    stats = {"ok": 0, "hung": 0, "dropped": 0, "errors": 0, "ops": 0,
             "op_errors": 0, "op_dropped": 0}
    ids = {}
    workers = [threading.Thread(target=worker, args=(server, 100 + i, stop, stats, ids, i),
                                daemon=True) for i in range(8)]
    for t in workers:
        t.start()
    assert wait_for(lambda: len(ids) == len(workers))
    rng = random.Random(2026)
    op = threading.Thread(target=operator, args=(server, rng, stop, stats, ids), daemon=True)
    run(server, stop, op, workers, stats)
    assert stats["hung"] == 0, stats
    assert stats["ok"] > 50 and stats["ops"] > 20, stats
    info = lambda: r.info("padlock")  # noqa: E731
    assert wait_for(lambda: info()["padlock_blocked_clients"] == 0)
    assert wait_for(lambda: info()["padlock_wait_edges"] == 0)
    assert r.execute_command("LOCK.GRAPH") == []
    assert r.execute_command("LOCK.ACQUIRE", "after", "me", 1000) > 0
