"""Issue 39 in a cluster: a mailbox must share its request's slot, so the
client keeps one per slot in use and hears of their writes through client
tracking on one connection per node. Waits on keys of many slots, and the
losses of holds on them, cost two connections of padlock's per node."""

import asyncio
import threading
import time

import redis
from redis.asyncio.cluster import RedisCluster as AsyncCluster

from conftest import wait_for
from padlock import _slots, aio
from padlock.sync import Lock

#: Keys of as many slots (none share one).
KEYS = [f"cmail:{i}" for i in range(24)]


def test_slot_tags_name_their_slots():
    from redis.crc import key_slot

    assert len({key_slot(k.encode()) for k in KEYS}) == len(KEYS)
    for key in KEYS + ["{job}:1", "a{}b", "a{b", "x{y}{z}"]:
        box = _slots.slot_box("padlock:mailbox:p:", key)
        assert key_slot(box.encode()) == key_slot(key.encode()) == _slots.key_slot(key), (key, box)


def waiting(r, keys=KEYS):
    total = 0
    for k in keys:
        raw = r.execute_command("LOCK.INFO", k)
        total += int(dict(zip(raw[::2], raw[1::2]))[b"waiters"]) if raw else 0
    return total


def served(r, name):
    stats = r.info("commandstats")
    return int(stats.get(f"cmdstat_{name}", {"calls": 0})["calls"])


def test_waits_on_many_slots_share_two_connections(cluster_server):
    r = cluster_server.client()
    rc = redis.RedisCluster(host="127.0.0.1", port=cluster_server.port)
    rc.ping()
    base = len(r.client_list())
    holders = [Lock(rc, k, ttl=5) for k in KEYS]
    for h in holders:
        assert h.acquire(blocking=False) is not None
    got: dict[int, int] = {}

    def wait(i: int) -> None:
        lock = Lock(rc, KEYS[i % len(KEYS)], ttl=5)
        fence = lock.acquire(timeout=20)
        if fence is not None:
            got[i] = fence
            lock.release()

    threads = [threading.Thread(target=wait, args=(i,)) for i in range(96)]
    for t in threads:
        t.start()
    assert wait_for(lambda: waiting(r) == 96, 10)
    assert len(r.client_list()) - base <= 2, "a keeper and one tracking connection, for 24 slots"
    # A wait that times out hears so through its slot's mailbox too.
    assert Lock(rc, KEYS[0], ttl=5, holder="other").acquire(timeout=0.2) is None
    for h in holders:
        h.release()
    for t in threads:
        t.join(20)
    assert len(got) == 96, "every wait was granted through its slot's mailbox"
    assert served(r, "lmpop") > 0 and served(r, "blmpop") == 0
    assert len(r.client_list()) - base <= 2
    rc.close()
    r.close()


def test_a_cluster_hold_hears_its_loss_from_its_slots_mailbox(cluster_server):
    r = cluster_server.client()
    rc = redis.RedisCluster(host="127.0.0.1", port=cluster_server.port)
    lock = Lock(rc, KEYS[5], ttl=6)
    assert lock.acquire() is not None
    time.sleep(0.3)
    r.config_resetstat()
    r.delete(KEYS[5])
    # Far sooner than a ttl: mailed, not found by a round.
    assert wait_for(lambda: lock.lost.is_set(), 1.5), "the loss was mailed and heard"
    assert not lock.held
    assert served(r, "lock.info") == 0
    rc.close()
    r.close()


def test_asyncio_waits_and_losses_on_many_slots(cluster_server):
    r = cluster_server.client()

    async def main() -> None:
        rc = AsyncCluster(host="127.0.0.1", port=cluster_server.port)
        await rc.ping()
        base = len(r.client_list())
        holders = [aio.Lock(rc, k, ttl=5) for k in KEYS]
        for h in holders:
            assert await h.acquire(blocking=False) is not None

        async def wait(i: int) -> int:
            lock = aio.Lock(rc, KEYS[i % len(KEYS)], ttl=5)
            fence = await lock.acquire(timeout=20)
            assert fence is not None
            await lock.release()
            return fence

        tasks = [asyncio.create_task(wait(i)) for i in range(240)]
        for _ in range(400):
            if waiting(r) == 240:
                break
            await asyncio.sleep(0.025)
        assert len(r.client_list()) - base <= 2, "a keeper and one tracking connection"
        assert await aio.Lock(rc, KEYS[1], ttl=5, holder="other").acquire(timeout=0.2) is None
        for h in holders[1:]:
            await h.release()
        # A loss, heard from the slot's mailbox while the others wait.
        r.delete(KEYS[0])
        for _ in range(60):
            if holders[0].lost.is_set():
                break
            await asyncio.sleep(0.025)
        assert holders[0].lost.is_set()
        assert len(await asyncio.gather(*tasks)) == 240
        assert len(r.client_list()) - base <= 2
        await rc.aclose()

    asyncio.run(main())
    r.close()


def test_idle_cluster_holds_cost_pings_not_rounds(cluster_server):
    """Holds kept by the server in a cluster are watched through their
    slots' mailboxes: once bound, no EXTEND or LOCK.INFO per hold, a PING
    or two per interval on the tracking connection and the keeper."""
    r = cluster_server.client()
    rc = redis.RedisCluster(host="127.0.0.1", port=cluster_server.port)
    locks = [Lock(rc, f"cidle:{i}", ttl=0.9) for i in range(300)]
    for lock in locks:
        assert lock.acquire(blocking=False) is not None
    time.sleep(1.5)  # every hold's first round: bound with its slot's mailbox
    r.config_resetstat()
    time.sleep(1.5)
    assert served(r, "lock.extend") < 30, "kept leases are not renewed one by one"
    assert served(r, "lock.info") == 0
    assert served(r, "ping") + served(r, "client|id") <= 24
    assert all(lock.held for lock in locks)
    for lock in locks:
        lock.release()
    assert r.dbsize() == 0 or all(k.startswith(b"padlock:mailbox:") for k in r.keys())
    rc.close()
    r.close()


def test_cluster_waits_survive_a_killed_tracking_connection(cluster_server):
    """The tracking connection killed while waits are queued: they are sent
    again (same ids) and every slot's mailbox swept on the new one."""
    r = cluster_server.client()
    rc = redis.RedisCluster(host="127.0.0.1", port=cluster_server.port)
    keys = KEYS[:6]
    holders = [Lock(rc, k, ttl=5, holder="owner") for k in keys]
    for h in holders:
        assert h.acquire(blocking=False) is not None
    got: list[int] = []

    def wait(i: int) -> None:
        lock = Lock(rc, keys[i % len(keys)], ttl=5)
        if lock.acquire(timeout=20) is not None:
            got.append(i)
            lock.release()

    threads = [threading.Thread(target=wait, args=(i,)) for i in range(18)]
    for t in threads:
        t.start()
    assert wait_for(lambda: waiting(r, keys) == 18, 10)
    assert r.execute_command("CLIENT", "KILL", "TYPE", "pubsub") == 1
    holders[0].release()  # a grant posted while nobody tracks
    assert wait_for(lambda: waiting(r, keys) <= 17, 10)
    for h in holders[1:]:
        h.release()
    for t in threads:
        t.join(20)
    assert sorted(got) == list(range(18))
    rc.close()
    r.close()
