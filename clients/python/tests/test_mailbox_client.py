"""Issue 39 in the Python client: waits and losses through one mailbox per
server, so any number of holds and waits cost two connections, losses are
heard at once, and a wait given up leaves the server's queue."""

import asyncio
import threading
import time

import pytest
import redis
import redis.asyncio as aredis

from conftest import wait_for
from padlock import aio
from padlock.sync import Lock


def padlock_conns(r):
    """Connections besides the test's own."""
    return len(r.client_list()) - 1


def queued(r, key):
    raw = r.execute_command("LOCK.INFO", key)
    return int(dict(zip(raw[::2], raw[1::2]))[b"waiters"]) if raw else 0


def test_two_thousand_asyncio_waiters_use_two_connections_served_in_order(server, r):
    async def main():
        c = aredis.Redis(port=server.port)
        owner = aio.Lock(c, "hot", ttl=10)
        await owner.acquire()
        order = []

        async def worker(i):
            lock = aio.Lock(c, "hot", ttl=10)
            async with lock:
                order.append(i)

        tasks = []
        for i in range(2000):
            tasks.append(asyncio.create_task(worker(i)))
            if i % 100 == 99:
                # Queued in the order they were started.
                while queued(r, "hot") < i + 1:
                    await asyncio.sleep(0.005)
        assert queued(r, "hot") == 2000
        assert r.info("padlock")["padlock_blocked_clients"] == 0, "no blocked client per wait"
        assert padlock_conns(r) <= 2, r.client_list()
        await owner.release()
        await asyncio.wait_for(asyncio.gather(*tasks), 60)
        assert order[:100] == list(range(100))
        assert sorted(order) == list(range(2000))
        assert padlock_conns(r) <= 2
        await c.aclose()

    asyncio.run(main())


def test_five_hundred_threads_waiting_use_two_connections(server, r):
    client = redis.Redis(port=server.port)
    owner = Lock(client, "hot", ttl=10)
    owner.acquire()
    got = []

    def worker(i):
        with Lock(client, "hot", ttl=10, holder=f"t{i}"):
            got.append(i)

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(500)]
    for t in threads:
        t.start()
    assert wait_for(lambda: queued(r, "hot") == 500, timeout=20)
    assert r.info("padlock")["padlock_blocked_clients"] == 0
    assert padlock_conns(r) <= 2, r.client_list()
    owner.release()
    for t in threads:
        t.join(30)
    assert sorted(got) == list(range(500))
    client.close()


def test_a_deleted_hold_is_reported_within_milliseconds(r):
    """ttl 30 s: a watcher reading per interval would take 10 s to see it."""
    seen = []
    lock = Lock(r, "gone", ttl=30, on_lost=lambda h: seen.append(time.monotonic()))
    lock.acquire()
    time.sleep(0.2)  # bound with the mailbox
    deleted = time.monotonic()
    r.delete("gone")
    assert wait_for(lambda: seen, timeout=2)
    assert seen[0] - deleted < 1.0
    assert not lock.held
    with pytest.raises(Exception):
        lock.release()


def test_an_asyncio_flush_is_reported_within_milliseconds(server, r):
    async def main():
        c = aredis.Redis(port=server.port)
        sem = aio.Semaphore(c, "s", 2, ttl=30)
        await sem.acquire()
        await asyncio.sleep(0.2)
        r.flushall()
        for _ in range(100):
            if not sem.held:
                break
            await asyncio.sleep(0.01)
        assert not sem.held and sem.lost.is_set()
        await c.aclose()

    asyncio.run(main())


def test_a_try_acquired_hold_binds_its_mailbox_on_its_first_round(r):
    lock = Lock(r, "tried", ttl=0.6)
    assert lock.acquire(blocking=False) is not None
    time.sleep(0.5)  # one round (0.2 s): EXTEND ... KEEP MAILBOX
    r.delete("tried")
    assert wait_for(lambda: lock.lost.is_set(), timeout=0.5)
    assert not lock.held


def test_a_cancelled_asyncio_wait_leaves_the_queue_at_once(server, r):
    async def main():
        c = aredis.Redis(port=server.port)
        owner = aio.Lock(c, "busy", ttl=10)
        await owner.acquire()
        waiter = asyncio.create_task(aio.Lock(c, "busy", ttl=10, holder="w").acquire())
        while queued(r, "busy") < 1:
            await asyncio.sleep(0.005)
        r.config_resetstat()
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert queued(r, "busy") == 0, "taken out with LOCK.CANCEL before the cancel returned"
        assert r.info("commandstats")["cmdstat_lock.cancel"]["calls"] == 1
        await owner.release()
        assert not r.exists("busy"), "not granted to the cancelled waiter"
        await c.aclose()

    asyncio.run(main())


def test_a_timed_out_wait_is_answered_by_the_server_in_time(r):
    owner = Lock(r, "busy", ttl=10)
    owner.acquire()
    start = time.monotonic()
    assert Lock(r, "busy", ttl=10, holder="w").acquire(timeout=0.3) is None
    assert 0.28 < time.monotonic() - start < 0.8
    assert queued(r, "busy") == 0
    owner.release()


def test_queued_waits_survive_a_killed_keeper_connection(server, r):
    """The server drops the requests of a closed connection; the client
    sees its keeper replaced and sends them again with their ids."""
    async def main():
        c = aredis.Redis(port=server.port)
        r.execute_command("LOCK.ACQUIRE", "k", "other", 10000)
        async def take_and_give():
            lock = aio.Lock(c, "k", ttl=10)
            fence = await lock.acquire(timeout=20)
            await lock.release()
            return fence

        waits = [asyncio.create_task(take_and_give()) for _ in range(20)]
        while queued(r, "k") < 20:
            await asyncio.sleep(0.01)
        for entry in r.client_list():
            if entry["cmd"].startswith("lock."):
                r.client_kill_filter(_id=entry["id"])
        assert queued(r, "k") == 0
        # Queued again on a new keeper once the mailman's ping notices.
        for _ in range(500):
            if queued(r, "k") == 20:
                break
            await asyncio.sleep(0.01)
        assert queued(r, "k") == 20
        r.execute_command("LOCK.RELEASE", "k", "other")
        fences = await asyncio.wait_for(asyncio.gather(*waits), 20)
        assert all(f is not None for f in fences)
        await c.aclose()

    asyncio.run(main())


def test_a_cancel_that_races_the_grant_never_leaves_a_hold(server, r):
    """Issue 46: the cancel and the grant in both orders, twenty times: the
    waiter either holds (and knows it) or leaves nothing held."""
    async def main():
        c = aredis.Redis(port=server.port)
        for i in range(20):
            owner = aio.Lock(c, "race", ttl=10)
            await owner.acquire()
            lock = aio.Lock(c, "race", ttl=10, holder=f"w{i}")
            waiter = asyncio.create_task(lock.acquire())
            while queued(r, "race") < 1:
                await asyncio.sleep(0.002)
            if i % 2:
                await owner.release()
                await asyncio.sleep(0.001 * (i % 5))
                waiter.cancel()
            else:
                waiter.cancel()
                await owner.release()
            try:
                got = await waiter
            except asyncio.CancelledError:
                got = None
            if got is not None:
                assert lock.held
                await lock.release()
            assert not lock.held
            assert not r.exists("race"), f"round {i}: held by {r.execute_command('LOCK.INFO', 'race')}"
        await c.aclose()

    asyncio.run(main())


def test_an_interrupted_blocking_wait_leaves_the_queue(r):
    """Issue 46: Ctrl-C (KeyboardInterrupt) during a blocking acquire takes
    the wait back with LOCK.CANCEL before it propagates, and the next
    holder is served. (The grant-first order is the asyncio test's: in a
    blocking program an interrupt may land anywhere, even inside
    `threading`'s own locks.)"""
    import signal

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, interrupt)
    try:
        for i in range(10):
            owner = Lock(r, "intr", ttl=10, holder="owner")
            owner.acquire()
            lock = Lock(r, "intr", ttl=10, holder=f"w{i}")
            signal.setitimer(signal.ITIMER_REAL, 0.05 + 0.002 * (i % 5))
            with pytest.raises(KeyboardInterrupt):
                lock.acquire(timeout=5)
            assert queued(r, "intr") == 0, "taken out of the queue"
            assert not lock.held
            owner.release()
            assert not r.exists("intr"), f"round {i}: not granted to the interrupted waiter"
            # The keeper still serves the next acquire.
            assert lock.acquire(timeout=1) is not None
            lock.release()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
