"""What the blocking holds of a process share: one watcher thread for all
of them, and per server two connections of padlock's own: the keeper,
which carries their commands (acquires, waits, renewals, releases) and
their `KEEP` bindings, and the mailman's, on which one thread waits with
`BLMPOP` for the outcomes of every wait (`MAILBOX`). A thousand holds and
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
import weakref
from typing import Any, Callable, Optional, Protocol, Sequence

import redis
from redis.cluster import RedisCluster

from ._glide import GlideSync as Driver
from ._common import live_rounds
from ._retry import CONNECTION_ERRORS
from ._wire import put

__all__ = ["Driver"]

#: The longest one command may take on the shared connection (seconds).
TIMEOUT = 5.0


class Watched(Protocol):
    def _watches(self, gen: int) -> bool:
        """Whether the rounds added as `gen` are still this hold's."""

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
        # The heap's size at which the rounds of holds released since are
        # dropped (twice what was left last time: O(1) per round added).
        self._purge_at = 64
        #: How often the watcher woke up to look at the heap (for tests).
        self.wakes = 0
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
            seq = next(self._seq)
            heapq.heappush(self._heap, (at, seq, weakref.ref(hold), gen))
            if len(self._heap) >= self._purge_at:
                self._purge()
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="padlock-watch", daemon=True)
                self._thread.start()
            elif self._heap[0][1] == seq:
                # Only a round earlier than every other moves the time the
                # watcher sleeps until: one acquire wakes no thread.
                self._cv.notify()

    def _purge(self) -> None:
        self._heap = live_rounds(self._heap)
        self._purge_at = max(64, 2 * len(self._heap))

    def rounds(self) -> int:
        """Rounds waiting in the heap, released holds' included until purged."""
        return len(self._heap)

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
                    self.wakes += 1
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


def _run(conn: Any, args: Sequence[Any], limit: Optional[float]) -> Any:
    """One command; no reply within `limit` seconds is a timeout (and the
    caller's connection is replaced: the reply may still come)."""
    put(conn, args)
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
    if isinstance(client, Driver) and client.tracks():
        return client.node(key)  # glide's cluster: a client per node of padlock's own
    return client


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
