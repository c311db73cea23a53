"""docs/commands.md, cluster — a lock's slot moving between nodes (MIGRATE, `redis-cli
--cluster reshard`) while clients hold, wait for and release it. The state
arrives intact, mutual exclusion holds, waiters on a moved key are sent
where Redis would send a new command (`-ASK` / `-MOVED`) and none hangs;
a master turned replica answers its waiters `-UNBLOCKED` like Redis' own
blocking commands."""

import shutil
import subprocess
import threading
import time

import pytest
import redis
from redis.cluster import ClusterNode, RedisCluster

from conftest import Background, free_port, wait_blocked, wait_for


def crc16(data):
    crc = 0
    for b in data:
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc


def tag_for_slot(slot):
    """A hash tag whose keys all live in `slot`."""
    i = 0
    while crc16(f"t{i}".encode()) & 0x3FFF != slot:
        i += 1
    return "{t%d}" % i


def text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def make_cluster(make_server, ranges):
    """Masters on loopback, node i serving ranges[i] (None: no slots)."""
    nodes = []
    for _ in ranges:
        port = free_port(cluster=True)
        nodes.append(make_server(
            extra=["--cluster-enabled", "yes", "--cluster-config-file", f"nodes-{port}.conf"],
            port=port, subdir=f"n{port}"))
    first = nodes[0].client()
    for n, rng in zip(nodes, ranges):
        c = n.client()
        if rng:
            c.execute_command("CLUSTER", "ADDSLOTSRANGE", *rng)
        if n is not nodes[0]:
            first.execute_command("CLUSTER", "MEET", "127.0.0.1", n.port)

    def ready():
        for n in nodes:
            c = n.client()
            if "cluster_state:ok" not in text(c.execute_command("CLUSTER", "INFO")):
                return False
            lines = text(c.execute_command("CLUSTER", "NODES")).strip().splitlines()
            if len(lines) != len(nodes) or any("connected" not in ln for ln in lines):
                return False
        return True

    assert wait_for(ready, timeout=20)
    return nodes


def node_id(server):
    return text(server.client().execute_command("CLUSTER", "MYID"))


def asking(server, *cmd):
    """`cmd` on a node importing the key's slot (after ASKING)."""
    pipe = server.client().pipeline(transaction=False)
    pipe.execute_command("ASKING")
    pipe.execute_command(*cmd)
    return pipe.execute()[1]


def pairs(reply):
    return {text(reply[i]): reply[i + 1] for i in range(0, len(reply), 2)}


def padlock_info(server):
    return server.client().info("padlock")


def test_waiter_on_a_migrated_lock_is_asked_to_follow_it(make_server):
    a, b = make_cluster(make_server, [(0, 16383), None])
    slot = 777
    key = tag_for_slot(slot) + "lock"
    ra = a.client()
    fence = ra.execute_command("LOCK.ACQUIRE", key, "h1", 60000)
    waiter = Background(a, "LOCK.ACQUIRE", key, "h2", 60000, "BLOCK", 20000)
    wait_blocked(ra, 1)

    b.client().execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", node_id(a))
    ra.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", node_id(b))
    assert ra.execute_command("MIGRATE", "127.0.0.1", b.port, "", 0, 5000, "KEYS", key) in (b"OK", "OK")

    # The waiter is not granted here (that would make a second holder):
    # it is sent after the key, as a new command for it would be.
    with pytest.raises(redis.ResponseError) as e:
        waiter.result()
    assert str(e.value) == f"ASK {slot} 127.0.0.1:{b.port}"
    assert ra.execute_command("CLUSTER", "COUNTKEYSINSLOT", slot) == 0
    assert padlock_info(a)["padlock_blocked_clients"] == 0
    assert padlock_info(a)["padlock_turned_away"] == 1

    info = pairs(asking(b, "LOCK.INFO", key))
    assert (text(info["holder"]), info["count"], info["fence"]) == ("h1", 1, fence)
    assert 50000 < info["ttl"] <= 60000

    # The migration can finish: no copy of the key was left behind.
    for n in (b, a):
        assert n.client().execute_command("CLUSTER", "SETSLOT", slot, "NODE", node_id(b)) in (b"OK", "OK")

    # Following the redirect, the waiter queues on the new owner and gets
    # the lock when its holder lets go.
    again = Background(b, "LOCK.ACQUIRE", key, "h2", 60000, "BLOCK", 20000)
    wait_blocked(b.client(), 1)
    assert b.client().execute_command("LOCK.RELEASE", key, "h1") == 0
    assert again.result() > fence


def test_master_turned_replica_unblocks_its_waiters(make_server):
    a, b = make_server(), make_server()
    ra = a.client()
    ra.execute_command("LOCK.ACQUIRE", "k", "h1", 60000)
    waiter = Background(a, "LOCK.ACQUIRE", "k", "h2", 60000, "BLOCK", 0)
    wait_blocked(ra, 1)
    ra.execute_command("REPLICAOF", "127.0.0.1", b.port)
    with pytest.raises(redis.ResponseError, match="UNBLOCKED"):
        waiter.result()
    assert wait_for(lambda: padlock_info(a)["padlock_blocked_clients"] == 0)


def lock_state(rc, key):
    info = pairs(rc.execute_command("LOCK.INFO", key))
    return (text(info["holder"]), info["count"], info["fence"]), info["ttl"]


def holders(reply):
    """A SEM.INFO / RWLOCK.INFO reply without the leases that run down."""
    info = pairs(reply)
    hs = info.pop("holders")
    info["holders"] = {text(hs[i]): hs[i + 1][:-1] for i in range(0, len(hs), 2)}
    return info


def reshard(cli, entry, src, dst):
    """`redis-cli --cluster reshard` of one slot (the source's lowest)."""
    out = subprocess.run(
        [cli, "--cluster", "reshard", f"127.0.0.1:{entry.port}",
         "--cluster-from", src, "--cluster-to", dst, "--cluster-slots", "1",
         "--cluster-yes", "--cluster-pipeline", "2"],
        capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]


def move_atomically(kind, src, dst):
    """Slot 0 from `src` to `dst` by atomic slot migration, to its end."""
    from test_atomic_migration import migrate
    migrate(kind, src, dst, 0)

    def done():
        counts = [int(n.client().execute_command("CLUSTER", "COUNTKEYSINSLOT", 0)) for n in (src, dst)]
        return counts[0] == 0 and counts[1] >= 3

    assert wait_for(done, timeout=30)


@pytest.mark.skipif(not shutil.which("redis-cli"), reason="needs redis-cli")
@pytest.mark.parametrize("path", ["migrate", "atomic"])
def test_reshard_under_load_keeps_locks_whole(make_server, path):
    # Three masters; the hot keys live in slot 0, the lowest slot of the
    # first node, so `reshard --cluster-slots 1` moves exactly that slot
    # (with MIGRATE), as does an atomic slot migration where the server has
    # one (Redis 8.4+, Valkey 9+).
    nodes = make_cluster(make_server, [(0, 5460), (5461, 10922), (10923, 16383)])
    kind = None
    if path == "atomic":
        from test_atomic_migration import atomic_migration
        kind, why = atomic_migration(nodes[0].client())
        if kind is None:
            print(f"skipped: {why}")
            pytest.skip(why)
    tag = tag_for_slot(0)
    hot = [f"{tag}k{i}" for i in range(3)]
    startup = [ClusterNode("127.0.0.1", n.port) for n in nodes]

    def cluster_client():
        return RedisCluster(startup_nodes=startup, socket_timeout=30)

    rc = cluster_client()
    long_key = f"{tag}long"
    rc.execute_command("LOCK.ACQUIRE", long_key, "keeper", 120000)
    rc.execute_command("LOCK.ACQUIRE", long_key, "keeper", 120000)
    rc.execute_command("SEM.ACQUIRE", f"{tag}sem", "s1", 3, 120000)
    rc.execute_command("SEM.ACQUIRE", f"{tag}sem", "s2", 3, 120000)
    rc.execute_command("RWLOCK.ACQUIRE", f"{tag}rw", "r1", "READ", 120000)
    before, ttl_before = lock_state(rc, long_key)
    sem_before = holders(rc.execute_command("SEM.INFO", f"{tag}sem"))
    rw_before = holders(rc.execute_command("RWLOCK.INFO", f"{tag}rw"))
    assert set(sem_before["holders"]) == {"s1", "s2"} and set(rw_before["holders"]) == {"r1"}

    stop = threading.Event()
    guard = threading.Lock()
    holding = {}
    log = []  # (key, fence, start)
    problems = []
    done = [0] * 6

    clients = [cluster_client() for _ in range(6)]

    def worker(w):
        c = clients[w]
        me = f"w{w}"
        i = 0
        while not stop.is_set():
            key = hot[(w + i) % len(hot)]
            i += 1
            try:
                fence = c.execute_command("LOCK.ACQUIRE", key, me, 5000, "BLOCK", 4000)
                if fence is None:
                    continue
                with guard:
                    if key in holding:
                        problems.append(f"overlap on {key}: {holding[key]} and {me}")
                    holding[key] = me
                    log.append((key, fence, time.monotonic()))
                time.sleep(0.002)
                with guard:
                    holding.pop(key, None)
                released = c.execute_command("LOCK.RELEASE", key, me)
                if released != 0:
                    problems.append(f"release of {key} by {me} answered {released!r}")
                done[w] += 1
            except Exception as e:  # noqa: BLE001 - every failure is reported
                problems.append(f"{me}: {type(e).__name__}: {e}")
                time.sleep(0.05)

    threads = [threading.Thread(target=worker, args=(w,), daemon=True) for w in range(6)]
    for t in threads:
        t.start()
    cli = shutil.which("redis-cli")
    ids = [node_id(n) for n in nodes]
    assert wait_for(lambda: min(done) > 0, timeout=10), done
    if kind is None:
        reshard(cli, nodes[0], ids[0], ids[1])   # slot 0 moves to the second node
        time.sleep(0.5)
        reshard(cli, nodes[0], ids[1], ids[2])   # and on to the third
    else:
        move_atomically(kind, nodes[0], nodes[1])
        time.sleep(0.5)
        move_atomically(kind, nodes[1], nodes[2])
    time.sleep(0.5)
    stop.set()
    for t in threads:
        t.join(15)
    assert not any(t.is_alive() for t in threads), "a worker hung"
    assert problems == [], problems[:5]
    assert sum(done) > 50, done

    # Fences of each key rise in the order its holders got it, across moves.
    for key in hot:
        fences = [f for k, f, _ in sorted(log, key=lambda e: e[2]) if k == key]
        assert fences == sorted(fences) and len(set(fences)) == len(fences), key

    # The state arrived whole on the slot's final owner, and nowhere else.
    after, ttl_after = lock_state(rc, long_key)
    assert after == before == ("keeper", 2, before[2])
    assert 0 < ttl_after <= ttl_before
    assert holders(rc.execute_command("SEM.INFO", f"{tag}sem")) == sem_before
    assert holders(rc.execute_command("RWLOCK.INFO", f"{tag}rw")) == rw_before
    counts = [n.client().execute_command("CLUSTER", "COUNTKEYSINSLOT", 0) for n in nodes]
    assert counts[0] == counts[1] == 0 and counts[2] >= 3, counts
    for n in nodes:
        assert wait_for(lambda: padlock_info(n)["padlock_blocked_clients"] == 0), n.port
