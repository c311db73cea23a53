"""The asyncio classes against a real server."""

import asyncio

import pytest
import redis.asyncio as aredis
from redis.asyncio.cluster import RedisCluster

from padlock import DeadlockError, LockLostError, NotHeldError
from padlock import aio
from padlock.aio import Lock, MultiLock, ReadWriteLock, Semaphore, graph


def run(coro):
    return asyncio.run(coro)


def test_lock_basics(server):
    async def main():
        r = aredis.Redis(port=server.port)
        a, b = Lock(r, "k", ttl=5, holder="a"), Lock(r, "k", ttl=5, holder="b")
        async with a:
            assert a.fence and await a.owned()
            assert await b.acquire(blocking=False) is None
            assert await b.acquire(timeout=0.2) is None
        assert await b.acquire() > a.fence
        await b.release()
        with pytest.raises(NotHeldError):
            await b.release()
        await r.aclose()

    run(main())


def test_waiters_are_served_in_order(server):
    async def main():
        r = aredis.Redis(port=server.port)
        first = Lock(r, "k", ttl=5)
        await first.acquire()
        order = []

        async def worker(i):
            lock = Lock(r, "k", ttl=5)
            async with lock:
                order.append(i)

        tasks = []
        for i in range(3):
            tasks.append(asyncio.create_task(worker(i)))
            while (await r.info("padlock"))["padlock_mailbox_waiters"] < i + 1:
                await asyncio.sleep(0.01)
        await first.release()
        await asyncio.gather(*tasks)
        assert order == [0, 1, 2]
        await r.aclose()

    run(main())


def test_lost_lease_cancels_the_guarded_work(server):
    async def main():
        r = aredis.Redis(port=server.port)
        seen = []
        with pytest.raises(LockLostError):
            async with Lock(r, "k", ttl=0.3, on_lost=seen.append) as lock:
                await r.delete("k")
                await asyncio.sleep(5)  # cancelled well before
        assert seen == [lock] and lock.lost.is_set()
        await r.aclose()

    run(main())


def test_keep_holds_a_short_lease(server):
    async def main():
        r = aredis.Redis(port=server.port)
        async with Lock(r, "k", ttl=0.3) as lock:
            await asyncio.sleep(1.0)
            info = await lock.info()
            assert int(info["keep"]) == 1 and not lock.lost.is_set()
        assert not await r.exists("k")
        await r.aclose()

    run(main())


def test_semaphore_multilock_rwlock_graph(server):
    async def main():
        r = aredis.Redis(port=server.port)
        async with Semaphore(r, "s", 2, permits=2, ttl=5):
            assert await Semaphore(r, "s", 2, ttl=5, holder="other").acquire(blocking=False) is None
        async with MultiLock(r, ["a", "b"], ttl=5) as m:
            assert len(m.fences or []) == 2
        rw = ReadWriteLock(r, "rw", ttl=5)
        async with rw.read():
            assert await ReadWriteLock(r, "rw", ttl=5, holder="r2").read().acquire(blocking=False)
            assert await ReadWriteLock(r, "rw", ttl=5, holder="w").write().acquire(blocking=False) is None
        t1 = Lock(r, "x", holder="t1", ttl=5)
        t2 = Lock(r, "y", holder="t2", ttl=5)
        await t1.acquire()
        await t2.acquire()
        waiting = asyncio.create_task(Lock(r, "x", holder="t2", ttl=5).acquire())
        while not await graph(r):
            await asyncio.sleep(0.01)
        with pytest.raises(DeadlockError) as e:
            await Lock(r, "y", holder="t1", ttl=5).acquire()
        assert e.value.cycle[0] == "t1"
        await t1.release()
        assert await waiting > 0
        await r.aclose()

    run(main())


def test_cluster_client(cluster_server):
    async def main():
        rc = RedisCluster(host="127.0.0.1", port=cluster_server.port)
        async with Lock(rc, "{job}:1", ttl=5) as lock:
            assert lock.fence
        async with MultiLock(rc, ["{job}:1", "{job}:2"], ttl=0.3) as m:
            await asyncio.sleep(0.6)
            assert len(m.fences or []) == 2 and not m.lost.is_set()
        await rc.aclose()

    run(main())


def test_a_thousand_asyncio_holds_share_one_task_and_one_connection(server, r):
    """Issues 24 and 39: 1,000 holds on one event loop: one watcher task,
    two connections, and one PING per interval while the server keeps
    them (no EXTEND, no LOCK.INFO per hold)."""
    from padlock import _asyncio_runtime as _ashared

    async def main():
        c = aredis.Redis(port=server.port)
        locks = [aio.Lock(c, f"amany:{i}", ttl=0.9) for i in range(1000)]
        tasks_before = len(asyncio.all_tasks())
        for lock in locks:
            assert await lock.acquire(blocking=False) is not None
        # One watcher task for all (and the mailman's, should the first
        # rounds have begun on a slow machine).
        # (Not counting the keeper's calls under way, each a short task.)
        short = ("Keeper._queued", "Keeper._settle", "exchange")
        long_lived = [t for t in asyncio.all_tasks() if not t.get_coro().__qualname__.endswith(short)]
        assert len(long_lived) - tasks_before <= 2, [t.get_coro().__qualname__ for t in long_lived]
        assert _ashared.scheduler().tasks() == 1
        assert _ashared.keeper_connections() == 1
        await asyncio.sleep(1.5)  # every hold's first round: bound with the mailbox
        assert len(r.client_list()) <= 3, "keeper, mailman and the test's own"
        r.config_resetstat()
        await asyncio.sleep(1.5)
        stats = r.info("commandstats")
        # (A hold whose round came late, on a loaded machine, may bind once more.)
        assert stats.get("cmdstat_lock.extend", {"calls": 0})["calls"] < 50
        assert "cmdstat_lock.info" not in stats
        assert stats["cmdstat_ping"]["calls"] <= 12, stats["cmdstat_ping"]  # twice per interval
        assert all(lock.held for lock in locks)
        for lock in locks:
            await lock.release()
        assert r.dbsize() == 0
        await c.aclose()

    asyncio.run(main())


def test_asyncio_watching_costs_no_wakeup_per_acquire(server):
    """As for threads: an acquire does not wake the watcher task, and
    released holds' rounds are dropped in bulk."""
    from padlock import _asyncio_runtime as _ashared

    async def main():
        c = aredis.Redis(port=server.port)
        anchor = aio.Lock(c, "awake:anchor", ttl=30)
        assert await anchor.acquire() is not None
        await asyncio.sleep(0.2)
        lock = aio.Lock(c, "awake:k", ttl=60)
        s = _ashared.scheduler()
        wakes, before = s.wakes, s.rounds()
        for _ in range(3000):
            assert await lock.acquire() is not None
            await lock.release()
        assert s.wakes - wakes < 20
        assert s.rounds() <= 2 * before + 130, "released holds' rounds are purged"
        await anchor.release()
        await c.aclose()

    run(main())
