"""What the asyncio holds of an event loop share (as `_shared` for the
blocking ones): one watcher task for all of them, and per server two
connections: the keeper, which carries their commands and `KEEP`
bindings, and the mailman's, on which one task waits with `BLPOP` for the
outcomes of every wait (`MAILBOX`)."""

from __future__ import annotations

import asyncio
import logging
import os
import heapq
import itertools
import uuid
import weakref
from typing import Any, Awaitable, Callable, Optional, Protocol, Sequence

import redis
from redis.asyncio.cluster import RedisCluster

from ._glide import Glide as Driver
from ._common import mail_element, parse_outcome, taken_back, with_mailbox
from ._retry import CONNECTION_ERRORS

__all__ = ["Driver"]


class Watched(Protocol):
    async def _watch_once(self, gen: int) -> Optional[float]:
        """One round of the watching that started as `gen`: the loop time
        of the next one, or None to stop."""


class Scheduler:
    """One task per event loop for every hold's rounds, earliest first;
    holds are held weakly."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, "weakref.ref[Any]", int]] = []
        self._seq = itertools.count()
        # Set when a round is added while the task sleeps.
        self._waiter: Optional[asyncio.Future[None]] = None
        self._task: Optional[asyncio.Task[None]] = None

    def add(self, hold: Watched, at: float, gen: int) -> None:
        heapq.heappush(self._heap, (at, next(self._seq), weakref.ref(hold), gen))
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def tasks(self) -> int:
        return int(self._task is not None and not self._task.done())

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            while not self._heap or self._heap[0][0] > loop.time():
                wait = None if not self._heap else self._heap[0][0] - loop.time()
                # `asyncio.wait`, not `wait_for`: a cancellation (the loop
                # closing) must never be lost to a wake-up at the same time.
                self._waiter = loop.create_future()
                try:
                    await asyncio.wait([self._waiter], timeout=wait)
                finally:
                    self._waiter = None
            _, _, ref, gen = heapq.heappop(self._heap)
            hold = ref()
            if hold is None:
                continue
            try:
                nxt = await hold._watch_once(gen)
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - one hold's failure must not stop the others
                nxt = None
            if nxt is not None:
                heapq.heappush(self._heap, (nxt, next(self._seq), weakref.ref(hold), gen))
            del hold


_SCHEDULERS: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Scheduler]" = weakref.WeakKeyDictionary()


def scheduler() -> Scheduler:
    """The running loop's scheduler."""
    loop = asyncio.get_running_loop()
    s = _SCHEDULERS.get(loop)
    if s is None:
        s = _SCHEDULERS[loop] = Scheduler()
    return s


async def exchange(conn: Any, args: Sequence[Any]) -> Any:
    await conn.send_command(*args)
    return await conn.read_response()


class Keeper:
    """The connection one server's holds share on one loop (made for
    padlock, not taken from the application's pool). Calls are serialized;
    each waits for its reply at most its limit."""

    def __init__(self, make: Callable[[], Awaitable[Any]], identify: bool = False) -> None:
        self._make = make
        self._loop = asyncio.get_running_loop()
        # A driver that reconnects silently (glide): see `_shared.Keeper`.
        self._identify = identify
        self._id: Any = None
        self._conn: Any = None
        self.lock = asyncio.Lock()
        #: Bumped whenever the connection goes: bindings made on an earlier
        #: one are gone.
        self.epoch = 0
        #: The send time of the latest command answered on this epoch's
        #: connection: every binding on it was still there then.
        self.alive_at = float("-inf")

    async def call(self, args: Sequence[Any], limit: Optional[float]) -> tuple[Any, int]:
        """`args` on the shared connection, under its lock: the reply and
        the epoch it went out on."""
        # Shielded: a caller cancelled mid-call must not cut the exchange in
        # half (its reply would be read by the next call); it completes, and
        # the reply is dropped.
        return await asyncio.shield(self._locked(args, limit))

    async def _locked(self, args: Sequence[Any], limit: Optional[float]) -> tuple[Any, int]:
        async with self.lock:
            sent = self._loop.time()
            reply = await self._call(args, limit)
            if not self._identify:
                self.alive_at = max(self.alive_at, sent)
            return reply, self.epoch

    async def ping(self) -> None:
        """The liveness check of every binding on the connection (see
        `_shared.Keeper.ping`)."""
        if not self._identify:
            await self.call(["PING"], TIMEOUT)
            return
        async with self.lock:
            sent = self._loop.time()
            got = await self._call(["CLIENT", "ID"], TIMEOUT)
            if got != self._id:
                self.epoch += 1
                self.alive_at = float("-inf")
                self._id = got
            else:
                self.alive_at = max(self.alive_at, sent)

    async def _call(self, args: Sequence[Any], limit: Optional[float]) -> Any:
        if self._conn is None:
            self._conn = await self._make()
            self._id = None
        conn = self._conn
        try:
            if self._identify and self._id is None:
                self._id = await asyncio.wait_for(exchange(conn, ["CLIENT", "ID"]), limit)
            # The limit covers connecting too (a half-open peer never
            # answers the handshake). Not `read_response(timeout=...)`:
            # redis.asyncio answers None when that passes, which reads as
            # "not acquired".
            return await asyncio.wait_for(exchange(conn, args), limit)
        except asyncio.TimeoutError:
            await self._reset()
            raise redis.TimeoutError(f"no reply to {args[0]} within {limit} s") from None
        except CONNECTION_ERRORS:
            await self._reset()
            raise

    async def reset(self) -> None:
        """Closes the connection: every binding on it ends (the holds that
        still live see `epoch` move and bind again on their next round)."""
        async with self.lock:
            await self._reset()

    async def _reset(self) -> None:
        self.epoch += 1
        self.alive_at = float("-inf")
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.disconnect()

    def reset_soon(self) -> None:
        """`reset` from a finalizer, which may run on any thread: done on
        the keeper's own loop."""
        def reset() -> None:
            self.epoch += 1
            self.alive_at = float("-inf")
            conn, self._conn = self._conn, None
            if conn is not None:
                self._loop.create_task(conn.disconnect())

        try:
            self._loop.call_soon_threadsafe(reset)
        except RuntimeError:
            pass  # the loop is closed: its sockets close with it

    def connections(self) -> int:
        return int(self._conn is not None)


_KEEPERS: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, weakref.WeakKeyDictionary[Any, dict[str, Keeper]]]" = (
    weakref.WeakKeyDictionary())

#: The longest one command of a mailbox wait may take (seconds), and how
#: much longer than its BLOCK timeout its outcome may take to be mailed.
TIMEOUT = 5.0


class Slot:
    """One registered wait: its outcome once mailed."""

    def __init__(self) -> None:
        self.event = asyncio.Event()
        self.outcome: Optional[str] = None


class Mailman:
    """The connection one server's waits and kept holds share on one loop
    to hear from the server (see `_shared.Mailman`): one task `BLPOP`s the
    mailbox and hands each element to the wait (its outcome) or the hold
    (`-LOST`) whose request-id starts it; between two it pings the keeper,
    once per interval of the shortest-lived hold it watches."""

    POLL = 1.0

    def __init__(self, make: Callable[..., Awaitable[Any]], keeper: Keeper) -> None:
        self._make = make
        self.keeper = keeper
        self.mailbox = f"padlock:mailbox:{uuid.uuid4().hex}"
        self._slots: dict[str, Slot] = {}
        self._watched: "weakref.WeakValueDictionary[str, Any]" = weakref.WeakValueDictionary()
        self._task: Optional[asyncio.Task[None]] = None
        #: Bumped when the mailbox connection failed.
        self.epoch = 0
        self.poll = self.POLL
        #: The send time of the latest read that found the mailbox empty.
        self.clear_at = float("-inf")

    def register(self, rid: str) -> Slot:
        slot = self._slots[rid] = Slot()
        self._start()
        return slot

    def watch(self, rid: str, hold: Any, interval: float) -> None:
        """Hands a `-LOST` for `rid` to `hold._heard_lost`. The mailbox is
        read at least twice per `interval`: `fresh` then never lags a
        hold's round by more than one interval."""
        self._watched[rid] = hold
        self.poll = min(self.poll, max(interval / 2, 0.02))
        self._start()

    def unwatch(self, rids: Sequence[str]) -> None:
        for rid in rids:
            self._watched.pop(rid, None)

    def _start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    def forget(self, rid: str) -> None:
        self._slots.pop(rid, None)

    def fresh(self) -> float:
        """Since when the holds bound to the keeper with this mailbox are
        known to live (see `_shared.Mailman.fresh`)."""
        return min(self.keeper.alive_at, self.clear_at)

    def _deliver(self, element: Any) -> None:
        rid, outcome = mail_element(element)
        slot = self._slots.get(rid)
        if slot is not None:
            slot.outcome = outcome
            slot.event.set()
            return
        hold = self._watched.get(rid)
        if hold is not None and outcome.startswith("-LOST"):
            hold._heard_lost(outcome[1:])

    def connections(self) -> int:
        return int(self._task is not None and not self._task.done())

    async def _run(self) -> None:
        conn: Any = None
        try:
            loop = asyncio.get_running_loop()
            while self._slots or self._watched:
                try:
                    if conn is None:
                        conn = await self._make(socket_timeout=None)
                    poll = self.poll
                    sent = loop.time()
                    got = await asyncio.wait_for(
                        exchange(conn, ["BLPOP", self.mailbox, poll]), poll + TIMEOUT)
                    if not got:
                        # Timed out: empty until the server's timeout, which
                        # cannot come before `poll` after the send.
                        sent = min(sent + poll, loop.time())
                    elements = [got[1]] if got else []
                    while elements:
                        # A burst is read a hundred at a time, until a read
                        # finds the mailbox empty.
                        for element in elements:
                            self._deliver(element)
                        sent = loop.time()
                        elements = await asyncio.wait_for(
                            exchange(conn, ["LPOP", self.mailbox, 100]), TIMEOUT) or []
                    self.clear_at = max(self.clear_at, sent)
                    if self.keeper.alive_at < loop.time() - poll:
                        await self.keeper.ping()
                except (asyncio.CancelledError, GeneratorExit):
                    raise
                except Exception:  # noqa: BLE001 - the waits are told, and sent again
                    if conn is not None:
                        await conn.disconnect()
                        conn = None
                    self.epoch += 1
                    for slot in list(self._slots.values()):
                        slot.event.set()
                    await asyncio.sleep(0.05)
        finally:
            if conn is not None:
                await conn.disconnect()


_MAILMEN: "weakref.WeakKeyDictionary[Keeper, Mailman]" = weakref.WeakKeyDictionary()


def mailman(k: Keeper, make: Callable[..., Awaitable[Any]]) -> Mailman:
    m = _MAILMEN.get(k)
    if m is None:
        m = _MAILMEN[k] = Mailman(make, k)
    return m




def _is_waiting(reply: Any) -> bool:
    return reply in (b"WAITING", "WAITING")


async def mail_wait(k: Keeper, m: Mailman, args: list[Any],
                    give_back: Optional[Sequence[Any]]) -> tuple[Any, Optional[int]]:
    """A wait through the mailbox (see `_shared.mail_wait`): queued on the
    keeper, its outcome mailed; a connection replaced meanwhile is a
    connection error (sent again with the same id), and a wait cancelled
    on this side is taken back (`LOCK.CANCEL`, a racing grant released)."""
    loop = asyncio.get_running_loop()
    rid = args[args.index("ID") + 1]
    args, ms = with_mailbox(args, m.mailbox)
    slot = m.register(rid)
    try:
        epochs = (k.epoch, m.epoch)
        reply, sent_on = await k.call(args, TIMEOUT)
        if not _is_waiting(reply):
            return reply, sent_on
        end = None if ms == 0 else loop.time() + ms / 1000.0 + TIMEOUT
        while True:
            left = None if end is None else end - loop.time()
            if left is not None and left <= 0:
                raise redis.TimeoutError(f"no outcome of {args[0]} within {ms} ms")
            try:
                await asyncio.wait_for(slot.event.wait(), Mailman.POLL if left is None else min(left, Mailman.POLL))
            except asyncio.TimeoutError:
                pass
            if slot.outcome is not None:
                return parse_outcome(slot.outcome), None
            if (k.epoch, m.epoch) != epochs or sent_on != k.epoch:
                raise redis.ConnectionError("a mailbox wait's connection was replaced")
            slot.event.clear()
    except asyncio.CancelledError as e:
        if give_back is not None:
            # Shielded: the caller's cancellation must not cut the take-back.
            await asyncio.shield(_take_back(k, args, rid, give_back))
            e.padlock_taken_back = True  # type: ignore[attr-defined]
        raise
    finally:
        m.forget(rid)


async def take_back(k: Keeper, args: Sequence[Any], give_back: Sequence[Any], e: BaseException) -> None:
    """An acquire cancelled after its wait was sent (see `_shared.take_back`)."""
    if getattr(e, "padlock_taken_back", False) or "ID" not in args:
        return
    await asyncio.shield(_take_back(k, list(args), str(args[list(args).index("ID") + 1]), give_back))


async def _take_back(k: Keeper, args: list[Any], rid: str, give_back: Sequence[Any]) -> None:
    key, holder, probe = taken_back(args)
    try:
        if (await k.call(["LOCK.CANCEL", key, holder, rid], TIMEOUT))[0] == 1:
            return
        got = (await k.call(probe, TIMEOUT))[0]
        if got is not None and not _is_waiting(got):
            await k.call(list(give_back), TIMEOUT)
    except Exception:  # noqa: BLE001 - the lease runs out on its own
        logging.getLogger("padlock").warning("could not take back a cancelled wait on %s", key)


def _after_fork_in_child() -> None:
    """A forked child keeps none of its parent's loops' keepers or
    watchers (it runs loops of its own)."""
    _KEEPERS.clear()
    _SCHEDULERS.clear()
    _MAILMEN.clear()


os.register_at_fork(after_in_child=lambda: _after_fork_in_child())


def keeper(owner: Any, node: str, make: Callable[[], Awaitable[Any]]) -> Keeper:
    """The keeper of `owner` (a client) for `node` on the running loop."""
    per_loop = _KEEPERS.setdefault(asyncio.get_running_loop(), weakref.WeakKeyDictionary())
    nodes = per_loop.setdefault(owner, {})
    k = nodes.get(node)
    if k is None:
        k = nodes[node] = Keeper(make, isinstance(owner, Driver))
    return k


def keeper_connections() -> int:
    """Keeper connections open on the running loop."""
    per_loop = _KEEPERS.get(asyncio.get_running_loop())
    if per_loop is None:
        return 0
    return sum(k.connections() for nodes in per_loop.values() for k in nodes.values())


# -- what `aio.py` runs on (`sync.py`, generated from it, on `_shared`) -----------

#: How long a server-side wait may take at most on the wire (BLOCK 0).
FOREVER: Optional[float] = 365 * 24 * 3600.0

Event = asyncio.Event
Lock = asyncio.Lock
sleep = asyncio.sleep
current = asyncio.current_task
Cancelled = asyncio.CancelledError


def now() -> float:
    return asyncio.get_running_loop().time()


def node(client: Any, key: str) -> Any:
    """The client to read `key` through: the application's own (a cluster
    client routes by the key)."""
    return client


class Source:
    """Where a hold's connections come from: made like the client's own
    (its pool's settings, or for a cluster those of the node that serves
    the key), never taken from the application's pool."""

    def __init__(self, client: Any, key: str) -> None:
        self.client, self.key = client, key
        self.node: Any = None
        self.glide = client if isinstance(client, Driver) else None
        self.pool = None if isinstance(client, (RedisCluster, Driver)) else client.connection_pool
        # In a cluster a mailbox must share the slot of the request's key,
        # and one connection waits on one slot's: waits there hold a
        # connection each. So do waits on a server without `MAILBOX`.
        self.mailbox = self.pool is not None or (self.glide is not None and not self.glide.cluster)

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
        _, _, name = await self._where()
        return keeper(self.client, name, self.make)

    async def mailman(self) -> Optional[Mailman]:
        """The mailman of the key's server, when waits and losses go
        through a mailbox there."""
        return mailman(await self.keeper(), self.make) if self.mailbox else None

    def no_mailbox(self, e: Exception) -> bool:
        """Whether `e` says the server has no `MAILBOX` (an older build of
        the module): from then on, this source does without."""
        if self.mailbox and ("MAILBOX" in str(e) or "syntax" in str(e)):
            self.mailbox = False
            return True
        return False

    async def wait(self, args: Sequence[Any], limit: Optional[float],
                   give_back: Optional[Sequence[Any]] = None) -> tuple[Any, Optional[int]]:
        """One server-side wait: queued through the keeper with `MAILBOX`
        and its outcome heard on the mailman's connection; or, without a
        mailbox, on a connection made for it (no socket timeout: `limit`
        bounds it), closed after it."""
        if self.mailbox and "ID" in args and "BLOCK" in args:
            k = await self.keeper()
            try:
                return await mail_wait(k, mailman(k, self.make), list(args), give_back)
            except redis.ResponseError as e:
                if not self.no_mailbox(e):
                    raise
        conn = await self.make(socket_timeout=None)
        try:
            return await asyncio.wait_for(exchange(conn, args), limit), None
        except asyncio.TimeoutError:
            raise redis.TimeoutError(f"no reply to {args[0]} within {limit} s") from None
        finally:
            await conn.disconnect()


def collected(box: list[Any]) -> None:
    """A hold collected without `release()` (on any thread): if the server
    keeps its lease, the shared connection is replaced so that the binding
    ends (the holds that live bind again on their next round)."""
    kept, box[0] = box[0], None
    if kept is not None:
        kept.reset_soon()


def call_lost(on_lost: Callable[[Any], None], hold: Any) -> None:
    """`on_lost(hold)`, on the loop (it must not block); one that raises
    is logged with its traceback (logger `padlock`), and the watching goes
    on."""
    try:
        on_lost(hold)
    except Exception:  # noqa: BLE001 - reported, never swallowed silently
        logging.getLogger("padlock").exception("on_lost callback of %s raised", getattr(hold, "key", hold))
