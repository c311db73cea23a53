"""The asyncio flavour through lost replies (on redis-py and valkey-glide),
half-open connections and a key replaced by another type (see
test_retries.py)."""

import asyncio

import pytest
import redis
import redis.asyncio as aredis

from faultproxy import FaultProxy
from padlock import LockLostError, NotHeldError
from padlock.aio import Lock, ReadWriteLock, Semaphore
from padlock.aio import glide as on_glide


@pytest.fixture
def proxy(server):
    p = FaultProxy(server.port)
    yield p
    p.close()


def count(r, key):
    raw = r.execute_command("LOCK.INFO", key)
    return 0 if raw is None else dict(zip(raw[::2], raw[1::2]))[b"count"]


def through(driver, port):
    """An asyncio client of `driver` on `port`, and how to close it."""
    if driver == "glide":
        glide = pytest.importorskip("glide")
        cfg = glide.GlideClientConfiguration([glide.NodeAddress("127.0.0.1", port)])
        return on_glide(glide.GlideClient, cfg), None
    c = aredis.Redis(port=port)
    return c, c.aclose


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("driver", ["redis-py", "glide"])
def test_lost_replies_double_nothing(r, proxy, driver):
    async def main():
        via, close = through(driver, proxy.port)
        lock = Lock(via, "k", ttl=5)
        proxy.drop("LOCK.ACQUIRE")
        async with lock:
            assert count(r, "k") == 1
            async with lock:
                proxy.drop("LOCK.RELEASE")
            assert count(r, "k") == 1 and lock.held
        assert not r.exists("k")
        sem = Semaphore(via, "s", 3, permits=1, ttl=5)
        proxy.drop("SEM.ACQUIRE")
        assert await sem.acquire(blocking=False) == 1
        await sem.release()
        assert not r.exists("s")
        rw = ReadWriteLock(via, "rw", ttl=2)
        proxy.drop("RWLOCK.ACQUIRE")
        async with rw.read():
            pass
        assert not r.exists("rw")
        if close is not None:
            await close()
        assert proxy.dropped == 4

    asyncio.run(main())


def test_a_key_replaced_by_a_string_cancels_the_work(r, server):
    async def main():
        c = aredis.Redis(port=server.port)
        lock = Lock(c, "k", ttl=0.6)
        with pytest.raises(LockLostError):
            async with lock:
                r.delete("k")
                r.set("k", "x")
                await asyncio.sleep(5)
        assert not lock.held and not await lock.renew()
        with pytest.raises(NotHeldError):
            await lock.release()
        await c.aclose()

    asyncio.run(main())


def test_held_never_outlives_the_lease_through_a_half_open_connection(r, proxy):
    async def main():
        via = aredis.Redis(port=proxy.port)
        lock = Lock(via, "k", ttl=0.9, keep=False, cancel_on_loss=False)
        await lock.acquire()
        proxy.blackhole()
        await asyncio.sleep(0.95)
        assert not lock.held
        await asyncio.wait_for(lock.lost.wait(), 2)
        await via.aclose()

    asyncio.run(main())


def test_a_semaphore_hold_lost_unanswered_is_released_before_its_task_takes_again(r, server, proxy):
    # Its renewals get no answer: reported lost while the server still
    # counts its permits. The task's next take is fresh: its permits are
    # not added to the lost ones.
    async def main():
        via = aredis.Redis(port=proxy.port)
        direct = aredis.Redis(port=server.port)
        sem = Semaphore(via, "s", limit=3, permits=2, ttl=2, cancel_on_loss=False)
        await sem.acquire()
        proxy.blackhole()
        await asyncio.wait_for(sem.lost.wait(), 5)
        assert r.execute_command("SEM.INFO", "s") is not None
        again = Semaphore(direct, "s", limit=3, permits=2, ttl=5)  # this task's holder too
        assert await again.acquire(blocking=False) is not None
        info = dict(zip(*[iter(r.execute_command("SEM.INFO", "s"))] * 2))
        assert int(info[b"used"]) == 2, info
        await again.release()
        assert not r.exists("s")
        await via.aclose()
        await direct.aclose()

    asyncio.run(main())
