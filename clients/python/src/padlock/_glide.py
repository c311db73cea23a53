"""valkey-glide as the driver: `padlock.aio.glide(GlideClient, config)` (the
`valkey-glide` package, asyncio) and `padlock.glide(GlideClient, config)`
(`valkey-glide-sync`, blocking), each with `GlideClusterClient` too, stand
where a redis-py client would.

padlock makes the glide clients it needs from your configuration, each
driven as the redis-py connection the classes use (`send_command`,
`read_response`, `disconnect`, and for the blocking ones `can_read` and a
`connection_pool` to make them from): one shared, and the mailbox's (or,
where there is no mailbox, one per wait while it waits). They speak RESP2
and take glide's longest request timeout (glide's own, 250 ms by default,
would abandon server-side waits): padlock times every call itself. On a
cluster padlock goes node by node (`node`, `_glide_nodes`): a standalone
client per primary, and a redis-py tracking connection beside it; the
cluster client itself only routes one-off commands by their (first) key
and fetches the slot map. Glide's Python `close()` closes the socket at once,
which drops a server-side wait (its Node client does not: see the
TypeScript client's `glide.ts`)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
import queue
import threading
import weakref
from typing import Any, Callable, Optional, Sequence

import redis

from ._glide_nodes import SlotMap, TrackingPool, async_tracking, node_config, tracking_kwargs
from ._slots import key_slot

#: glide's longest request timeout (ms, a signed 32-bit int).
LONGEST_MS = 2**31 - 1


def _route_key(args: Sequence[Any]) -> Optional[Any]:
    """The key a command routes by: after `numkeys` for the multi-key
    commands, the first argument otherwise."""
    name = str(args[0]).upper() if args else ""
    at = 2 if name in ("LOCK.MACQUIRE", "LOCK.MRELEASE") else 1
    return args[at] if len(args) > at else None


class _Driver:
    """A glide client class and its configuration: how padlock's own glide
    clients are made, and how a command is put to one."""

    def __init__(self, factory: Any, config: Any) -> None:
        import glide_shared

        self.factory = factory
        self.cluster = factory.__name__ == "GlideClusterClient"
        self._g = glide_shared
        cfg = copy.copy(config)
        cfg.protocol = glide_shared.ProtocolVersion.RESP2
        cfg.request_timeout = LONGEST_MS
        self.config = cfg
        #: In a cluster: the slot map, the drivers of its nodes, and the
        #: tracking connection's settings (None: none can be made).
        self.slots = SlotMap()
        self.nodes: dict[tuple[str, int], Any] = {}
        self.tracking = tracking_kwargs(cfg) if self.cluster else None
        #: A node's driver: the cluster's, whose slot map a `MOVED` stales.
        self.parent: Optional[_Driver] = None
        #: A node's tracking connection: its pool (blocking) or maker (asyncio).
        self.tracking_pool: Any = None
        self.tracking_make: Any = None

    def tracks(self) -> bool:
        """Whether a cluster's waits and losses can go through mailboxes
        (a tracking connection per node can be made)."""
        return self.cluster and self.tracking is not None

    def _seed(self) -> str:
        return str(self.config.addresses[0].host)

    def _cached(self, key: Any) -> Optional[tuple[str, int]]:
        """The primary serving `key`'s slot, if the slot map is fresh."""
        return None if self.slots.stale() else self.slots.find(key_slot(key))

    def _loaded(self, reply: Any, key: Any) -> tuple[str, int]:
        """`CLUSTER SLOTS`' reply taken as the slot map: `key`'s primary."""
        self.slots.load(reply, self._seed())
        where = self.slots.find(key_slot(key))
        if where is None:
            raise redis.ResponseError(f"CLUSTERDOWN no node serves slot {key_slot(key)}")
        return where

    def _node_at(self, where: tuple[str, int], factory: Any) -> Any:
        """The driver of the primary at `where` (made once): a standalone
        glide client, and its tracking connection's settings."""
        d = self.nodes.get(where)
        if d is None:
            d = self.nodes[where] = type(self)(factory, node_config(self.config, *where, self._g))
            d.parent = self
            assert self.tracking is not None
            d.tracking_pool = TrackingPool(*where, self.tracking)
            d.tracking_make = async_tracking(*where, self.tracking)
        return d

    def command(self, args: Sequence[Any]) -> tuple[list[Any], tuple[Any, ...]]:
        """The command's arguments as glide takes them, and its route (in a
        cluster: the primary of its key's slot)."""
        cmd = [a if isinstance(a, (bytes, str)) else str(a) for a in args]
        key = _route_key(args)
        if not self.cluster or key is None:
            return cmd, ()
        g = self._g
        name = key if isinstance(key, str) else bytes(key).decode()
        return cmd, (g.SlotKeyRoute(g.SlotType.PRIMARY, name),)

    def error(self, e: Exception) -> Exception:
        """glide's error as redis-py's (what the rest of padlock reads)."""
        g = self._g
        if isinstance(e, g.TimeoutError):
            return redis.TimeoutError(str(e))
        if isinstance(e, (g.ConnectionError, g.ClosingError)):
            return redis.ConnectionError(str(e))
        if isinstance(e, g.RequestError):
            if self.parent is not None and "MOVED" in str(e):
                self.parent.slots.forget()
            return redis.ResponseError(str(e))
        return e


class Glide(_Driver):
    """For the asyncio classes and `padlock.aio.graph`/`top`."""

    def __init__(self, factory: Any, config: Any) -> None:
        super().__init__(factory, config)
        self._fetch_locks: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock]" = (
            weakref.WeakKeyDictionary())

    async def run(self, client: Any, args: Sequence[Any]) -> Any:
        cmd, route = self.command(args)
        try:
            return await client.custom_command(cmd, *route)
        except Exception as e:
            raise self.error(e) from None

    def connection(self) -> "GlideConnection":
        return GlideConnection(self)

    async def node(self, key: Any) -> "Glide":
        """The driver of the primary that serves `key` (a cluster's). One
        task per loop fetches the slot map; the others wait for it (ten
        thousand tasks starting at once open one client, not ten
        thousand)."""
        import glide

        where = self._cached(key)
        if where is None:
            loop = asyncio.get_running_loop()
            lock = self._fetch_locks.setdefault(loop, asyncio.Lock())
            async with lock:
                where = self._cached(key) or self._loaded(await self.execute_command("CLUSTER", "SLOTS"), key)
        return self._node_at(where, glide.GlideClient)  # type: ignore[no-any-return]

    async def execute_command(self, *args: Any) -> Any:
        """A one-off command (`info`, `graph`, ...) on a client of its own."""
        conn = self.connection()
        try:
            await conn.send_command(*args)
            return await conn.read_response()
        finally:
            await conn.disconnect()

    async def exists(self, *keys: Any) -> int:
        return sum([int(await self.execute_command("EXISTS", k)) for k in keys])


class GlideConnection:
    """One asyncio glide client, driven as a redis-py connection."""

    def __init__(self, owner: Glide) -> None:
        self._owner = owner
        self._client: Any = None
        self._args: Sequence[Any] = ()

    async def send_command(self, *args: Any) -> None:
        if self._client is None:
            self._client = await self._owner.factory.create(self._owner.config)
        self._args = args

    async def read_response(self) -> Any:
        return await self._owner.run(self._client, self._args)

    async def disconnect(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            try:
                await client.close()
            except Exception:  # noqa: BLE001 - closing an already failed client
                pass


class GlideSync(_Driver):
    """For the blocking classes and `padlock.graph`/`top`: its
    `connection_pool` makes padlock's glide clients."""

    def __init__(self, factory: Any, config: Any) -> None:
        super().__init__(factory, config)
        self.connection_pool = _Pool(self)
        self._nodes_lock = threading.Lock()

    def node(self, key: Any) -> "GlideSync":
        """The driver of the primary that serves `key` (a cluster's)."""
        import glide_sync

        with self._nodes_lock:
            where = self._cached(key) or self._loaded(self.execute_command("CLUSTER", "SLOTS"), key)
            return self._node_at(where, glide_sync.GlideClient)  # type: ignore[no-any-return]

    def execute_command(self, *args: Any) -> Any:
        conn = GlideSyncConnection(self)
        try:
            conn.send_command(*args)
            return conn.read_response()
        finally:
            conn.disconnect()

    def exists(self, *keys: Any) -> int:
        return sum(int(self.execute_command("EXISTS", k)) for k in keys)


class _Pool:
    """What the blocking classes read of a redis-py pool."""

    def __init__(self, owner: GlideSync) -> None:
        self.connection_kwargs: dict[str, Any] = {}
        self._owner = owner

    def connection_class(self, **_: Any) -> "GlideSyncConnection":
        # padlock bounds every call itself (`can_read`): socket timeouts
        # mean nothing here.
        return GlideSyncConnection(self._owner)


_Call = tuple[Callable[[], Any], "concurrent.futures.Future[Any]"]


class _Worker:
    """A daemon thread that runs one connection's calls in turn. Not a
    ThreadPoolExecutor: Python joins an executor's threads at exit, so one
    call stuck on a server that went away (glide-sync's calls have no limit
    of their own) kept the whole process from exiting."""

    def __init__(self) -> None:
        self._calls: queue.SimpleQueue[Optional[_Call]] = queue.SimpleQueue()
        threading.Thread(target=self._run, name="padlock-glide", daemon=True).start()

    def submit(self, fn: Callable[..., Any], *args: Any) -> concurrent.futures.Future[Any]:
        reply: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._calls.put((lambda: fn(*args), reply))
        return reply

    def shutdown(self) -> None:
        """The thread ends after the call it is in, if any."""
        self._calls.put(None)

    def _run(self) -> None:
        while (call := self._calls.get()) is not None:
            fn, reply = call
            if not reply.set_running_or_notify_cancel():
                continue
            try:
                reply.set_result(fn())
            except BaseException as e:  # noqa: BLE001 - the caller's to see, as an executor does
                reply.set_exception(e)


class GlideSyncConnection:
    """One blocking glide client, driven as a redis-py connection: its
    command runs on a thread of its own, so that `can_read(timeout)` can
    wait for the reply a bounded time (glide-sync's calls have no limit of
    their own)."""

    def __init__(self, owner: GlideSync) -> None:
        self._owner = owner
        self._client: Any = None
        self._reply: Optional[concurrent.futures.Future[Any]] = None
        self._thread: Optional[_Worker] = None

    def send_command(self, *args: Any) -> None:
        o = self._owner
        if self._client is None:
            self._client = o.factory.create(o.config)
            self._thread = _Worker()
        cmd, route = o.command(args)
        assert self._thread is not None
        self._reply = self._thread.submit(self._client.custom_command, cmd, *route)

    def can_read(self, timeout: Optional[float] = 0) -> bool:
        if self._reply is None:
            return False
        concurrent.futures.wait([self._reply], timeout)
        return self._reply.done()

    def read_response(self) -> Any:
        reply, self._reply = self._reply, None
        if reply is None:
            raise redis.ConnectionError("nothing sent")
        try:
            return reply.result()
        except Exception as e:
            raise self._owner.error(e) from None

    def disconnect(self) -> None:
        client, self._client = self._client, None
        thread, self._thread = self._thread, None
        if client is not None:
            try:
                client.close()
            except Exception:  # noqa: BLE001 - closing an already failed client
                pass
        if thread is not None:
            thread.shutdown()
