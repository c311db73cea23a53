"""Waits and losses heard through a mailbox, for the asyncio holds of an
event loop (see `_thread_mail`, the blocking twin): one task per server
`BLMPOP`s the mailbox and hands each outcome to its wait, each `-LOST` to
its hold; `Source` says where a hold's waits go; a cancelled wait is taken
back with `LOCK.CANCEL`."""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
import weakref
from typing import Any, Awaitable, Callable, Optional, Sequence

import redis
from redis.asyncio.cluster import RedisCluster

from ._common import DRAIN, mail_element, parse_outcome, popped, taken_back, with_mailbox
from ._asyncio_runtime import TIMEOUT, Driver, Keeper, exchange, keeper, within
from ._slots import INVALIDATE, invalidated, is_pong, request_key, slot_box


class Slot:
    """One registered wait: its outcome once mailed."""

    def __init__(self) -> None:
        self.event = asyncio.Event()
        self.outcome: Optional[str] = None


class Mailman:
    """The connection one server's waits and kept holds share on one loop
    to hear from the server (see `_thread_mail.Mailman`): one task `BLMPOP`s the
    mailbox and hands each element to the wait (its outcome) or the hold
    (`-LOST`) whose request-id starts it; between two it pings the keeper,
    once per interval of the shortest-lived hold it watches."""

    POLL = 1.0

    def __init__(self, make: Callable[..., Awaitable[Any]], keeper: Keeper, cluster: bool = False) -> None:
        self._make = make
        self.keeper = keeper
        self.mailbox = f"padlock:mailbox:{uuid.uuid4().hex}"
        #: In a cluster, a mailbox per slot heard of through tracking (see
        #: `_thread_mail.Mailman._hear`): those named, the latest PING's time.
        self.cluster = cluster
        self._boxes: set[str] = set()
        self._pinged = float("-inf")
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

    def box(self, key: Any) -> str:
        """The mailbox for a request on `key`: the process's, or in a
        cluster that of the key's slot."""
        if not self.cluster:
            return self.mailbox
        name = slot_box(self.mailbox + ":", key)
        self._boxes.add(name)
        return name

    def fresh(self) -> float:
        """Since when the holds bound to the keeper with this mailbox are
        known to live (see `_thread_mail.Mailman.fresh`)."""
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
                        conn = await self._make(socket_timeout=None, protocol=2)
                        if self.cluster:
                            await self._subscribe(conn)
                    poll = self.poll
                    if self.cluster:
                        await self._hear(conn, poll)
                        continue
                    # Up to DRAIN at a time: fewer means the mailbox is
                    # empty now, so a burst needs no extra read.
                    command: list[Any] = ["BLMPOP", poll, 1, self.mailbox, "LEFT", "COUNT", DRAIN]
                    while True:
                        sent = loop.time()
                        got = await asyncio.wait_for(exchange(conn, command), poll + TIMEOUT)
                        if not got and command[0] == "BLMPOP":
                            # Timed out: empty until the server's timeout,
                            # which cannot come before `poll` after the send.
                            sent = min(sent + poll, loop.time())
                        elements = popped(got)
                        for element in elements:
                            self._deliver(element)
                        if len(elements) < DRAIN:
                            break
                        command = ["LMPOP", 1, self.mailbox, "LEFT", "COUNT", DRAIN]
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

    # -- in a cluster (see `_thread_mail.Mailman`'s twins) ----------------------

    async def _subscribe(self, conn: Any) -> None:
        cid = await within(exchange(conn, ["CLIENT", "ID"]), TIMEOUT)
        await within(exchange(conn, ["CLIENT", "TRACKING", "ON", "REDIRECT", cid, "BCAST",
                                     "PREFIX", self.mailbox + ":"]), TIMEOUT)
        sent = asyncio.get_running_loop().time()
        await within(exchange(conn, ["SUBSCRIBE", INVALIDATE]), TIMEOUT)
        for box in list(self._boxes):
            await self._drain(box)
        self.clear_at = max(self.clear_at, sent)
        self._pinged = sent

    async def _hear(self, conn: Any, poll: float) -> None:
        loop = asyncio.get_running_loop()
        wait = self._pinged + poll - loop.time()
        if wait > 0:
            message = await conn.read_response(timeout=wait)
            if message is not None:
                await self._notice(message)
            return
        sent = loop.time()
        await conn.send_command("PING")
        while True:
            message = await within(conn.read_response(), TIMEOUT)
            if is_pong(message):
                break
            await self._notice(message)
        self.clear_at = max(self.clear_at, self._pinged)
        self._pinged = sent
        if self.keeper.alive_at < loop.time() - poll:
            await self.keeper.ping()

    async def _notice(self, message: Any) -> None:
        keys = invalidated(message)
        for box in list(self._boxes) if keys is None else [k for k in keys if k in self._boxes]:
            await self._drain(box)

    async def _drain(self, box: str) -> None:
        while True:
            reply, _ = await self.keeper.call(["LMPOP", 1, box, "LEFT", "COUNT", DRAIN], TIMEOUT)
            elements = popped(reply)
            for element in elements:
                self._deliver(element)
            if len(elements) < DRAIN:
                return


_MAILMEN: "weakref.WeakKeyDictionary[Keeper, Mailman]" = weakref.WeakKeyDictionary()
os.register_at_fork(after_in_child=_MAILMEN.clear)  # see `_asyncio_runtime`


def mailman(k: Keeper, make: Callable[..., Awaitable[Any]], cluster: bool = False) -> Mailman:
    m = _MAILMEN.get(k)
    if m is None:
        m = _MAILMEN[k] = Mailman(make, k, cluster)
    return m


def _is_waiting(reply: Any) -> bool:
    return reply in (b"WAITING", "WAITING")


async def mail_wait(k: Keeper, m: Mailman, args: list[Any],
                    give_back: Optional[Sequence[Any]]) -> tuple[Any, Optional[int]]:
    """A wait through the mailbox (see `_thread_mail.mail_wait`): queued on the
    keeper, its outcome mailed; a connection replaced meanwhile is a
    connection error (sent again with the same id), and a wait cancelled
    on this side is taken back (`LOCK.CANCEL`, a racing grant released)."""
    loop = asyncio.get_running_loop()
    rid = args[args.index("ID") + 1]
    args, ms = with_mailbox(args, m.box(request_key(args)))
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
    """An acquire cancelled after its wait was sent (see `_thread_mail.take_back`)."""
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


class Source:
    """Where a hold's connections come from: made like the client's own
    (its pool's settings, or for a cluster those of the node that serves
    the key), never taken from the application's pool."""

    def __init__(self, client: Any, key: str) -> None:
        self.client, self.key = client, key
        self.node: Any = None
        self.glide = client if isinstance(client, Driver) else None
        self.pool = None if isinstance(client, (RedisCluster, Driver)) else client.connection_pool
        # In a cluster a mailbox per slot, heard of through tracking
        # (`_slots`; on glide's cluster, a redis-py connection per node:
        # `_glide_nodes`). A glide configuration no such connection can be
        # made from: a wait holds a connection of its own, as on a server
        # without `MAILBOX`.
        glide_cluster = self.glide is not None and self.glide.cluster
        self.cluster = isinstance(client, RedisCluster) or glide_cluster
        self.mailbox = not glide_cluster or self.glide is not None and self.glide.tracks()

    async def moved(self) -> None:
        """The key's slot moved (`-MOVED`): the cluster's map is read again,
        and the next connection goes to the slot's new owner."""
        if isinstance(self.client, RedisCluster):
            await self.client.nodes_manager.initialize()
        self.node = None

    async def _glide(self) -> Any:
        """The glide driver of the key's server: on a cluster, its node's."""
        assert self.glide is not None
        if not self.glide.tracks():
            return self.glide
        if self.node is None:
            self.node = await self.glide.node(self.key)
        return self.node

    async def _mail_make(self) -> Callable[..., Awaitable[Any]]:
        """How the mailman's connection is made: on glide's cluster, the
        node's redis-py tracking connection."""
        if self.glide is not None and self.glide.tracks():
            return (await self._glide()).tracking_make  # type: ignore[no-any-return]
        return self.make

    async def _where(self) -> tuple[Any, dict[str, Any], str]:
        if self.glide is not None:
            g = await self._glide()
            return None, {}, "" if g is self.glide else str(g.config.addresses[0].port) + "@" + str(g.config.addresses[0].host)
        if self.pool is not None:
            return self.pool.connection_class, dict(self.pool.connection_kwargs), ""
        if self.node is None:
            await self.client.initialize()
            self.node = self.client.get_node_from_key(self.key)
        return self.node.connection_class, dict(self.node.connection_kwargs), str(self.node.name)

    async def make(self, **override: Any) -> Any:
        if self.glide is not None:
            return (await self._glide()).connection()
        cls, kw, _ = await self._where()
        kw.update(override)
        return cls(**kw)

    async def keeper(self) -> Keeper:
        _, _, name = await self._where()
        return keeper(self.client, name, self.make)

    async def mailman(self) -> Optional[Mailman]:
        """The mailman of the key's server, when waits and losses go
        through a mailbox there."""
        return mailman(await self.keeper(), await self._mail_make(), self.cluster) if self.mailbox else None

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
                return await mail_wait(k, mailman(k, await self._mail_make(), self.cluster), list(args), give_back)
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
