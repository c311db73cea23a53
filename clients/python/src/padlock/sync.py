"""Blocking clients on redis-py (`redis.Redis` or `redis.RedisCluster`).

Each hold (a lock, permits, a read or write hold, several locks at once)
keeps one connection of the client's pool while it is held: the acquire,
the renewals and the release go through it, so a `KEEP` lease is bound to
a connection that lives exactly as long as the hold. A watcher thread
renews (and, with `KEEP`, rebinds) every third of the ttl; when the hold
turns out lost, `lost` is set and `on_lost` is called.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Optional, Sequence

import redis
from redis.cluster import RedisCluster

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


def _node(client: Any, key: str) -> Any:
    """The plain client for the node that serves `key`."""
    if isinstance(client, RedisCluster):
        cluster: Any = client  # redis-py leaves these two untyped
        return cluster.get_redis_connection(cluster.get_node_from_key(key))
    return client


class _Hold(Commands):
    """The life of one hold: acquire, renew, release, notice loss."""

    def __init__(
        self,
        client: Any,
        route_key: str,
        holder: Optional[str],
        ttl: float,
        keep: bool,
        on_lost: Optional[Callable[["_Hold"], None]],
    ) -> None:
        self.holder = holder or new_holder()
        self.ttl_ms = to_ms(ttl)
        self.keep = keep
        self.on_lost = on_lost
        self.lost = threading.Event()
        self._client = _node(client, route_key)
        self._conn: Any = None
        self._io = threading.Lock()
        self._stop = threading.Event()
        self._watcher: Optional[threading.Thread] = None
        self._depth = 0

    # -- the connection this hold keeps --------------------------------------
    def _call(self, args: Sequence[Any], wait: bool = False) -> Any:
        with self._io:
            if self._conn is None:
                self._conn = self._client.connection_pool.get_connection(str(args[0]))
            conn = self._conn
            sock = getattr(conn, "_sock", None)
            try:
                conn.send_command(*args)
                if wait and sock is not None:
                    # A server-side wait may outlast the client's socket
                    # timeout: wait for the reply as long as it takes.
                    sock.settimeout(None)
                return conn.read_response()
            except redis.ResponseError as e:
                raise translate(e) from None
            finally:
                if wait and sock is not None and getattr(conn, "_sock", None) is sock:
                    sock.settimeout(conn.socket_timeout)

    def _give_back(self) -> None:
        with self._io:
            if self._conn is not None:
                self._client.connection_pool.release(self._conn)
                self._conn = None

    # -- acquire / release -----------------------------------------------------
    def _acquire(self, blocking: bool, timeout: Optional[float]) -> Any:
        deadline = None if timeout is None else time.monotonic() + timeout
        attempt = 0
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            args = self._acquire_cmd(blocking, left)
            if self.keep:
                args.append("KEEP")
            try:
                reply = self._call(args, wait=blocking)
            except redis.ResponseError as e:
                if self.keep and is_keep_unknown(e):
                    # An older server: the watcher renews instead.
                    self.keep = False
                    continue
                if not is_try_again(e) or not blocking:
                    if self._depth == 0:
                        self._give_back()
                    raise
                pause = backoff(attempt)
                attempt += 1
                if deadline is not None and time.monotonic() + pause > deadline:
                    if self._depth == 0:
                        self._give_back()
                    return None
                time.sleep(pause)
                continue
            if reply is None:
                if self._depth == 0:
                    self._give_back()
                return None
            self._depth += 1
            if self._depth == 1:
                self.lost.clear()
                self._start_watcher()
            return reply

    def release(self) -> None:
        """Gives back one hold; `NotHeldError` when it was lost."""
        try:
            reply = self._call(self._release_cmd())
        except NotHeldError:
            self._end()
            raise
        self._depth = max(0, self._depth - 1)
        if self._released_all(reply):
            self._end()

    blocking_timeout: Optional[float] = None

    def _enter(self) -> None:
        reply = self._acquire(True, self.blocking_timeout)
        if reply is None:
            raise NotAcquiredError(f"{self.key}: not acquired within {self.blocking_timeout} s")
        self._took(reply)

    def _exit(self, clean: bool) -> None:
        """Leaving a `with` block: release; a hold lost on the way raises
        `LockLostError` unless the block raised already."""
        if self._depth == 0:
            return
        try:
            self.release()
        except NotHeldError:
            if clean:
                raise LockLostError(f"{self.key}: lost before release") from None

    def _end(self) -> None:
        self._depth = 0
        self._stop.set()
        if self._watcher is not None and self._watcher is not threading.current_thread():
            self._watcher.join()
        self._watcher = None
        self._give_back()

    # -- renewal and loss ------------------------------------------------------
    def _start_watcher(self) -> None:
        self._stop = threading.Event()
        self._watcher = threading.Thread(target=self._watch, daemon=True)
        self._watcher.start()

    def _watch(self) -> None:
        interval = max(self.ttl_ms / 3000.0, 0.001)
        while not self._stop.wait(interval):
            if not self.renew():
                self._mark_lost()
                return

    def renew(self) -> bool:
        """Resets the lease now (and rebinds `KEEP`); False when lost."""
        for args in self._extend_cmds():
            if self.keep:
                args.append("KEEP")
            for attempt in range(2):
                try:
                    self._call(args)
                    break
                except NotHeldError:
                    return False
                except (redis.ConnectionError, redis.TimeoutError):
                    # The connection went away: a fresh one rebinds.
                    with self._io:
                        if self._conn is not None:
                            self._conn.disconnect()
                    if attempt == 1:
                        return False
        return True

    def _mark_lost(self) -> None:
        self.lost.set()
        if self.on_lost is not None:
            self.on_lost(self)

    def check(self) -> None:
        """Raises `LockLostError` when the hold was lost."""
        if self.lost.is_set():
            raise LockLostError(f"{self.holder} lost its hold")

    @property
    def held(self) -> bool:
        return self._depth > 0 and not self.lost.is_set()


class Lock(LockCommands, _Hold):
    """A reentrant lock with a lease and a fencing token.

    >>> with Lock(r, "job:1", ttl=30) as lock:
    ...     do_work(fence=lock.fence)
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
    ) -> None:
        _Hold.__init__(self, client, key, holder, ttl, keep, on_lost)
        self.blocking_timeout = blocking_timeout
        self.key = key

    def acquire(self, blocking: bool = True, timeout: Optional[float] = None) -> Optional[int]:
        """The fence, or None when not acquired (without `blocking`, or when
        `timeout` seconds passed). Waits server-side, first come first
        served; -TRYAGAIN of a restart grace is retried until `timeout`."""
        reply = self._acquire(blocking, timeout)
        return None if reply is None else self._took(reply)

    def locked(self) -> bool:
        """Whether anyone holds the key."""
        return bool(self._client.exists(self.key))

    def owned(self) -> bool:
        """Whether this holder holds it, as the server sees it now."""
        return as_str(self.info().get("holder", b"")) == self.holder

    def info(self) -> dict[str, Any]:
        return as_map(self._client.execute_command("LOCK.INFO", self.key))

    def __enter__(self) -> "Lock":
        self._enter()
        return self

    def __exit__(self, *exc: object) -> None:
        self._exit(exc[0] is None)


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
        blocking_timeout: Optional[float] = None,
        on_lost: Optional[Callable[[_Hold], None]] = None,
    ) -> None:
        _Hold.__init__(self, client, key, holder, ttl, keep, on_lost)
        self.blocking_timeout = blocking_timeout
        self.key, self.limit, self.permits = key, limit, permits

    def acquire(self, blocking: bool = True, timeout: Optional[float] = None) -> Optional[int]:
        """The permits this holder now holds, or None."""
        reply = self._acquire(blocking, timeout)
        return None if reply is None else self._took(reply)

    def info(self) -> dict[str, Any]:
        return as_map(self._client.execute_command("SEM.INFO", self.key))

    def __enter__(self) -> "Semaphore":
        self._enter()
        return self

    def __exit__(self, *exc: object) -> None:
        self._exit(exc[0] is None)


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
        blocking_timeout: Optional[float] = None,
        on_lost: Optional[Callable[[_Hold], None]] = None,
    ) -> None:
        _Hold.__init__(self, client, keys[0], holder, ttl, keep, on_lost)
        self.blocking_timeout = blocking_timeout
        self.keys = list(keys)

    def acquire(self, blocking: bool = True, timeout: Optional[float] = None) -> Optional[list[int]]:
        """The fences, one per key, or None."""
        reply = self._acquire(blocking, timeout)
        return None if reply is None else self._took(reply)

    def __enter__(self) -> "MultiLock":
        self._enter()
        return self

    def __exit__(self, *exc: object) -> None:
        self._exit(exc[0] is None)


class RwHold(RwCommands, _Hold):
    """One mode (`READ` or `WRITE`) of a `ReadWriteLock`."""

    def __init__(self, rw: "ReadWriteLock", mode: str) -> None:
        _Hold.__init__(self, rw._client, rw.key, rw.holder, rw.ttl, rw.keep, rw.on_lost)
        self.blocking_timeout = rw.blocking_timeout
        self.key, self.mode = rw.key, mode

    def acquire(self, blocking: bool = True, timeout: Optional[float] = None) -> Optional[int]:
        """The holder's fence, or None."""
        reply = self._acquire(blocking, timeout)
        return None if reply is None else self._took(reply)

    def __enter__(self) -> "RwHold":
        self._enter()
        return self

    def __exit__(self, *exc: object) -> None:
        self._exit(exc[0] is None)


class ReadWriteLock:
    """A fair read-write lock: `with rw.read(): ...`, `with rw.write(): ...`.
    Both modes belong to one holder, so a reader may upgrade (`write()`
    while reading: granted once it is the only reader) or downgrade."""

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
    ) -> None:
        self._client, self.key, self.ttl = client, key, ttl
        self.holder = holder or new_holder()
        self.keep, self.on_lost = keep, on_lost
        self.blocking_timeout = blocking_timeout
        self._read = RwHold(self, "READ")
        self._write = RwHold(self, "WRITE")

    def read(self) -> RwHold:
        return self._read

    def write(self) -> RwHold:
        return self._write

    def info(self) -> dict[str, Any]:
        return as_map(_node(self._client, self.key).execute_command("RWLOCK.INFO", self.key))


def graph(client: Any) -> list[Edge]:
    """`LOCK.GRAPH` as data (of one node; in a cluster, of each node you ask)."""
    return parse_graph(client.execute_command("LOCK.GRAPH"))
