"""What the asyncio holds of an event loop share (as `_thread_runtime` for the
blocking ones): one watcher task for all of them, and per server two
connections: the keeper, which carries their commands and `KEEP`
bindings, and the mailman's, on which one task waits with `BLMPOP` for the
outcomes of every wait (`MAILBOX`)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import heapq
import itertools
import weakref
from typing import Any, AsyncIterator, Awaitable, Callable, Optional, Protocol, Sequence

import redis

from ._glide import Glide as Driver
from ._common import live_rounds
from ._retry import CONNECTION_ERRORS
from ._wire import put_async

__all__ = ["Driver"]


class Watched(Protocol):
    def _watches(self, gen: int) -> bool:
        """Whether the rounds added as `gen` are still this hold's."""

    async def _watch_once(self, gen: int) -> Optional[float]:
        """One round of the watching that started as `gen`: the loop time
        of the next one, or None to stop."""


class Scheduler:
    """One task per event loop for every hold's rounds, earliest first;
    holds are held weakly."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, "weakref.ref[Any]", int]] = []
        self._seq = itertools.count()
        # The heap's size at which the rounds of holds released since are
        # dropped (twice what was left last time: O(1) per round added).
        self._purge_at = 64
        #: How often the watcher woke up to look at the heap (for tests).
        self.wakes = 0
        # Set when a round is added while the task sleeps.
        self._waiter: Optional[asyncio.Future[None]] = None
        self._task: Optional[asyncio.Task[None]] = None

    def add(self, hold: Watched, at: float, gen: int) -> None:
        seq = next(self._seq)
        heapq.heappush(self._heap, (at, seq, weakref.ref(hold), gen))
        if len(self._heap) >= self._purge_at:
            self._purge()
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())
        # Only a round earlier than every other moves the time the task
        # sleeps until: one acquire costs the loop no wake-up.
        if self._heap[0][1] == seq and self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def _purge(self) -> None:
        self._heap = live_rounds(self._heap)
        self._purge_at = max(64, 2 * len(self._heap))

    def rounds(self) -> int:
        """Rounds waiting in the heap, released holds' included until purged."""
        return len(self._heap)

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
                    self.wakes += 1
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
    await put_async(conn, args)
    return await conn.read_response()


if sys.version_info >= (3, 11):
    async def within(aw: Awaitable[Any], limit: Optional[float]) -> Any:
        """`aw` within `limit` seconds (None: no end), else TimeoutError.
        `asyncio.timeout` runs it in the caller's task, where `wait_for`
        (before 3.12) makes a task of its own: two loop turns more on
        every command."""
        if limit is None:
            return await aw
        async with asyncio.timeout(limit):
            return await aw
else:
    async def within(aw: Awaitable[Any], limit: Optional[float]) -> Any:
        return await asyncio.wait_for(aw, limit)


class Keeper:
    """The connection one server's holds share on one loop (made for
    padlock, not taken from the application's pool). Calls are serialized;
    each waits for its reply at most its limit."""

    def __init__(self, make: Callable[[], Awaitable[Any]], identify: bool = False) -> None:
        self._make = make
        self._loop = asyncio.get_running_loop()
        # A driver that reconnects silently (glide): see `_thread_runtime.Keeper`.
        self._identify = identify
        self._id: Any = None
        self._conn: Any = None
        self.lock = asyncio.Lock()
        # Where the command under way is ("sending", "owed": its reply not
        # yet read), for a caller cancelled mid-exchange.
        self._stage: Optional[str] = None
        # The one timer of `_timed`: the deadline (loop time) and task of the
        # command under way, and whether the timer cancelled it.
        self._deadline: Optional[float] = None
        self._timed_task: "Optional[asyncio.Task[Any]]" = None
        self._dog: Optional[asyncio.TimerHandle] = None
        self._expired = False
        # Calls under way or waiting for the lock, and anything else that
        # holds it (`_owning`).
        self._busy = 0
        #: Bumped whenever the connection goes: bindings made on an earlier
        #: one are gone.
        self.epoch = 0
        #: The send time of the latest command answered on this epoch's
        #: connection: every binding on it was still there then.
        self.alive_at = float("-inf")

    async def call(self, args: Sequence[Any], limit: Optional[float]) -> tuple[Any, int]:
        """`args` on the shared connection, under its lock: the reply and
        the epoch it went out on.

        A caller cancelled mid-call never cuts the exchange in half (its
        reply would be read by the next call), and a command queued behind
        another still goes out if its caller is cancelled meanwhile (a
        release must not be lost to it): such a command runs in a shielded
        task of its own. When the keeper is idle the command runs in the
        caller's task instead (the task would cost the loop two turns, a
        third of an uncontended acquire); if that caller is cancelled once
        its command is out, a task reads the reply (dropped) and then frees
        the lock. A cancellation while the command was going out (the
        transport full) closes the connection: half a command cannot be
        finished."""
        self._busy += 1
        if self._busy > 1:
            return await asyncio.shield(self._loop.create_task(self._queued(args, limit)))
        # Idle: the lock is free and nobody waits for it (every holder of it
        # counts in `_busy`), so this takes it at once.
        await self.lock.acquire()
        handed = False
        try:
            return await self._run(args, limit)
        except asyncio.CancelledError:
            if self._stage is not None:
                handed = True
                self._loop.create_task(self._settle(self._stage, self._conn, limit))
            raise
        finally:
            self._stage = None
            if not handed:
                self.lock.release()
                self._busy -= 1

    async def _queued(self, args: Sequence[Any], limit: Optional[float]) -> tuple[Any, int]:
        try:
            async with self.lock:
                return await self._run(args, limit)
        finally:
            self._stage = None
            self._busy -= 1

    async def _run(self, args: Sequence[Any], limit: Optional[float]) -> tuple[Any, int]:
        sent = self._loop.time()
        reply = await self._call(args, limit)
        if not self._identify:
            self.alive_at = max(self.alive_at, sent)
        return reply, self.epoch

    @contextlib.asynccontextmanager
    async def _owning(self) -> AsyncIterator[None]:
        """The lock, counted in `_busy` (a call meanwhile queues behind)."""
        self._busy += 1
        try:
            async with self.lock:
                yield
        finally:
            self._busy -= 1

    async def _settle(self, stage: str, conn: Any, limit: Optional[float]) -> None:
        """After a caller was cancelled mid-exchange (`stage`): the reply it
        left is read and dropped, or the connection closed; then the lock
        is free."""
        try:
            if conn is None or conn is not self._conn:
                return
            if stage == "owed":
                try:
                    await within(conn.read_response(disconnect_on_error=False), limit)
                    return
                except redis.ResponseError:
                    return
                except BaseException:  # noqa: BLE001 - any failure: the connection goes
                    pass
            await self._reset()
        finally:
            self.lock.release()
            self._busy -= 1

    async def ping(self) -> None:
        """The liveness check of every binding on the connection (see
        `_thread_runtime.Keeper.ping`)."""
        if not self._identify:
            await self.call(["PING"], TIMEOUT)
            return
        async with self._owning():
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
                self._id = await within(exchange(conn, ["CLIENT", "ID"]), limit)
            if self._identify:
                # glide: each command is a request of its own on a
                # multiplexed connection; one abandoned leaves nothing
                # behind.
                return await within(exchange(conn, args), limit)
            # The limit covers connecting too (a half-open peer never
            # answers the handshake). Not `read_response(timeout=...)`:
            # redis.asyncio answers None when that passes, which reads as
            # "not acquired".
            return await self._timed(conn, args, limit)
        except asyncio.TimeoutError:
            await self._reset()
            raise redis.TimeoutError(f"no reply to {args[0]} within {limit} s") from None
        except CONNECTION_ERRORS:
            await self._reset()
            raise

    async def _timed(self, conn: Any, args: Sequence[Any], limit: Optional[float]) -> Any:
        """One exchange on a redis-py connection within `limit`, its stage
        kept for `call`: the parser keeps a partly read reply, so a read
        cut short is taken up again (`disconnect_on_error=False`: redis-py
        would close the connection, and every binding on it, on a
        cancelled read).

        The limit is kept as `within` would, but on the keeper's one timer:
        a timer armed and cancelled per command (`asyncio.timeout`) costs
        an uncontended acquire + release a tenth of its time. When it
        fires, it cancels the command's task only if that command's
        deadline has passed, else sleeps on until the deadline of the one
        under way (and none when no command is)."""
        task = asyncio.current_task()
        assert task is not None
        cancelling = task.cancelling() if sys.version_info >= (3, 11) else 0
        if limit is not None:
            self._deadline, self._timed_task = self._loop.time() + limit, task
            if self._dog is None or self._dog.when() > self._deadline:
                # Armed later than this deadline (a longer limit before):
                # brought forward. Deadlines mostly move on with time, so
                # this is rare.
                if self._dog is not None:
                    self._dog.cancel()
                self._dog = self._loop.call_at(self._deadline, self._bark)
        try:
            self._stage = "sending"
            await put_async(conn, args)
            self._stage = "owed"
            reply = await conn.read_response(disconnect_on_error=False)
            self._stage = None
            return reply
        except asyncio.CancelledError:
            if not self._expired:
                raise
            self._expired = False
            # Cancelled by `_bark` (and by nobody else): a timeout.
            if sys.version_info < (3, 11) or task.uncancel() <= cancelling:
                raise asyncio.TimeoutError from None
            raise
        finally:
            self._deadline, self._timed_task = None, None

    def _bark(self) -> None:
        self._dog = None
        if self._deadline is None or self._timed_task is None:
            return
        if self._loop.time() < self._deadline:
            self._dog = self._loop.call_at(self._deadline, self._bark)
            return
        self._expired = True
        self._timed_task.cancel()

    async def reset(self) -> None:
        """Closes the connection: every binding on it ends (the holds that
        still live see `epoch` move and bind again on their next round)."""
        async with self._owning():
            await self._reset()

    async def _reset(self) -> None:
        self._stage = None
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


def _after_fork_in_child() -> None:
    """A forked child keeps none of its parent's loops' keepers or
    watchers (it runs loops of its own)."""
    _KEEPERS.clear()
    _SCHEDULERS.clear()


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


# -- what `aio.py` runs on (`sync.py`, generated from it, on `_thread_runtime`) -----------

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
