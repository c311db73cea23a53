"""asyncio clients on `redis.asyncio` (`Redis` or `RedisCluster`) or on
valkey-glide (`glide(GlideClient, config)`, see `_glide`): the same
classes as `padlock.sync`, awaitable, with `async with`.

The holds of an event loop share one watcher task and, per server, one
connection of padlock's own (`_ashared`), which carries their commands and
`KEEP` bindings; a wait runs on a connection made for it and is bound on
the shared one once granted. When a hold turns out lost, `lost` is set,
`on_lost` is called, and the task that entered `async with` is cancelled:
the guarded work stops, and the block ends with `LockLostError`.
"""

from __future__ import annotations

import asyncio
import warnings
import weakref
from typing import Any, Callable, Optional, Sequence

import redis
import redis.asyncio
from redis.asyncio.cluster import RedisCluster

from ._common import (
    Edge,
    Hot,
    LockLostError,
    NotAcquiredError,
    NotHeldError,
    as_map,
    as_str,
    is_try_again,
    new_holder,
    parse_graph,
    parse_top,
    to_ms,
    translate,
)
from ._retry import (
    CONNECTION_ERRORS,
    Verdict,
    is_unknown_option,
    lost_message,
    pause,
    request_id,
    verdict,
    with_id,
)
from ._ashared import Keeper, exchange, keeper, scheduler
from ._glide import Glide
from ._holders import COUNTS, current_holder
from ._kinds import Commands, LockCommands, MultiLockCommands, RwCommands, SemaphoreCommands

#: How long a server-side wait may take at most on the wire (BLOCK 0).
FOREVER = 365 * 24 * 3600.0


class _Source:
    """Where a hold's connections come from: made like the client's own
    (its pool's settings, or for a cluster those of the node that serves
    the key), never taken from the application's pool."""

    def __init__(self, client: Any, key: str) -> None:
        self.client, self.key = client, key
        self.node: Any = None
        self.glide = client if isinstance(client, Glide) else None
        self.pool = None if isinstance(client, (RedisCluster, Glide)) else client.connection_pool

    async def _where(self) -> tuple[Any, dict[str, Any], str]:
        if self.glide is not None:
            return None, {}, ""
        if self.pool is not None:
            return self.pool.connection_class, dict(self.pool.connection_kwargs), ""
        if self.node is None:
            await self.client.initialize()
            self.node = self.client.get_node_from_key(self.key)
        return self.node.connection_class, dict(self.node.connection_kwargs), str(self.node.name)

    async def make(self, **override: Any) -> Any:
        if self.glide is not None:
            return self.glide.connection()
        cls, kw, _ = await self._where()
        kw.update(override)
        return cls(**kw)

    async def keeper(self) -> Keeper:
        _, _, node = await self._where()
        return keeper(self.client, node, self.make)


def _collected(box: list[Any]) -> None:
    """A hold collected without `release()`: if the server keeps its lease,
    the shared connection is replaced so that the binding ends (the holds
    that live bind again on their next round)."""
    kept, box[0] = box[0], None
    if kept is not None:
        kept.reset_soon()


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
        renew: bool = True,
        max_hold: Optional[float] = None,
    ) -> None:
        self._own_holder = holder
        self.holder = holder or current_holder()
        self.ttl_ms = to_ms(ttl)
        self.renews = renew
        self.max_hold = max_hold
        self.keep = keep and renew and max_hold is None
        self._held_since = 0.0
        self.on_lost = on_lost
        self.cancel_on_loss = cancel_on_loss
        self.lost = asyncio.Event()
        self._client = client
        self._source = _Source(client, route_key)
        self._box: list[Any] = [None]
        self._finalizer: Optional[weakref.finalize] = None
        self._io = asyncio.Lock()
        self._keeper: Optional[Keeper] = None
        self._stopped = True
        # The task running this hold's round, and a lock it holds meanwhile:
        # `_end` waits for a round under way.
        self._round: Optional[asyncio.Task[Any]] = None
        self._watching = asyncio.Lock()
        self._gen = 0
        self._guarded: Optional[asyncio.Task[Any]] = None
        self._depth = 0
        self._lease_until = 0.0
        self._ids = True
        # The keeper's epoch when the lease was bound to it (`KEEP`).
        self._bound_epoch = -1
        self._unsure = False
        # What `renews` and `keep` were before `stop_renewing`.
        self._resume: Optional[tuple[bool, bool]] = None

    @property
    def _bound(self) -> bool:
        return self._keeper is not None and self._bound_epoch == self._keeper.epoch

    async def _call(self, args: Sequence[Any], limit: Optional[float] = None, wait: bool = False) -> Any:
        """One command, waiting for its reply at most `limit` seconds: a wait
        (`wait`) on a connection of its own, closed after it; anything else
        on the shared connection, whose `KEEP` bindings it then carries."""
        async with self._io:
            try:
                if not wait:
                    if self._keeper is None:
                        self._keeper = await self._source.keeper()
                    k = self._keeper
                    reply, epoch = await k.call(args, limit)
                    if "KEEP" in args:
                        self._bound_epoch = epoch
                        self._box[0] = k
                    return reply
                conn = await self._source.make(socket_timeout=None)
                try:
                    return await asyncio.wait_for(exchange(conn, args), limit)
                except asyncio.TimeoutError:
                    raise redis.TimeoutError(f"no reply to {args[0]} within {limit} s") from None
                finally:
                    await conn.disconnect()
            except redis.ResponseError as e:
                raise translate(e) from None

    async def _send(self, make: Callable[[Optional[float]], list[Any]], phase: str,
                    deadline: Optional[float], wait: bool = False) -> Any:
        """One changing request, with one request-id, sent until it is
        answered or `deadline` (loop time; None: no end) passes."""
        loop = asyncio.get_running_loop()
        rid = request_id() if self._ids else None
        attempt = 0
        while True:
            left = None if deadline is None else max(0.0, deadline - loop.time())
            # A wait may take its BLOCK timeout and then some (no driver
            # timeout may abandon a wait the server still holds).
            limit = (FOREVER if left is None else left + 5.0) if wait else (
                None if left is None else max(left, 0.05))
            try:
                return await self._call(with_id(make(left), rid), limit, wait)
            except Exception as e:
                if rid is not None and is_unknown_option(e):
                    self._ids, rid = False, None
                    continue
                if verdict(e, phase) is not Verdict.RESEND or (rid is None and phase != "renew"):
                    raise
                p = pause(attempt, loop.time(), deadline)
                if p is None:
                    raise
                attempt += 1
                await asyncio.sleep(p)

    async def _give_back(self, clean: bool = True) -> None:
        """The hold is over; unless nothing of it can still be bound
        (`clean`), the shared connection is replaced (see `padlock.Lock`)."""
        async with self._io:
            self._bound_epoch = -1
            kept, self._box[0] = self._box[0], None
            if not clean and kept is not None:
                async with kept.lock:
                    await kept.reset()

    async def _acquire(self, blocking: bool, timeout: Optional[float]) -> Any:
        if self._depth == 0 and self._resume is not None:
            (self.renews, self.keep), self._resume = self._resume, None
        if self._depth == 0 and self._own_holder is None:
            self.holder = current_holder()
        loop = asyncio.get_running_loop()
        start = loop.time()
        ttl = self.ttl_ms / 1000.0
        if blocking:
            deadline = None if timeout is None else start + timeout
        else:
            deadline = start + ttl

        def make(left: Optional[float]) -> list[Any]:
            # A wait's grant is bound afterwards, on the shared connection.
            args = self._acquire_cmd(blocking, left)
            return args + ["KEEP"] if self.keep and not blocking else args

        while True:
            try:
                reply = await self._send(make, "acquire" if blocking else "try", deadline, blocking)
                break
            except Exception as e:
                if self.keep and not self._ids and is_unknown_option(e):
                    self.keep = False
                    continue
                if self._depth == 0:
                    await self._give_back(clean=not isinstance(e, CONNECTION_ERRORS))
                if blocking and is_try_again(e):
                    return None
                raise
        if reply is None:
            if self._depth == 0:
                await self._give_back()
            return None
        self._depth += 1
        COUNTS.took(self.key, self.holder)
        self._lease_until = start + ttl
        if self._depth == 1:
            self.lost.clear()
            self._held_since = start
            if self.renews:
                # Weakly: a hold dropped unreleased is collected and stops
                # renewing (its binding ends, see `_collected`).
                self._stopped = False
                self._gen += 1
                scheduler().add(self, loop.time() + self._interval(), self._gen)
                if self._finalizer is None:
                    self._finalizer = weakref.finalize(self, _collected, self._box)
        if self.renews and blocking and (self.keep or self._lease_until - loop.time() < ttl * 2 / 3):
            await self.renew()
        return reply

    def _interval(self) -> float:
        return max(self.ttl_ms / 3000.0, 0.001)

    async def release(self) -> None:
        """Gives back one hold (see `padlock.Lock.release`)."""
        if self._depth == 0:
            raise NotHeldError(f"{self.key}: not held by {self.holder}")
        loop = asyncio.get_running_loop()
        deadline = max(self._lease_until, loop.time() + 1.0)
        try:
            reply = await self._send(lambda _: self._release_cmd(), "release", deadline)
        except Exception as e:
            v = verdict(e, "release")
            await self._end(clean=v is Verdict.LOST)
            if v is Verdict.LOST and not isinstance(e, NotHeldError):
                raise NotHeldError(lost_message(self.key, self.holder, e)) from None
            raise
        self._depth = max(0, self._depth - 1)
        others = COUNTS.gave(self.key, self.holder)
        if self._released_all(reply):
            await self._end()
        elif self._depth == 0 and others:
            await self._end(clean=False)
        elif self._depth == 0:
            await self._release_rest()

    async def _release_rest(self) -> None:
        warnings.warn(f"{self.key}: {self.holder} held more than this client took; released all",
                      RuntimeWarning, stacklevel=3)
        loop = asyncio.get_running_loop()
        for _ in range(64):
            try:
                reply = await self._send(lambda _: self._release_cmd(), "release", loop.time() + 1.0)
            except Exception:
                break
            if self._released_all(reply):
                await self._end()
                return
        await self._end(clean=False)

    async def _end(self, clean: bool = True) -> None:
        if self._depth:
            COUNTS.gave(self.key, self.holder, self._depth)
        self._depth = 0
        self._stopped = True
        if self._round is not None and self._round is not asyncio.current_task():
            async with self._watching:  # a round under way ends first
                pass
        await self._give_back(clean)

    async def _watch_once(self, gen: int) -> Optional[float]:
        """One round of the shared watcher: when the next is due (loop
        time), or None when this hold needs no more (or a later acquire
        watches it)."""
        if self._stopped or gen != self._gen:
            return None
        loop = asyncio.get_running_loop()
        async with self._watching:
            self._round = asyncio.current_task()
            try:
                if self._stopped:
                    return None
                if self._past_max_hold(loop.time()):
                    if loop.time() < self._lease_until:
                        return self._lease_until
                    await self._mark_lost()
                    return None
                try:
                    renewed = await self._look() if self._bound else await self.renew()
                except asyncio.CancelledError:
                    raise
                except Exception:  # noqa: BLE001 - the watcher must never die silently
                    renewed = False
                if not renewed and not self._stopped:
                    await self._mark_lost()
                    return None
                return None if self._stopped else loop.time() + self._interval()
            finally:
                self._round = None

    def _past_max_hold(self, now: float) -> bool:
        """Whether one more renewal would carry the lease past `max_hold`."""
        if self.max_hold is None:
            return False
        return now + self.ttl_ms / 1000.0 > self._held_since + self.max_hold

    async def renew(self) -> bool:
        """Resets the lease now (and rebinds `KEEP`); False when lost or
        never held (see `padlock.Lock.renew`)."""
        if self._depth == 0 or self.lost.is_set():
            return False
        start = asyncio.get_running_loop().time()
        for args in self._extend_cmds():
            cmd: list[Any] = args + ["KEEP"] if self.keep else args
            try:
                await self._send(lambda _: cmd, "renew", self._lease_until)
            except Exception as e:
                self._unsure = verdict(e, "renew") is not Verdict.LOST
                return False
        self._lease_until = start + self.ttl_ms / 1000.0
        return True

    async def stop_renewing(self) -> None:
        """Stops renewing this hold until the next fresh acquire (see
        `padlock.Lock.stop_renewing`)."""
        if self._depth == 0 or not self.renews:
            return
        self._resume = (self.renews, self.keep)
        self.renews = self.keep = False
        self._stopped = True
        async with self._watching:  # a round under way ends first
            if self._box[0] is None:
                return
            start = asyncio.get_running_loop().time()
            try:
                for args in self._extend_cmds():
                    cmd: list[Any] = args + ["KEEP"]
                    await self._send(lambda _: cmd, "renew", self._lease_until, wait=True)
            except Exception as e:
                if verdict(e, "renew") is Verdict.LOST:
                    await self._mark_lost()
                else:
                    await self._give_back(clean=False)
                return
            self._lease_until = start + self.ttl_ms / 1000.0
            await self._give_back()

    async def _look(self) -> bool:
        """The watcher's round while the server keeps the lease: a read, no
        write (see `padlock.Lock`)."""
        loop = asyncio.get_running_loop()
        start = loop.time()
        try:
            replies = [await self._call(cmd, max(0.05, self._lease_until - start))
                       for cmd in self._look_cmds()]
        except CONNECTION_ERRORS:
            return await self.renew()
        except redis.ResponseError as e:
            return False if str(e).startswith("WRONGTYPE") else await self.renew()
        left = self._lease_left(replies)
        if left is None:
            return False
        self._lease_until = start + left / 1000.0
        # A kept lease never has much less than two thirds of its ttl left
        # (the server renews it every third): less, and its binding is gone
        # (a connection the driver replaced on its own, as glide does).
        return await self.renew() if left < self.ttl_ms / 2 else True

    async def _mark_lost(self) -> None:
        if self._depth:
            COUNTS.gave(self.key, self.holder, self._depth)
        self._depth = 0
        self._stopped = True
        await self._give_back(clean=not self._unsure)
        self._unsure = False
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
        """True while the lease cannot have run out (see `padlock.Lock.held`)."""
        return (self._depth > 0 and not self.lost.is_set()
                and asyncio.get_running_loop().time() < self._lease_until)

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
        renew: bool = True,
        max_hold: Optional[float] = None,
        blocking_timeout: Optional[float] = None,
        on_lost: Optional[Callable[[_Hold], None]] = None,
        cancel_on_loss: bool = True,
    ) -> None:
        _Hold.__init__(self, client, key, holder, ttl, keep, on_lost, cancel_on_loss, renew, max_hold)
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
        renew: bool = True,
        max_hold: Optional[float] = None,
        blocking_timeout: Optional[float] = None,
        on_lost: Optional[Callable[[_Hold], None]] = None,
        cancel_on_loss: bool = True,
    ) -> None:
        _Hold.__init__(self, client, key, holder, ttl, keep, on_lost, cancel_on_loss, renew, max_hold)
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
        renew: bool = True,
        max_hold: Optional[float] = None,
        blocking_timeout: Optional[float] = None,
        on_lost: Optional[Callable[[_Hold], None]] = None,
        cancel_on_loss: bool = True,
    ) -> None:
        _Hold.__init__(self, client, keys[0], holder, ttl, keep, on_lost, cancel_on_loss,
                       renew, max_hold)
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
        _Hold.__init__(self, rw._client, rw.key, rw._own_holder, rw.ttl, rw.keep, rw.on_lost,
                       rw.cancel_on_loss, rw.renews, rw.max_hold)
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
        renew: bool = True,
        max_hold: Optional[float] = None,
        blocking_timeout: Optional[float] = None,
        on_lost: Optional[Callable[[_Hold], None]] = None,
        cancel_on_loss: bool = True,
    ) -> None:
        self._client, self.key, self.ttl = client, key, ttl
        self._own_holder = holder
        self.keep, self.on_lost, self.cancel_on_loss = keep, on_lost, cancel_on_loss
        self.renews, self.max_hold = renew, max_hold
        self.blocking_timeout = blocking_timeout
        self._read = RwHold(self, "READ")
        self._write = RwHold(self, "WRITE")

    @property
    def holder(self) -> str:
        """`holder=`, or the caller's context's (see `padlock.Lock`)."""
        return self._own_holder or current_holder()

    def read(self) -> RwHold:
        return self._read

    def write(self) -> RwHold:
        return self._write

    async def info(self) -> dict[str, Any]:
        return as_map(await self._client.execute_command("RWLOCK.INFO", self.key))


def glide(factory: Any, config: Any) -> Glide:
    """valkey-glide as the driver: `factory` is `glide.GlideClient` or
    `glide.GlideClusterClient`, `config` its configuration (addresses,
    credentials, TLS, ...). Pass the result where a `redis.asyncio` client
    goes: padlock makes the glide clients it needs from it (see `_glide`)."""
    return Glide(factory, config)


async def graph(client: Any) -> list[Edge]:
    """`LOCK.GRAPH` as data."""
    return parse_graph(await client.execute_command("LOCK.GRAPH"))


async def top(client: Any, count: int = 10) -> list[Hot]:
    """`LOCK.TOP`: the keys with the most waiters right now, most first
    (of one node; in a cluster, of each node you ask)."""
    return parse_top(await client.execute_command("LOCK.TOP", "COUNT", count))
