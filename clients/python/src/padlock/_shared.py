"""What the blocking holds of a process share: one watcher thread for all
of them, and per server two connections of padlock's own: the keeper,
which carries their commands (acquires, waits, renewals, releases) and
their `KEEP` bindings, and the mailman's, on which one thread waits with
`BLPOP` for the outcomes of every wait (`MAILBOX`). A thousand holds and
a thousand waits are two threads and two connections.

The keeper counts its connections (`epoch`): a hold bound on an earlier
one binds again on its next round, before its lease can run out, and a
wait queued on an earlier one is sent again (the server dropped it when
that connection closed; its request-id makes the resend safe)."""

from __future__ import annotations

import heapq
import itertools
import logging
import os
import threading
import time
import uuid
import weakref
from typing import Any, Callable, Optional, Protocol, Sequence

import redis
from redis.cluster import RedisCluster

from ._glide import GlideSync as Driver
from ._common import mail_element, parse_outcome, taken_back, with_mailbox
from ._retry import CONNECTION_ERRORS

__all__ = ["Driver"]

#: The longest one command may take on the shared connection (seconds).
TIMEOUT = 5.0


class Watched(Protocol):
    def _watch_once(self, gen: int) -> Optional[float]:
        """One round of the watching that started as `gen`: the monotonic
        time of the next one, or None to stop."""


class Scheduler:
    """One daemon thread for every hold's rounds, earliest first. Holds are
    held weakly: a hold dropped unreleased is collected, not kept alive by
    its watcher."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, "weakref.ref[Any]", int]] = []
        self._seq = itertools.count()
        # Made at first use, and again should `threading` have been
        # patched (gevent, eventlet) since: see `Lock` below.
        self._cv_kind: Any = None
        self._cv = threading.Condition()
        self._thread: Optional[threading.Thread] = None

    def _condition(self) -> threading.Condition:
        if self._cv_kind is not threading.Condition:
            self._cv_kind = threading.Condition
            self._cv = threading.Condition()
            self._thread = None  # a watcher of the other kind waits on the old one
        return self._cv

    def add(self, hold: Watched, at: float, gen: int) -> None:
        with self._condition():
            heapq.heappush(self._heap, (at, next(self._seq), weakref.ref(hold), gen))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="padlock-watch", daemon=True)
                self._thread.start()
            self._cv.notify()

    def threads(self) -> int:
        """Watcher threads running (0 or 1)."""
        return int(self._thread is not None and self._thread.is_alive())

    def _run(self) -> None:
        cv = self._cv
        while True:
            if cv is not self._cv:
                return  # replaced (threading was patched): its successor runs
            with cv:
                while not self._heap or self._heap[0][0] > time.monotonic():
                    wait = None if not self._heap else self._heap[0][0] - time.monotonic()
                    cv.wait(wait)
                    if cv is not self._cv:
                        return
                _, _, ref, gen = heapq.heappop(self._heap)
            hold = ref()
            if hold is None:
                continue
            try:
                nxt = hold._watch_once(gen)
            except Exception:  # noqa: BLE001 - one hold's failure must not stop the others
                nxt = None
            if nxt is not None:
                self.add(hold, nxt, gen)
            del hold


SCHEDULER = Scheduler()


def _after_fork_in_child() -> None:
    """A forked child has no watcher thread (threads do not survive a
    fork) and must not speak on its parent's keeper connections: it
    starts with none of either, and opens its own when it holds."""
    global SCHEDULER, _KEEPERS_LOCK
    SCHEDULER = Scheduler()
    _KEEPERS_LOCK = threading.Lock()
    _KEEPERS.clear()
    _MAILMEN.clear()


os.register_at_fork(after_in_child=lambda: _after_fork_in_child())


class Keeper:
    """The connection one server's holds share (not taken from the pool:
    the application's connections stay its own). Calls are serialized."""

    def __init__(self, pool: Any, identify: bool = False) -> None:
        self._pool = pool
        # A driver that reconnects on its own, silently (glide): the
        # connection is told by its `CLIENT ID`, and a new one is a new
        # epoch (its bindings are gone) when `ping` sees it.
        self._identify = identify
        self._id: Any = None
        self._conn: Any = None
        self.lock = threading.RLock()
        #: Bumped whenever the connection is replaced: bindings made on an
        #: earlier one are gone.
        self.epoch = 0
        #: The send time of the latest command answered on this epoch's
        #: connection: every binding on it was still there then.
        self.alive_at = float("-inf")

    def call(self, args: Sequence[Any], limit: Optional[float]) -> tuple[Any, int]:
        """`args` on the shared connection, under its lock, waiting for the
        reply at most `limit` seconds: the reply and the epoch it went out
        on. A connection error closes the connection (the next call opens a
        new one)."""
        with self.lock:
            if self._conn is None:
                kw = dict(self._pool.connection_kwargs)
                # Every call is bounded (`run` waits for its reply at most
                # its limit); the socket timeout bounds the handshake of a
                # new connection by the call that opens it (at least 1 s,
                # so that a reply already under way is read whole).
                bound = TIMEOUT if limit is None else min(TIMEOUT, max(limit, 1.0))
                kw["socket_timeout"] = min(kw.get("socket_timeout") or bound, bound)
                kw["socket_connect_timeout"] = min(kw.get("socket_connect_timeout") or bound, bound)
                self._conn = self._pool.connection_class(**kw)
                self._id = None
            try:
                if self._identify and self._id is None:
                    self._id = _run(self._conn, ["CLIENT", "ID"], limit)
                sent = time.monotonic()
                reply = _run(self._conn, args, limit)
                if not self._identify:
                    self.alive_at = max(self.alive_at, sent)
                return reply, self.epoch
            except CONNECTION_ERRORS:
                self.reset()
                raise
            except BaseException as e:
                # Interrupted mid-call (Ctrl-C): a reply may be left unread,
                # and the next call would read it as its own.
                if not isinstance(e, Exception):
                    self.reset()
                raise

    def ping(self) -> None:
        """The liveness check of every binding on the connection: a `PING`
        (a `CLIENT ID` that must not have changed, for a driver that
        reconnects silently) answered moves `alive_at`."""
        with self.lock:
            if not self._identify:
                self.call(["PING"], TIMEOUT)
                return
            sent = time.monotonic()
            got, _ = self.call(["CLIENT", "ID"], TIMEOUT)
            if got != self._id:
                self.epoch += 1
                self.alive_at = float("-inf")
                self._id = got
            else:
                self.alive_at = max(self.alive_at, sent)

    def reset(self) -> None:
        """Closes the connection: every binding on it ends (the holds that
        still live see `epoch` move and bind again on their next round)."""
        with self.lock:
            self.epoch += 1
            self.alive_at = float("-inf")
            if self._conn is not None:
                self._conn.disconnect()
                self._conn = None


_KEEPERS: "weakref.WeakKeyDictionary[Any, Keeper]" = weakref.WeakKeyDictionary()
_KEEPERS_LOCK = threading.Lock()


def keeper(client: Any) -> Keeper:
    """The keeper of one (node) client."""
    with _KEEPERS_LOCK:
        k = _KEEPERS.get(client)
        if k is None:
            k = _KEEPERS[client] = Keeper(client.connection_pool, isinstance(client, Driver))
        return k



class Mailman:
    """The connection one server's waits and kept holds share to hear from
    the server: one thread `BLPOP`s the process's mailbox and hands each
    element to the wait (its outcome) or the hold (`-LOST`) whose
    request-id starts it. Between two it pings the keeper, once per
    interval of the shortest-lived hold it watches: that one `PING` is all
    the watching the holds bound to the keeper cost (see `fresh`)."""

    #: How long one `BLPOP` waits (seconds): the thread looks at its waits
    #: and pings the keeper between two.
    POLL = 1.0

    def __init__(self, pool: Any, keeper: "Keeper") -> None:
        self._pool = pool
        self.keeper = keeper
        self.mailbox = f"padlock:mailbox:{uuid.uuid4().hex}"
        self._slots: dict[str, "Slot"] = {}
        self._watched: "weakref.WeakValueDictionary[str, Any]" = weakref.WeakValueDictionary()
        self._lock = threading.Lock()
        self._thread: Optional[threading.Thread] = None
        #: Bumped when the mailbox connection failed (the server may have
        #: restarted and dropped every queued wait).
        self.epoch = 0
        #: How long one `BLPOP` waits: the shortest interval of the holds
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
            slot.event.set()
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
                    conn = self._pool.connection_class(**kw)
                sent = time.monotonic()
                got = _run(conn, ["BLPOP", self.mailbox, poll], poll + TIMEOUT)
                if not got:
                    # Timed out: empty until the server's timeout, which
                    # cannot come before `poll` after the send.
                    sent = min(sent + poll, time.monotonic())
                elements = [got[1]] if got else []
                while elements:
                    # A burst (10,000 grants) is read a hundred at a time,
                    # until a read finds the mailbox empty.
                    for element in elements:
                        self._deliver(element)
                    sent = time.monotonic()
                    elements = _run(conn, ["LPOP", self.mailbox, 100], TIMEOUT) or []
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
                    slot.event.set()
                time.sleep(0.05)
        if conn is not None:
            conn.disconnect()


class Slot:
    """One registered wait: its outcome once mailed."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.outcome: Optional[str] = None


_MAILMEN: "weakref.WeakKeyDictionary[Keeper, Mailman]" = weakref.WeakKeyDictionary()


def mailman(client: Any, k: Keeper) -> Mailman:
    with _KEEPERS_LOCK:
        m = _MAILMEN.get(k)
        if m is None:
            m = _MAILMEN[k] = Mailman(client.connection_pool, k)
        return m


def _run(conn: Any, args: Sequence[Any], limit: Optional[float]) -> Any:
    """One command; no reply within `limit` seconds is a timeout (and the
    caller's connection is replaced: the reply may still come)."""
    conn.send_command(*args)
    if limit is not None and not conn.can_read(timeout=max(limit, 0.05)):
        raise redis.TimeoutError(f"no reply within {limit:.2f} s")
    return conn.read_response()


# -- what `sync.py` (generated from `aio.py`) runs on ----------------------------

#: How long a server-side wait may take at most on the wire: no end (the
#: wait's connection has no socket timeout).
FOREVER: Optional[float] = None

# Looked up at each call, not bound at import: gevent or eventlet may
# patch `threading` and `time` after padlock was imported (gunicorn and
# Celery setups do), and a lock of the unpatched kind would block every
# green thread at once.


def Event() -> threading.Event:  # noqa: N802 - stands where a class did
    return threading.Event()


def Lock() -> Any:  # noqa: N802
    """Reentrant: a hold's round may end the hold on the watcher's thread."""
    return threading.RLock()


now = time.monotonic


def sleep(seconds: float) -> None:
    time.sleep(seconds)


def current() -> int:
    return threading.get_ident()


class Cancelled(Exception):
    """Never raised: threads are not cancelled (asyncio's tasks are)."""


def scheduler() -> Scheduler:
    return SCHEDULER  # read at each call: a forked child has its own


def node(client: Any, key: str) -> Any:
    """The plain client for the node that serves `key`."""
    if isinstance(client, RedisCluster):
        cluster: Any = client  # redis-py leaves these two untyped
        return cluster.get_redis_connection(cluster.get_node_from_key(key))
    return client


class Source:
    """Where a hold's connections come from: made like those of the pool of
    the client (or of the cluster node) that serves the key, never taken
    from it."""

    def __init__(self, client: Any, key: str) -> None:
        self.client = node(client, key)
        # In a cluster a mailbox must share the slot of the request's key,
        # and one connection can wait on one slot's: waits there hold a
        # connection each. So do waits on a server without `MAILBOX`.
        self.mailbox = not isinstance(client, RedisCluster) and not (
            isinstance(client, Driver) and client.cluster)

    def keeper(self) -> Keeper:
        return keeper(self.client)

    def mailman(self) -> Optional[Mailman]:
        """The mailman of the key's server, when waits and losses go
        through a mailbox there."""
        return mailman(self.client, self.keeper()) if self.mailbox else None

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
                return mail_wait(self.keeper(), mailman(self.client, self.keeper()),
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
    args, ms = with_mailbox(args, m.mailbox)
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
            slot.event.wait(Mailman.POLL if left is None else min(left, Mailman.POLL))
            if slot.outcome is not None:
                return parse_outcome(slot.outcome), None
            if (k.epoch, m.epoch) != epochs or sent_on != k.epoch:
                raise redis.ConnectionError("a mailbox wait's connection was replaced")
            slot.event.clear()
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


def collected(box: list[Any]) -> None:
    """A hold collected without `release()`: if the server keeps its lease,
    the shared connection is replaced so that the binding ends (the holds
    that live bind again on their next round)."""
    kept, box[0] = box[0], None
    if kept is not None:
        kept.reset()


def call_lost(on_lost: Callable[[Any], None], hold: Any) -> None:
    """`on_lost(hold)` on a thread of its own: a slow callback must not hold
    back the other holds' rounds."""
    threading.Thread(target=_report, args=(on_lost, hold), name="padlock-on-lost", daemon=True).start()


def _report(on_lost: Callable[[Any], None], hold: Any) -> None:
    """Runs the callback; one that raises is logged with its traceback
    (logger `padlock`), and the holds' watching goes on."""
    try:
        on_lost(hold)
    except Exception:  # noqa: BLE001 - reported, never swallowed silently
        logging.getLogger("padlock").exception("on_lost callback of %s raised", getattr(hold, "key", hold))
