"""asyncio clients on `redis.asyncio` (`Redis` or `RedisCluster`): the same
classes as `padlock.sync`, awaitable, with `async with`.

A hold keeps one connection while held (a `KEEP` lease lives exactly as
long as it), and a watcher task renews every third of the ttl. When the
hold turns out lost, `lost` is set, `on_lost` is called, and the task that
entered `async with` is cancelled: the guarded work stops, and the block
ends with `LockLostError`.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Optional, Sequence

import redis
import redis.asyncio
from redis.asyncio.cluster import RedisCluster

from ._common import (
    Edge,
    LockLostError,
    NotAcquiredError,
    NotHeldError,
    as_map,
    as_str,
    backoff,
    is_keep_unknown,
    is_try_again,
    new_holder,
    parse_graph,
    to_ms,
    translate,
)
from ._kinds import Commands, LockCommands, MultiLockCommands, RwCommands, SemaphoreCommands

#: How long a server-side wait may take at most on the wire (BLOCK 0).
FOREVER = 365 * 24 * 3600.0


class _Source:
    """Where a hold gets its connection: the client's pool, or for a
    cluster a connection of its own to the node that serves the key."""

    def __init__(self, client: Any, key: str) -> None:
        self.client, self.key = client, key
        self.node: Any = None
        self.pool = None if isinstance(client, RedisCluster) else client.connection_pool

    async def get(self, command: str) -> Any:
        if self.pool is not None:
            return await self.pool.get_connection(command)
        if self.node is None:
            await self.client.initialize()
            self.node = self.client.get_node_from_key(self.key)
        return self.node.connection_class(**self.node.connection_kwargs)

    async def put(self, conn: Any) -> None:
        if self.pool is not None:
            await self.pool.release(conn)
        else:
            await conn.disconnect()


class _Hold(Commands):
    def __init__(
        self,
        client: Any,
        route_key: str,
        holder: Optional[str],
        ttl: float,
        keep: bool,
        on_lost: Optional[Callable[["_Hold"], None]],
        cancel_on_loss: bool,
    ) -> None:
        self.holder = holder or new_holder()
        self.ttl_ms = to_ms(ttl)
        self.keep = keep
        self.on_lost = on_lost
        self.cancel_on_loss = cancel_on_loss
        self.lost = asyncio.Event()
        self._client = client
        self._source = _Source(client, route_key)
        self._conn: Any = None
        self._io = asyncio.Lock()
        self._watcher: Optional[asyncio.Task[None]] = None
        self._guarded: Optional[asyncio.Task[Any]] = None
        self._depth = 0

    async def _call(self, args: Sequence[Any], wait: Optional[float] = None) -> Any:
        async with self._io:
            if self._conn is None:
                self._conn = await self._source.get(str(args[0]))
            try:
                await self._conn.send_command(*args)
                return await self._conn.read_response(timeout=wait)
            except redis.ResponseError as e:
                raise translate(e) from None

    async def _give_back(self) -> None:
        async with self._io:
            if self._conn is not None:
                await self._source.put(self._conn)
                self._conn = None

    async def _acquire(self, blocking: bool, timeout: Optional[float]) -> Any:
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        attempt = 0
        while True:
            left = None if deadline is None else max(0.0, deadline - loop.time())
            args = self._acquire_cmd(blocking, left)
            if self.keep:
                args.append("KEEP")
            wait = (FOREVER if left is None else left + 5.0) if blocking else None
            try:
                reply = await self._call(args, wait)
            except redis.ResponseError as e:
                if self.keep and is_keep_unknown(e):
                    self.keep = False
                    continue
                if not is_try_again(e) or not blocking:
                    if self._depth == 0:
                        await self._give_back()
                    raise
                pause = backoff(attempt)
                attempt += 1
                if deadline is not None and loop.time() + pause > deadline:
                    if self._depth == 0:
                        await self._give_back()
                    return None
                await asyncio.sleep(pause)
                continue
            if reply is None:
                if self._depth == 0:
                    await self._give_back()
                return None
            self._depth += 1
            if self._depth == 1:
                self.lost.clear()
                self._watcher = asyncio.create_task(self._watch())
            return reply

    async def release(self) -> None:
        """Gives back one hold; `NotHeldError` when it was lost."""
        try:
            reply = await self._call(self._release_cmd())
        except NotHeldError:
            await self._end()
            raise
        self._depth = max(0, self._depth - 1)
        if self._released_all(reply):
            await self._end()

    async def _end(self) -> None:
        self._depth = 0
        watcher, self._watcher = self._watcher, None
        if watcher is not None and watcher is not asyncio.current_task():
            watcher.cancel()
            try:
                await watcher
            except asyncio.CancelledError:
                pass
        await self._give_back()

    async def _watch(self) -> None:
        interval = max(self.ttl_ms / 3000.0, 0.001)
        while True:
            await asyncio.sleep(interval)
            if not await self.renew():
                self._mark_lost()
                return

    async def renew(self) -> bool:
        """Resets the lease now (and rebinds `KEEP`); False when lost."""
        for args in self._extend_cmds():
            if self.keep:
                args.append("KEEP")
            for attempt in range(2):
                try:
                    await self._call(args)
                    break
                except NotHeldError:
                    return False
                except (redis.ConnectionError, redis.TimeoutError, OSError):
                    async with self._io:
                        if self._conn is not None:
                            await self._conn.disconnect()
                    if attempt == 1:
                        return False
        return True

    def _mark_lost(self) -> None:
        self.lost.set()
        if self.on_lost is not None:
            self.on_lost(self)
        if self.cancel_on_loss and self._guarded is not None and not self._guarded.done():
            self._guarded.cancel()

    def check(self) -> None:
        """Raises `LockLostError` when the hold was lost."""
        if self.lost.is_set():
            raise LockLostError(f"{self.holder} lost its hold")

    @property
    def held(self) -> bool:
        return self._depth > 0 and not self.lost.is_set()

    blocking_timeout: Optional[float] = None

    async def _enter(self) -> None:
        reply = await self._acquire(True, self.blocking_timeout)
        if reply is None:
            raise NotAcquiredError(f"{self.key}: not acquired within {self.blocking_timeout} s")
        self._took(reply)
        self._guarded = asyncio.current_task()

    async def _exit(self, exc: Optional[BaseException]) -> None:
        self._guarded = None
        lost = self.lost.is_set()
        if self._depth > 0:
            try:
                await self.release()
            except NotHeldError:
                lost = True
        if lost and (exc is None or isinstance(exc, asyncio.CancelledError)):
            raise LockLostError(f"{self.key}: the hold was lost while the work went on") from exc


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
        blocking_timeout: Optional[float] = None,
        on_lost: Optional[Callable[[_Hold], None]] = None,
        cancel_on_loss: bool = True,
    ) -> None:
        _Hold.__init__(self, client, key, holder, ttl, keep, on_lost, cancel_on_loss)
        self.blocking_timeout = blocking_timeout
        self.key = key

    async def acquire(self, blocking: bool = True, timeout: Optional[float] = None) -> Optional[int]:
        """The fence, or None (see `padlock.Lock.acquire`)."""
        reply = await self._acquire(blocking, timeout)
        return None if reply is None else self._took(reply)

    async def info(self) -> dict[str, Any]:
        return as_map(await self._client.execute_command("LOCK.INFO", self.key))

    async def locked(self) -> bool:
        return bool(await self._client.exists(self.key))

    async def owned(self) -> bool:
        return as_str((await self.info()).get("holder", b"")) == self.holder

    async def __aenter__(self) -> "Lock":
        await self._enter()
        return self

    async def __aexit__(self, t: Any, exc: Optional[BaseException], tb: Any) -> None:
        await self._exit(exc)


class Semaphore(SemaphoreCommands, _Hold):
    """Counting semaphore (see `padlock.Semaphore`)."""

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
        blocking_timeout: Optional[float] = None,
        on_lost: Optional[Callable[[_Hold], None]] = None,
        cancel_on_loss: bool = True,
    ) -> None:
        _Hold.__init__(self, client, key, holder, ttl, keep, on_lost, cancel_on_loss)
        self.blocking_timeout = blocking_timeout
        self.key, self.limit, self.permits = key, limit, permits

    async def acquire(self, blocking: bool = True, timeout: Optional[float] = None) -> Optional[int]:
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
    """All of several locks at once (see `padlock.MultiLock`)."""

    def __init__(
        self,
        client: Any,
        keys: Sequence[str],
        *,
        ttl: float = 30.0,
        holder: Optional[str] = None,
        keep: bool = True,
        blocking_timeout: Optional[float] = None,
        on_lost: Optional[Callable[[_Hold], None]] = None,
        cancel_on_loss: bool = True,
    ) -> None:
        _Hold.__init__(self, client, keys[0], holder, ttl, keep, on_lost, cancel_on_loss)
        self.blocking_timeout = blocking_timeout
        self.key, self.keys = keys[0], list(keys)

    async def acquire(self, blocking: bool = True, timeout: Optional[float] = None) -> Optional[list[int]]:
        reply = await self._acquire(blocking, timeout)
        return None if reply is None else self._took(reply)

    async def __aenter__(self) -> "MultiLock":
        await self._enter()
        return self

    async def __aexit__(self, t: Any, exc: Optional[BaseException], tb: Any) -> None:
        await self._exit(exc)


class RwHold(RwCommands, _Hold):
    """One mode of a `ReadWriteLock`."""

    def __init__(self, rw: "ReadWriteLock", mode: str) -> None:
        _Hold.__init__(self, rw._client, rw.key, rw.holder, rw.ttl, rw.keep, rw.on_lost,
                       rw.cancel_on_loss)
        self.blocking_timeout = rw.blocking_timeout
        self.key, self.mode = rw.key, mode

    async def acquire(self, blocking: bool = True, timeout: Optional[float] = None) -> Optional[int]:
        reply = await self._acquire(blocking, timeout)
        return None if reply is None else self._took(reply)

    async def __aenter__(self) -> "RwHold":
        await self._enter()
        return self

    async def __aexit__(self, t: Any, exc: Optional[BaseException], tb: Any) -> None:
        await self._exit(exc)


class ReadWriteLock:
    """A fair read-write lock: `async with rw.read(): ...`."""

    def __init__(
        self,
        client: Any,
        key: str,
        *,
        ttl: float = 30.0,
        holder: Optional[str] = None,
        keep: bool = True,
        blocking_timeout: Optional[float] = None,
        on_lost: Optional[Callable[[_Hold], None]] = None,
        cancel_on_loss: bool = True,
    ) -> None:
        self._client, self.key, self.ttl = client, key, ttl
        self.holder = holder or new_holder()
        self.keep, self.on_lost, self.cancel_on_loss = keep, on_lost, cancel_on_loss
        self.blocking_timeout = blocking_timeout
        self._read = RwHold(self, "READ")
        self._write = RwHold(self, "WRITE")

    def read(self) -> RwHold:
        return self._read

    def write(self) -> RwHold:
        return self._write

    async def info(self) -> dict[str, Any]:
        return as_map(await self._client.execute_command("RWLOCK.INFO", self.key))


async def graph(client: Any) -> list[Edge]:
    """`LOCK.GRAPH` as data."""
    return parse_graph(await client.execute_command("LOCK.GRAPH"))
