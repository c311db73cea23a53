"""Waits and losses heard through a mailbox, for the blocking holds
(`_asyncio_mail` is the asyncio twin): one thread per server `BLMPOP`s the
process's mailbox (`MAILBOX`) and hands each outcome to its wait, each
`-LOST` to its hold; `Source` says where a hold's waits go (the mailbox,
or a connection of their own where the server or a cluster cannot mail);
an interrupted wait is taken back with `LOCK.CANCEL`."""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
import weakref
from typing import Any, Optional, Sequence

import redis
from redis.cluster import RedisCluster

from ._common import DRAIN, mail_element, parse_outcome, popped, taken_back, with_mailbox
from ._slots import INVALIDATE, invalidated, is_pong, request_key, slot_box
from ._thread_runtime import TIMEOUT, Driver, Keeper, _run, keeper, node


class Mailman:
    """The connection one server's waits and kept holds share to hear from
    the server: one thread `BLMPOP`s the process's mailbox and hands each
    element to the wait (its outcome) or the hold (`-LOST`) whose
    request-id starts it. Between two it pings the keeper, once per
    interval of the shortest-lived hold it watches: that one `PING` is all
    the watching the holds bound to the keeper cost (see `fresh`)."""

    #: How long one `BLMPOP` waits (seconds): the thread looks at its waits
    #: and pings the keeper between two.
    POLL = 1.0

    def __init__(self, pool: Any, keeper: "Keeper", cluster: bool = False) -> None:
        self._pool = pool
        self.keeper = keeper
        self.mailbox = f"padlock:mailbox:{uuid.uuid4().hex}"
        #: In a cluster, a mailbox per slot (`_slots`), heard of through
        #: tracking: those named so far, and when the latest PING went.
        self.cluster = cluster
        self._boxes: set[str] = set()
        self._pinged = float("-inf")
        self._slots: dict[str, "Slot"] = {}
        self._watched: "weakref.WeakValueDictionary[str, Any]" = weakref.WeakValueDictionary()
        self._lock = threading.Lock()
        self._thread: Optional[threading.Thread] = None
        #: Bumped when the mailbox connection failed (the server may have
        #: restarted and dropped every queued wait).
        self.epoch = 0
        #: How long one `BLMPOP` waits: the shortest interval of the holds
        #: watched (a second at most).
        self.poll = self.POLL
        #: The send time of the latest read that found the mailbox empty:
        #: every loss posted before it has been handed to its hold.
        self.clear_at = float("-inf")

    def register(self, rid: str) -> "Slot":
        with self._lock:
            slot = self._slots[rid] = Slot()
            self._start()
            return slot

    def watch(self, rid: str, hold: Any, interval: float) -> None:
        """Hands a `-LOST` for `rid` to `hold._heard_lost`. The mailbox is
        read at least twice per `interval`: `fresh` then never lags a
        hold's round by more than one interval."""
        with self._lock:
            self._watched[rid] = hold
            self.poll = min(self.poll, max(interval / 2, 0.02))
            self._start()

    def unwatch(self, rids: Sequence[str]) -> None:
        with self._lock:
            for rid in rids:
                self._watched.pop(rid, None)

    def _start(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name="padlock-mailbox", daemon=True)
            self._thread.start()

    def forget(self, rid: str) -> None:
        with self._lock:
            self._slots.pop(rid, None)

    def box(self, key: Any) -> str:
        """The mailbox for a request on `key`: the process's, or in a
        cluster that of the key's slot."""
        if not self.cluster:
            return self.mailbox
        name = slot_box(self.mailbox + ":", key)
        with self._lock:
            self._boxes.add(name)
        return name

    def fresh(self) -> float:
        """Since when the holds bound to the keeper with this mailbox are
        known to live: their binding was there when the keeper last
        answered, and no loss was posted before the mailbox was last read
        empty. A kept lease runs at least a ttl past that."""
        return min(self.keeper.alive_at, self.clear_at)

    def _deliver(self, element: bytes) -> None:
        rid, outcome = mail_element(element)
        with self._lock:
            slot = self._slots.get(rid)
            hold = self._watched.get(rid) if slot is None else None
        if slot is not None:
            slot.outcome = outcome
            slot.ring()
        elif hold is not None and outcome.startswith("-LOST"):
            hold._heard_lost(outcome[1:])

    def _run(self) -> None:
        conn: Any = None
        while True:
            with self._lock:
                if not self._slots and not self._watched:
                    self._thread = None
                    break
                poll = self.poll
            try:
                if conn is None:
                    kw = dict(self._pool.connection_kwargs)
                    kw["socket_timeout"] = poll + TIMEOUT
                    kw["socket_connect_timeout"] = TIMEOUT
                    kw["protocol"] = 2
                    conn = self._pool.connection_class(**kw)
                    if self.cluster:
                        self._subscribe(conn)
                if self.cluster:
                    self._hear(conn, poll)
                    continue
                # Up to DRAIN at a time: fewer means the mailbox is empty
                # now, so a burst (10,000 grants) needs no extra read.
                command: list[Any] = ["BLMPOP", poll, 1, self.mailbox, "LEFT", "COUNT", DRAIN]
                while True:
                    sent = time.monotonic()
                    got = _run(conn, command, poll + TIMEOUT)
                    if not got and command[0] == "BLMPOP":
                        # Timed out: empty until the server's timeout, which
                        # cannot come before `poll` after the send.
                        sent = min(sent + poll, time.monotonic())
                    elements = popped(got)
                    for element in elements:
                        self._deliver(element)
                    if len(elements) < DRAIN:
                        break
                    command = ["LMPOP", 1, self.mailbox, "LEFT", "COUNT", DRAIN]
                self.clear_at = max(self.clear_at, sent)
                if self.keeper.alive_at < time.monotonic() - poll:
                    self.keeper.ping()
            except Exception:  # noqa: BLE001 - the waits are told, and sent again
                if conn is not None:
                    conn.disconnect()
                    conn = None
                self.epoch += 1
                with self._lock:
                    slots = list(self._slots.values())
                for slot in slots:
                    slot.ring()
                time.sleep(0.05)
        if conn is not None:
            conn.disconnect()

    # -- in a cluster: writes to the slots' mailboxes heard through tracking --

    def _subscribe(self, conn: Any) -> None:
        """Tracks every mailbox of this process on `conn` itself, then
        drains those named so far: a post made before the subscription
        took is popped now, any later one is heard of."""
        cid = _run(conn, ["CLIENT", "ID"], TIMEOUT)
        _run(conn, ["CLIENT", "TRACKING", "ON", "REDIRECT", cid, "BCAST", "PREFIX", self.mailbox + ":"], TIMEOUT)
        sent = time.monotonic()
        _run(conn, ["SUBSCRIBE", INVALIDATE], TIMEOUT)
        with self._lock:
            boxes = list(self._boxes)
        for box in boxes:
            self._drain(box)
        self.clear_at = max(self.clear_at, sent)
        self._pinged = sent

    def _hear(self, conn: Any, poll: float) -> None:
        """Hands on what the mailboxes named by invalidations hold, and
        pings `conn` once per `poll`: a PONG comes after the invalidations
        of every post made before the previous PING was served (they go
        out at the end of that event-loop turn), so all of those were
        handed on: `clear_at` is that PING's send time."""
        wait = self._pinged + poll - time.monotonic()
        if wait > 0:
            if conn.can_read(timeout=wait):
                self._notice(conn.read_response())
            return
        sent = time.monotonic()
        conn.send_command("PING")
        while True:
            message = conn.read_response()
            if is_pong(message):
                break
            self._notice(message)
        self.clear_at = max(self.clear_at, self._pinged)
        self._pinged = sent
        if self.keeper.alive_at < time.monotonic() - poll:
            self.keeper.ping()

    def _notice(self, message: Any) -> None:
        keys = invalidated(message)
        with self._lock:
            named = list(self._boxes) if keys is None else [k for k in keys if k in self._boxes]
        for box in named:
            self._drain(box)

    def _drain(self, box: str) -> None:
        """Pops `box` on the keeper until it is empty."""
        while True:
            elements = popped(self.keeper.call(["LMPOP", 1, box, "LEFT", "COUNT", DRAIN], TIMEOUT)[0])
            for element in elements:
                self._deliver(element)
            if len(elements) < DRAIN:
                return


class Slot:
    """One registered wait: its outcome once mailed. Every blocking acquire
    registers one before it is sent (the outcome may be mailed before the
    reply is read), and most are granted at once and never wait: so a bare
    lock held from the start stands for "not rung yet" (a `threading.Event`
    costs some twenty times as much to make)."""

    __slots__ = ("outcome", "_bell")

    def __init__(self) -> None:
        self.outcome: Optional[str] = None
        self._bell = threading.Lock()
        self._bell.acquire()

    def ring(self) -> None:
        """Wakes the waiter (rings twice before it wakes count as once)."""
        try:
            self._bell.release()
        except (RuntimeError, ValueError):
            pass  # rung already (a green lock may say so with ValueError)

    def wait(self, timeout: float) -> None:
        """Until rung (and the ring heard) or `timeout` seconds pass."""
        self._bell.acquire(timeout=timeout)


_MAILMEN: "weakref.WeakKeyDictionary[Keeper, Mailman]" = weakref.WeakKeyDictionary()
_MAILMEN_LOCK = threading.Lock()


def _after_fork_in_child() -> None:
    """A forked child hears nothing of its parent's mailboxes (the
    threads did not survive the fork; see `_thread_runtime`)."""
    global _MAILMEN_LOCK
    _MAILMEN_LOCK = threading.Lock()
    _MAILMEN.clear()


os.register_at_fork(after_in_child=lambda: _after_fork_in_child())


def mailman(client: Any, k: Keeper, cluster: bool = False) -> Mailman:
    with _MAILMEN_LOCK:
        m = _MAILMEN.get(k)
        if m is None:
            pool = getattr(client, "tracking_pool", None) or client.connection_pool
            m = _MAILMEN[k] = Mailman(pool, k, cluster)
        return m


class Source:
    """Where a hold's connections come from: made like those of the pool of
    the client (or of the cluster node) that serves the key, never taken
    from it."""

    def __init__(self, client: Any, key: str) -> None:
        self._origin, self._key = client, key
        self.client = node(client, key)
        # In a cluster a mailbox must share the slot of the request's key:
        # a mailbox per slot, heard of through tracking (`_slots`; on glide's
        # cluster, a redis-py connection per node: `_glide_nodes`). A glide
        # configuration no such connection can be made from: a wait holds
        # a connection of its own, as on a server without `MAILBOX`.
        glide_cluster = isinstance(client, Driver) and client.cluster
        self.cluster = isinstance(client, RedisCluster) or glide_cluster
        self.mailbox = not glide_cluster or client.tracks()

    def keeper(self) -> Keeper:
        return keeper(self.client)

    def moved(self) -> None:
        """The key's slot moved (`-MOVED`): the cluster's map is read again,
        and the next connection goes to the slot's new owner."""
        if isinstance(self._origin, RedisCluster):
            cluster: Any = self._origin  # redis-py leaves it untyped
            cluster.nodes_manager.initialize()
        self.client = node(self._origin, self._key)

    def mailman(self) -> Optional[Mailman]:
        """The mailman of the key's server, when waits and losses go
        through a mailbox there."""
        return mailman(self.client, self.keeper(), self.cluster) if self.mailbox else None

    def no_mailbox(self, e: Exception) -> bool:
        """Whether `e` says the server has no `MAILBOX` (an older build of
        the module): from then on, this source does without."""
        if self.mailbox and ("MAILBOX" in str(e) or "syntax" in str(e)):
            self.mailbox = False
            return True
        return False

    def wait(self, args: Sequence[Any], limit: Optional[float],
             give_back: Optional[Sequence[Any]] = None) -> tuple[Any, Optional[int]]:
        """One server-side wait: queued through the keeper with `MAILBOX`
        and its outcome heard on the mailman's connection; or, without a
        mailbox, on a connection made for it. `give_back` undoes a grant
        that comes after the caller stopped waiting. The reply, and the
        keeper's epoch when it was granted at once on the keeper (a `KEEP`
        grant is bound there, with the mailbox)."""
        if self.mailbox and "ID" in args and "BLOCK" in args:
            try:
                return mail_wait(self.keeper(), mailman(self.client, self.keeper(), self.cluster),
                                 list(args), give_back)
            except redis.ResponseError as e:
                if not self.no_mailbox(e):
                    raise
        pool = self.client.connection_pool
        kw = dict(pool.connection_kwargs)
        kw["socket_timeout"] = None if limit is None else max(limit, 0.05)
        conn = pool.connection_class(**kw)
        try:
            return _run(conn, args, None), None
        finally:
            conn.disconnect()


def mail_wait(k: Keeper, m: Mailman, args: list[Any],
              give_back: Optional[Sequence[Any]]) -> tuple[Any, Optional[int]]:
    """A wait through the mailbox: the request (with its `ID`) queued on
    the keeper answers its grant now or `WAITING`; then its outcome is
    mailed. Either connection failing meanwhile is a connection error
    (the caller sends the request again with the same id: queued again,
    or answered with its grant). A wait interrupted on this side is taken
    back (`LOCK.CANCEL`), and a grant that raced it released."""
    rid = args[args.index("ID") + 1]
    args, ms = with_mailbox(args, m.box(request_key(args)))
    slot = m.register(rid)
    try:
        epochs = (k.epoch, m.epoch)
        reply, sent_on = k.call(args, TIMEOUT)
        if reply != b"WAITING" and reply != "WAITING":
            return reply, sent_on
        # The server times the wait out itself and mails nil: a little
        # more than its timeout is all it may take.
        end = None if ms == 0 else time.monotonic() + ms / 1000.0 + TIMEOUT
        while True:
            left = None if end is None else end - time.monotonic()
            if left is not None and left <= 0:
                raise redis.TimeoutError(f"no outcome of {args[0]} within {ms} ms")
            slot.wait(Mailman.POLL if left is None else min(left, Mailman.POLL))
            if slot.outcome is not None:
                return parse_outcome(slot.outcome), None
            if (k.epoch, m.epoch) != epochs or sent_on != k.epoch:
                raise redis.ConnectionError("a mailbox wait's connection was replaced")
    except BaseException as e:
        if not isinstance(e, Exception) and give_back is not None:
            _take_back(k, args, rid, give_back)
            e.padlock_taken_back = True  # type: ignore[attr-defined]
        raise
    finally:
        m.forget(rid)


def take_back(k: Keeper, args: Sequence[Any], give_back: Sequence[Any], e: BaseException) -> None:
    """An acquire interrupted after its wait was sent (anywhere, not only
    while it waited): its request leaves the queue, and a grant it had is
    given back, unless the wait did so already."""
    if getattr(e, "padlock_taken_back", False) or "ID" not in args:
        return
    _take_back(k, list(args), str(args[list(args).index("ID") + 1]), give_back)


def _take_back(k: Keeper, args: list[Any], rid: str, give_back: Sequence[Any]) -> None:
    """The caller stopped waiting (an interrupt): the request leaves its
    queue, and a grant it already had is released."""
    key, holder, probe = taken_back(args)
    try:
        if k.call(["LOCK.CANCEL", key, holder, rid], TIMEOUT)[0] == 1:
            return
        if k.call(probe, TIMEOUT)[0] not in (None, b"WAITING", "WAITING"):
            k.call(list(give_back), TIMEOUT)
    except Exception:  # noqa: BLE001 - the lease runs out on its own
        logging.getLogger("padlock").warning("could not take back an interrupted wait on %s", key)
