"""The asyncio classes on valkey-glide: the kinds, a shared connection
glide replaces on its own, an abandoned wait, and a cluster
(GlideClusterClient, routing by key). Lost replies: test_aio_retries."""

import asyncio
import time

import pytest

glide = pytest.importorskip("glide")
# glide's own modules warn about each other's imports.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

from padlock import NotAcquiredError, NotHeldError  # noqa: E402
from padlock.aio import Lock, MultiLock, ReadWriteLock, Semaphore, graph  # noqa: E402
from padlock.aio import glide as on_glide  # noqa: E402


def config(port):
    return glide.GlideClientConfiguration([glide.NodeAddress("127.0.0.1", port)])


def count(r, key):
    raw = r.execute_command("LOCK.INFO", key)
    return 0 if raw is None else dict(zip(raw[::2], raw[1::2]))[b"count"]


def keep(r, key):
    raw = r.execute_command("LOCK.INFO", key)
    return None if raw is None else int(dict(zip(raw[::2], raw[1::2]))[b"keep"])


def test_every_kind_on_glide(r, server):
    async def main():
        g = on_glide(glide.GlideClient, config(server.port))
        lock = Lock(g, "k", ttl=5)
        f1 = await lock.acquire()
        assert f1 is not None and await lock.acquire() == f1, "reentry keeps the fence"
        assert count(r, "k") == 2 and await lock.owned()
        other = Lock(g, "k", ttl=5, holder="other")
        assert await other.acquire(blocking=False) is None
        with pytest.raises(NotAcquiredError):
            other.blocking_timeout = 0.2
            async with other:
                pass
        await lock.release()
        await lock.release()
        assert not r.exists("k")
        with pytest.raises(NotHeldError):
            await lock.release()
        # A short lease lives while held (KEEP).
        async with Lock(g, "short", ttl=0.3) as short:
            await asyncio.sleep(1.0)
            assert short.held and keep(r, "short") == 1
        assert not r.exists("short")
        sem = Semaphore(g, "s", 3, permits=2, ttl=5)
        assert await sem.acquire() == 2
        assert await Semaphore(g, "s", 3, permits=2, ttl=5, holder="other").acquire(blocking=False) is None
        await sem.release()
        async with MultiLock(g, ["m1", "m2"], ttl=5) as m:
            assert len(m.fences) == 2 and r.exists("m1", "m2") == 2
        rw = ReadWriteLock(g, "rw", ttl=5)
        async with rw.read():
            async with rw.write():
                assert r.exists("rw")
        assert r.exists("m1", "m2", "rw", "s") == 0
        assert await graph(g) == []

    asyncio.run(main())


def test_a_shared_connection_glide_replaces_is_bound_again(r, server):
    async def main():
        g = on_glide(glide.GlideClient, config(server.port))
        lock = Lock(g, "kept", ttl=0.6)
        await lock.acquire()
        assert keep(r, "kept") == 1
        # Glide reconnects by itself, silently: the binding ends with the
        # old connection; the watcher sees the lease run down.
        r.execute_command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
        await asyncio.sleep(1.5)
        assert lock.held and keep(r, "kept") == 1, "bound again"
        await lock.release()
        assert not r.exists("kept")

    asyncio.run(main())


def test_an_abandoned_wait_on_glide_is_dropped_at_once(r, server):
    async def main():
        g = on_glide(glide.GlideClient, config(server.port))
        owner = Lock(g, "busy", ttl=5)
        await owner.acquire()
        waiter = asyncio.ensure_future(Lock(g, "busy", ttl=5, holder="waiter").acquire())

        def waiters():
            raw = r.execute_command("LOCK.INFO", "busy")
            return int(dict(zip(raw[::2], raw[1::2]))[b"waiters"])

        for _ in range(200):
            if waiters() == 1:
                break
            await asyncio.sleep(0.01)
        assert waiters() == 1
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        # Closing the wait's glide client drops the server-side wait, so the
        # release frees the key instead of granting it.
        deadline = time.monotonic() + 1
        while waiters() and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        await owner.release()
        await asyncio.sleep(0.1)
        assert not r.exists("busy")

    asyncio.run(main())


def test_glide_on_a_cluster_routes_by_key(cluster_server):
    r = cluster_server.client()

    async def main():
        cfg = glide.GlideClusterClientConfiguration([glide.NodeAddress("127.0.0.1", cluster_server.port)])
        g = on_glide(glide.GlideClusterClient, cfg)
        lock = Lock(g, "c-lock", ttl=5)
        f = await lock.acquire()
        assert f is not None and await lock.acquire() == f
        await lock.release()
        await lock.release()
        async with MultiLock(g, ["{c}1", "{c}2"], ttl=5) as m:
            assert len(m.fences) == 2
        sem = Semaphore(g, "c-sem", 2, ttl=5)
        assert await sem.acquire() == 1
        await sem.release()
        for k in ("c-lock", "{c}1", "{c}2", "c-sem"):
            assert not r.exists(k)

    asyncio.run(main())
    r.close()
