"""Holders from the caller's context: reentrant per thread or asyncio task,
like Java's `ReentrantLock` per thread. A function that holds `order:1001`
and calls one that locks `order:1001` again reenters; two threads (or two
tasks) do not share a hold unless a `holder_scope` says so.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import threading
import time
import weakref
from typing import Any, Optional

from ._common import new_holder

_SCOPE: contextvars.ContextVar[Optional["holder_scope"]] = contextvars.ContextVar("padlock_holder", default=None)
_THREAD = threading.local()
_TASKS: "weakref.WeakKeyDictionary[asyncio.Task[Any], str]" = weakref.WeakKeyDictionary()
#: A drawn scope's holder in a forked child: drawn again, once per process.
_FORKED: dict[str, str] = {}


def current_holder() -> str:
    """The holder of the running context: the innermost `holder_scope`'s,
    else the running asyncio task's, else the thread's (each drawn at
    random once)."""
    scope = _SCOPE.get()
    if scope is not None:
        return scope.current()
    try:
        task = asyncio.current_task()
    except RuntimeError:
        task = None
    if task is not None:
        holder = _TASKS.get(task)
        if holder is None:
            holder = _TASKS[task] = new_holder()
        return holder
    holder = getattr(_THREAD, "holder", None)
    if holder is None:
        holder = _THREAD.holder = new_holder()
    return str(holder)


class holder_scope:
    """One holder for everything run inside: `with holder_scope(): ...` or
    `async with holder_scope(): ...`. Tasks started inside share it (they
    copy the context); so do threads started with a copied context
    (`contextvars.copy_context().run`). `holder` defaults to a new random
    one."""

    def __init__(self, holder: Optional[str] = None) -> None:
        self.holder = holder or new_holder()
        # A drawn holder is this process's: a forked child draws its own
        # (a holder given by name is the caller's to share).
        self._drawn = holder is None
        self._pid = os.getpid()
        self._tokens: list[contextvars.Token[Optional[holder_scope]]] = []

    def current(self) -> str:
        if not self._drawn or self._pid == os.getpid():
            return self.holder
        h = _FORKED.get(self.holder)
        if h is None:
            h = _FORKED[self.holder] = new_holder()
        return h

    def __enter__(self) -> str:
        self._tokens.append(_SCOPE.set(self))
        return self.current()

    def __exit__(self, *exc: object) -> None:
        _SCOPE.reset(self._tokens.pop())

    async def __aenter__(self) -> str:
        return self.__enter__()

    async def __aexit__(self, *exc: object) -> None:
        self.__exit__(*exc)


class _Counts:
    """How many holds this process's hold objects took per (key, holder):
    objects of one holder share the server's count, so a release that
    leaves the key held is another object's hold unless none is left. Each
    object is counted under a weak reference of its own (made once), so
    one collected unreleased counts no more."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._n: dict[tuple[str, str], dict[weakref.ref[Any], int]] = {}
        self._left: dict[tuple[str, str], tuple[list[Any], float]] = {}
        #: Whether any hold is left over (`left_over`): a fresh take asks
        #: only then.
        self.any_left = False

    def took(self, key: str, holder: str, ref: "weakref.ref[Any]") -> None:
        with self._lock:
            by = self._n.get((key, holder))
            if by is None:
                self._n[(key, holder)] = {ref: 1}
            else:
                by[ref] = by.get(ref, 0) + 1

    def forget_all(self) -> None:
        """After a fork: the parent's holds are the parent's."""
        self._lock = threading.Lock()
        self._n = {}
        self._left = {}
        self.any_left = False

    @staticmethod
    def _live(by: dict["weakref.ref[Any]", int]) -> int:
        """The holds of objects still alive; collected ones are dropped."""
        n = 0
        for r, c in list(by.items()):
            if r() is None:
                del by[r]
            else:
                n += c
        return n

    def gave(self, key: str, holder: str, ref: "weakref.ref[Any]", n: int = 1) -> int:
        """Counts `n` holds of the object `ref` given back; the holds left,
        of every object."""
        with self._lock:
            by = self._n.get((key, holder))
            if by is None:
                return 0
            mine = by.get(ref, 0) - n
            if mine > 0:
                by[ref] = mine
            else:
                by.pop(ref, None)
            left = self._live(by) if by else 0
            if not left:
                del self._n[(key, holder)]
            return left

    def left_over(self, key: str, holder: str, release: list[Any], ttl_s: float) -> None:
        """A hold lost without the server saying so (a renewal or release
        that got no answer): the server may still count it, and a new take
        by its holder would reenter it (its old fence, a count nobody
        sees). `release` gives one of it back. Kept twice its ttl (10 s at
        least: past that the server has let it run out) and at most
        `LEFT_MAX` of them, so holders never seen again cost nothing."""
        now = time.monotonic()
        with self._lock:
            left = self._left
            if len(left) >= LEFT_MAX:
                for k in [k for k, (_, until) in left.items() if until <= now]:
                    del left[k]
                while len(left) >= LEFT_MAX:
                    del left[next(iter(left))]  # the oldest
            left[(key, holder)] = (release, now + max(2 * ttl_s, 10.0))
            self.any_left = True

    def leftover(self, key: str, holder: str) -> Optional[list[Any]]:
        """The release of a hold left over, taken, once no live hold object
        of this holder holds the key here (else the server counts theirs)."""
        with self._lock:
            by = self._n.get((key, holder))
            if by is not None and self._live(by):
                return None
            got = self._left.pop((key, holder), None)
            self.any_left = bool(self._left)
            return got[0] if got is not None and got[1] > time.monotonic() else None


#: The most holds left over remembered at once (see `_Counts.left_over`).
LEFT_MAX = 10_000

COUNTS = _Counts()


def _after_fork_in_child() -> None:
    """A forked child shares no holder with its parent (nor the parent's
    hold counts): every thread, task and drawn scope draws anew."""
    global _THREAD
    _THREAD = threading.local()
    _TASKS.clear()
    _FORKED.clear()
    COUNTS.forget_all()


os.register_at_fork(after_in_child=_after_fork_in_child)
