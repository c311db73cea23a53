# aio {
"""asyncio clients on `redis.asyncio` (`Redis` or `RedisCluster`) or on
valkey-glide (`glide(GlideClient, config)`, see `_glide`): the classes of
`padlock.sync`, awaitable, with `async with`.

This file is the one source of both flavours: `sync.py` is generated from
it (`clients/python/unasync.py`, which drops `async`/`await` and the lines
marked `# aio`, turns `#sync|` lines into code, and puts `_thread_runtime` for
`_asyncio_runtime`). What differs between threads and an event loop (time, locks,
the watcher, the connections) lives in `_asyncio_runtime` and `_thread_runtime`, under the
same names.

The holds of an event loop share one watcher task and, per server, one
connection of padlock's own (`_asyncio_runtime`), which carries their commands and
`KEEP` bindings; a wait runs on a connection made for it and is bound on
the shared one once granted. When a hold turns out lost, `lost` is set,
`on_lost` is called, and the task that entered `async with` is cancelled
(unless `cancel_on_loss=False`): the guarded work stops, and the block ends
with `LockLostError`.
"""
# aio }
#sync| """Blocking clients on redis-py (`redis.Redis` or `redis.RedisCluster`) or
#sync| valkey-glide-sync (`glide(GlideClient, config)`, see `_glide`).
#sync|
#sync| Generated from `aio.py` by `clients/python/unasync.py`: edit that file.
#sync|
#sync| The holds of a process share one watcher thread and, per server, one
#sync| connection of padlock's own (`_thread_runtime`): acquires, renewals, reads and
#sync| releases go through it, and `KEEP` leases are bound to it. A wait runs on a
#sync| connection made for it, with a timeout longer than the wait, and its grant
#sync| is then bound to the shared connection. Every third of the ttl the watcher
#sync| checks each hold (a read while the server keeps the lease, a renewal
#sync| otherwise) and binds it again after the shared connection was replaced;
#sync| when a hold turns out lost, `lost` is set and `on_lost` is called (on a
#sync| thread of its own).
#sync| """

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from . import _asyncio_runtime as rt
from ._async_watch import Hold as _Hold
from ._common import Edge, Hot, Replicas, as_map, as_str, parse_graph, parse_top
from ._holders import current_holder
from ._kinds import LockCommands, MultiLockCommands, RwCommands, SemaphoreCommands


class Lock(LockCommands, _Hold):
    """A reentrant lock with a lease and a fencing token.

    >>> async with Lock(r, "job:1", ttl=30) as lock:
    ...     await do_work(fence=lock.fence)
    """

    def __init__(
        self,
        client: Any,
        key: str,
        *,
        ttl: float = 30.0,
        holder: Optional[str] = None,
        keep: bool = True,
        renew: bool = True,
        max_hold: Optional[float] = None,
        blocking_timeout: Optional[float] = None,
        on_lost: Optional[Callable[[_Hold], None]] = None,
        cancel_on_loss: bool = True,  # aio
        replicas: "int | Replicas | None" = None,
    ) -> None:
        _Hold.__init__(self, client, key, holder, ttl, keep, on_lost, renew, max_hold)
        self.replicas = Replicas.of(replicas)
        self.cancel_on_loss = cancel_on_loss  # aio
        self.blocking_timeout = blocking_timeout
        self.key = key

    async def acquire(self, blocking: bool = True, timeout: Optional[float] = None) -> Optional[int]:
        """The fence, or None when not acquired (without `blocking`, or when
        `timeout` seconds passed). Waits server-side, first come first
        served; -TRYAGAIN of a restart grace is retried until `timeout`."""
        reply = await self._acquire(blocking, timeout)
        return None if reply is None else self._took(reply)

    async def locked(self) -> bool:
        """Whether anyone holds the key."""
        return bool(await self._client.exists(self.key))

    async def owned(self) -> bool:
        """Whether this holder holds it, as the server sees it now."""
        return as_str((await self.info()).get("holder", b"")) == self.holder

    async def info(self) -> dict[str, Any]:
        return as_map(await self._client.execute_command("LOCK.INFO", self.key))

    async def __aenter__(self) -> "Lock":
        await self._enter()
        return self

    async def __aexit__(self, t: Any, exc: Optional[BaseException], tb: Any) -> None:
        await self._exit(exc)


class Semaphore(SemaphoreCommands, _Hold):
    """Counting semaphore: up to `limit` permits across holders, each
    holder with its own lease."""

    def __init__(
        self,
        client: Any,
        key: str,
        limit: int,
        *,
        permits: int = 1,
        ttl: float = 30.0,
        holder: Optional[str] = None,
        keep: bool = True,
        renew: bool = True,
        max_hold: Optional[float] = None,
        blocking_timeout: Optional[float] = None,
        on_lost: Optional[Callable[[_Hold], None]] = None,
        cancel_on_loss: bool = True,  # aio
        replicas: "int | Replicas | None" = None,
    ) -> None:
        _Hold.__init__(self, client, key, holder, ttl, keep, on_lost, renew, max_hold)
        self.replicas = Replicas.of(replicas)
        self.cancel_on_loss = cancel_on_loss  # aio
        self.blocking_timeout = blocking_timeout
        self.key, self.limit, self.permits = key, limit, permits

    async def acquire(self, blocking: bool = True, timeout: Optional[float] = None) -> Optional[int]:
        """The permits this holder now holds, or None."""
        reply = await self._acquire(blocking, timeout)
        return None if reply is None else self._took(reply)

    async def info(self) -> dict[str, Any]:
        return as_map(await self._client.execute_command("SEM.INFO", self.key))

    async def __aenter__(self) -> "Semaphore":
        await self._enter()
        return self

    async def __aexit__(self, t: Any, exc: Optional[BaseException], tb: Any) -> None:
        await self._exit(exc)


class MultiLock(MultiLockCommands, _Hold):
    """Several locks taken all at once or not at all (`LOCK.MACQUIRE`). In a
    cluster the keys must share a hash tag."""

    def __init__(
        self,
        client: Any,
        keys: Sequence[str],
        *,
        ttl: float = 30.0,
        holder: Optional[str] = None,
        keep: bool = True,
        renew: bool = True,
        max_hold: Optional[float] = None,
        blocking_timeout: Optional[float] = None,
        on_lost: Optional[Callable[[_Hold], None]] = None,
        cancel_on_loss: bool = True,  # aio
        replicas: "int | Replicas | None" = None,
    ) -> None:
        _Hold.__init__(self, client, keys[0], holder, ttl, keep, on_lost, renew, max_hold)
        self.replicas = Replicas.of(replicas)
        self.cancel_on_loss = cancel_on_loss  # aio
        self.blocking_timeout = blocking_timeout
        self.keys = list(keys)
        self.key = self.keys[0]

    async def acquire(self, blocking: bool = True, timeout: Optional[float] = None) -> Optional[list[int]]:
        """The fences, one per key, or None."""
        reply = await self._acquire(blocking, timeout)
        return None if reply is None else self._took(reply)

    async def __aenter__(self) -> "MultiLock":
        await self._enter()
        return self

    async def __aexit__(self, t: Any, exc: Optional[BaseException], tb: Any) -> None:
        await self._exit(exc)


class RwHold(RwCommands, _Hold):
    """One mode (`READ` or `WRITE`) of a `ReadWriteLock`."""

    def __init__(self, rw: "ReadWriteLock", mode: str) -> None:
        _Hold.__init__(self, rw._client, rw.key, rw._own_holder, rw.ttl, rw.keep, rw.on_lost,
                       rw.renews, rw.max_hold)
        self.replicas = rw.replicas
        self.cancel_on_loss = rw.cancel_on_loss  # aio
        self.blocking_timeout = rw.blocking_timeout
        self.key, self.mode = rw.key, mode

    async def acquire(self, blocking: bool = True, timeout: Optional[float] = None) -> Optional[int]:
        """The holder's fence, or None."""
        reply = await self._acquire(blocking, timeout)
        return None if reply is None else self._took(reply)

    async def __aenter__(self) -> "RwHold":
        await self._enter()
        return self

    async def __aexit__(self, t: Any, exc: Optional[BaseException], tb: Any) -> None:
        await self._exit(exc)


class ReadWriteLock:
    """A fair read-write lock: `async with rw.read(): ...`,
    `async with rw.write(): ...`. Both modes belong to one holder, so a
    reader may upgrade (`write()` while reading: granted once it is the
    only reader) or downgrade."""

    def __init__(
        self,
        client: Any,
        key: str,
        *,
        ttl: float = 30.0,
        holder: Optional[str] = None,
        keep: bool = True,
        renew: bool = True,
        max_hold: Optional[float] = None,
        blocking_timeout: Optional[float] = None,
        on_lost: Optional[Callable[[_Hold], None]] = None,
        cancel_on_loss: bool = True,  # aio
        replicas: "int | Replicas | None" = None,
    ) -> None:
        self._client, self.key, self.ttl = client, key, ttl
        self._own_holder = holder
        self.keep, self.on_lost = keep, on_lost
        self.cancel_on_loss = cancel_on_loss  # aio
        self.renews, self.max_hold = renew, max_hold
        self.replicas = Replicas.of(replicas)
        self.blocking_timeout = blocking_timeout
        self._read = RwHold(self, "READ")
        self._write = RwHold(self, "WRITE")

    @property
    def holder(self) -> str:
        """`holder=`, or the caller's context's (see `Lock`)."""
        return self._own_holder or current_holder()

    def read(self) -> RwHold:
        return self._read

    def write(self) -> RwHold:
        return self._write

    async def info(self) -> dict[str, Any]:
        return as_map(await rt.node(self._client, self.key).execute_command("RWLOCK.INFO", self.key))


def glide(factory: Any, config: Any) -> rt.Driver:
    """valkey-glide as the driver: `factory` is `glide.GlideClient` or
    `glide.GlideClusterClient` (`glide_sync`'s for the blocking classes),
    `config` its configuration (addresses, credentials, TLS, ...). Pass the
    result where a redis-py client goes: padlock makes the glide clients it
    needs from it (see `_glide`)."""
    return rt.Driver(factory, config)


async def graph(client: Any) -> list[Edge]:
    """`LOCK.GRAPH` as data (of one node; in a cluster, of each node you ask)."""
    return parse_graph(await client.execute_command("LOCK.GRAPH"))


async def top(client: Any, count: int = 10) -> list[Hot]:
    """`LOCK.TOP`: the keys with the most waiters right now, most first
    (of one node; in a cluster, of each node you ask)."""
    return parse_top(await client.execute_command("LOCK.TOP", "COUNT", count))
