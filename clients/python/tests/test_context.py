"""Holders from the caller's context (the seeds' nested reentry), leases
without renewal, and renewal bounded by max_hold."""

import asyncio
import contextvars
import threading
import time

import pytest
import redis.asyncio as aredis

from padlock import Lock, NotAcquiredError, NotHeldError, ReadWriteLock, current_holder, holder_scope
from padlock import aio


def count(r, key):
    raw = r.execute_command("LOCK.INFO", key)
    return 0 if raw is None else dict(zip(raw[::2], raw[1::2]))[b"count"]


def test_a_nested_function_reenters_the_lock_its_caller_holds(r):
    seen = []

    def validate_inventory(order):
        with Lock(r, f"order:{order}", ttl=5, blocking_timeout=1):
            seen.append(count(r, f"order:{order}"))

    def process_order(order):
        with Lock(r, f"order:{order}", ttl=5):
            validate_inventory(order)
            seen.append(count(r, f"order:{order}"))

    process_order(1001)
    assert seen == [2, 1]
    assert not r.exists("order:1001")


def test_two_threads_do_not_share_a_hold(r):
    outer = Lock(r, "k", ttl=5)
    outer.acquire()
    got = []
    t = threading.Thread(target=lambda: got.append(Lock(r, "k", ttl=5).acquire(blocking=False)))
    t.start()
    t.join()
    assert got == [None]
    outer.release()


def test_a_scope_is_shared_by_threads_started_with_its_context(r):
    with holder_scope("job-7") as h:
        assert h == "job-7" == current_holder()
        outer = Lock(r, "k", ttl=5)
        outer.acquire()
        got = []

        def in_thread():
            inner = Lock(r, "k", ttl=5)
            got.append(inner.acquire(blocking=False))
            got.append(count(r, "k"))
            inner.release()

        t = threading.Thread(target=contextvars.copy_context().run, args=(in_thread,))
        t.start()
        t.join()
        assert got == [outer.fence, 2] and count(r, "k") == 1
        assert outer.info()["holder"] == b"job-7"
    assert current_holder() != "job-7"
    outer.release()
    assert not r.exists("k")


def test_an_explicit_holder_wins(r):
    Lock(r, "k", ttl=5).acquire()
    with pytest.raises(NotAcquiredError):
        with Lock(r, "k", ttl=5, holder="someone-else", blocking_timeout=0.1):
            pass


def test_asyncio_tasks_reenter_their_own_and_not_each_others(server):
    async def main():
        c = aredis.Redis(port=server.port)

        async def validate(order):
            async with aio.Lock(c, f"order:{order}", ttl=5, blocking_timeout=1):
                return await c.execute_command("LOCK.INFO", f"order:{order}")

        async def process(order):
            async with aio.Lock(c, f"order:{order}", ttl=5):
                info = await validate(order)
                return dict(zip(info[::2], info[1::2]))[b"count"]

        assert await process(1) == 2
        outer = aio.Lock(c, "k", ttl=5)
        await outer.acquire()
        other = asyncio.create_task(aio.Lock(c, "k", ttl=5).acquire(blocking=False))
        assert await other is None, "another task is another holder"
        await outer.release()
        async with holder_scope() as h:
            a = aio.Lock(c, "s", ttl=5)
            await a.acquire()
            b = aio.Lock(c, "s", ttl=5)
            shared = await asyncio.create_task(b.acquire(blocking=False))
            assert shared == a.fence and a.holder == h == b.holder
            await b.release()
            await a.release()
        assert not await c.exists("s")
        await c.aclose()

    asyncio.run(main())


def test_read_write_lock_takes_the_context_holder(r):
    rw = ReadWriteLock(r, "rw", ttl=5)
    with rw.read():
        # Another object in the same thread is the same holder: it upgrades
        # this thread's read hold.
        other = ReadWriteLock(r, "rw", ttl=5)
        assert other.holder == rw.holder
        assert other.write().acquire(timeout=1) is not None
        other.write().release()
    assert not r.exists("rw")


def test_renew_false_is_a_plain_lease(r):
    lock = Lock(r, "k", ttl=0.5, renew=False)
    lock.acquire()
    assert int(lock.info()["keep"]) == 0
    time.sleep(0.7)
    assert not r.exists("k") and not lock.held


def _keep_of(r, key):
    raw = r.execute_command("LOCK.INFO", key)
    return None if raw is None else int(dict(zip(raw[::2], raw[1::2]))[b"keep"])


def _until(cond, seconds=1.0):
    deadline = time.monotonic() + seconds
    while not cond() and time.monotonic() < deadline:
        time.sleep(0.01)
    return cond()


def test_stop_renewing_lets_the_lease_run_out_and_leaves_the_other_holds_bound(r):
    # redis-semaphore's stopRefresh: the server stops keeping this lease
    # (its binding moved to a connection that then closed), nothing else.
    a, b = Lock(r, "a", ttl=0.6), Lock(r, "b", ttl=0.6)
    a.acquire()
    b.acquire()
    assert _keep_of(r, "a") == 1 and _keep_of(r, "b") == 1
    a.stop_renewing()
    assert _until(lambda: _keep_of(r, "a") == 0), "the binding ended"
    assert a.held, "the lease runs a ttl from the unbinding"
    assert a.renew() and _keep_of(r, "a") == 0, "a renewal by hand binds nothing"
    time.sleep(0.9)
    assert not r.exists("a") and not a.held
    assert r.exists("b") and b.held and _keep_of(r, "b") == 1
    with pytest.raises(NotHeldError):
        a.release()
    a.acquire()
    assert _keep_of(r, "a") == 1, "a fresh acquire renews again"
    a.release()
    b.release()


def test_stop_renewing_without_keep_stops_the_watcher(r):
    lock = Lock(r, "k", ttl=0.6, keep=False)
    lock.acquire()
    lock.stop_renewing()
    time.sleep(0.9)
    assert not r.exists("k") and not lock.held


def test_an_asyncio_hold_stops_renewing(server, r):
    async def main():
        c = aredis.Redis(port=server.port)
        a, b = aio.Lock(c, "a", ttl=0.6), aio.Lock(c, "b", ttl=0.6)
        await a.acquire()
        await b.acquire()
        await a.stop_renewing()
        assert _until(lambda: _keep_of(r, "a") == 0)
        await asyncio.sleep(0.9)
        assert not await c.exists("a") and not a.held
        assert b.held and _keep_of(r, "b") == 1
        await b.release()
        await c.aclose()

    asyncio.run(main())


def test_max_hold_bounds_renewal_and_reports_the_loss(r):
    lost = threading.Event()
    lock = Lock(r, "k", ttl=0.6, max_hold=1.5, on_lost=lambda h: lost.set())
    start = time.monotonic()
    lock.acquire()
    time.sleep(1.0)
    assert lock.held and r.exists("k"), "renewed within the bound"
    assert lost.wait(2.5)
    took = time.monotonic() - start
    assert took <= 1.5 + 0.3, took
    assert not lock.held
    # The server's lease ends a moment after the client's estimate.
    deadline = time.time() + 1
    while r.exists("k") and time.time() < deadline:
        time.sleep(0.01)
    assert not r.exists("k")


def test_a_hold_collected_without_release_stops_renewing(r):
    import gc
    lock = Lock(r, "dropped", ttl=0.6)
    lock.acquire()
    assert int(lock.info()["keep"]) == 1
    del lock
    gc.collect()
    time.sleep(1.2)
    assert not r.exists("dropped"), "no watcher, no KEEP: the lease ran out"


def test_an_asyncio_hold_collected_without_release_stops_renewing(server, r):
    import gc

    async def main():
        c = aredis.Redis(port=server.port)
        lock = aio.Lock(c, "dropped-aio", ttl=0.6)
        await lock.acquire()
        del lock
        gc.collect()
        await asyncio.sleep(1.2)
        assert not await c.exists("dropped-aio")
        await c.aclose()

    asyncio.run(main())


def test_a_kept_lease_is_watched_by_one_ping_not_per_hold(r):
    """Issue 39: bound with its mailbox, a kept lease costs the client no
    EXTEND and no LOCK.INFO: the mailman's PING is its liveness check."""
    lock = Lock(r, "kept", ttl=0.6)
    lock.acquire()
    r.config_resetstat()
    time.sleep(1.5)
    stats = r.info("commandstats")
    assert "cmdstat_lock.extend" not in stats, "the server keeps the lease: no EXTEND"
    assert "cmdstat_lock.info" not in stats, "losses are mailed: no reads"
    assert stats["cmdstat_ping"]["calls"] >= 3
    assert lock.held and r.exists("kept")
    lock.release()


def test_an_asyncio_kept_lease_is_watched_by_one_ping(server, r):
    async def main():
        c = aredis.Redis(port=server.port)
        sem = aio.Semaphore(c, "kept-sem", 3, permits=2, ttl=0.6)
        await sem.acquire()
        r.config_resetstat()
        await asyncio.sleep(1.5)
        stats = r.info("commandstats")
        assert "cmdstat_sem.extend" not in stats and "cmdstat_sem.info" not in stats
        assert stats["cmdstat_ping"]["calls"] >= 3
        assert sem.held
        await sem.release()
        assert not r.exists("kept-sem")
        await c.aclose()

    asyncio.run(main())
