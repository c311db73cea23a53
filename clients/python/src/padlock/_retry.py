"""How a hold's commands are resent, and what each failure means. Shared
by the blocking and the asyncio flavours, which only do the I/O.

Every changing command carries a fresh request-id (`ID`, docs/commands.md "Retries");
on a connection error or timeout the same command, with the same id, is
sent again on a fresh connection until the caller's deadline. The server
answers a resend of an applied request with its first reply and changes
nothing, so a lost reply can never double a reentry or free a nested
hold. redis-py's own resends never apply: holds talk to their connection
directly.
"""

from __future__ import annotations

import enum
import itertools
import os
import secrets
from typing import Any, Optional, Sequence

import redis

from ._common import NotHeldError, is_try_again

#: What a lost connection looks like to redis-py (and the OS).
CONNECTION_ERRORS = (redis.ConnectionError, redis.TimeoutError, OSError)


class Verdict(enum.Enum):
    RESEND = "resend"  # the same request again (same id), if time is left
    LOST = "lost"  # the hold is gone
    RAISE = "raise"  # the caller's to handle


class _Ids:
    """96 random bits per process, then a counter: unique without asking
    the system for randomness on every request. A forked child draws a
    prefix of its own (it must never send its parent's next id)."""

    def __init__(self) -> None:
        self.prefix = secrets.token_hex(12) + ":"
        self.count = itertools.count(1)

    def next(self) -> str:
        return f"{self.prefix}{next(self.count):x}"


_IDS = _Ids()


def _after_fork_in_child() -> None:
    global _IDS
    _IDS = _Ids()


os.register_at_fork(after_in_child=_after_fork_in_child)


def request_id() -> str:
    """A fresh request-id, never used before by any process (w.h.p.)."""
    return _IDS.next()


def with_id(args: Sequence[Any], rid: Optional[str]) -> list[Any]:
    return [*args, "ID", rid] if rid else list(args)


#: `-MOVED` redirects one request follows (a map read while the cluster
#: settles may still name the old owner).
MAX_MOVES = 8


def verdict(err: BaseException, phase: str) -> Verdict:
    """What `err` means while `phase` runs: "acquire" (one that may wait),
    "try" (one that does not), "renew" or "release".

    - A connection error or timeout: resend (the request may have applied;
      its id makes the resend safe).
    - `NOTHELD`, or `WRONGTYPE` once the hold exists (the key was replaced
      by another type): the hold is lost.
    - While renewing, any other error (OOM, NOPERM, a restart grace) is
      retried until the lease could have run out: a renewal gives up only
      when the hold may be gone.
    """
    if isinstance(err, NotHeldError):
        return Verdict.RAISE if phase == "acquire" else Verdict.LOST
    if isinstance(err, CONNECTION_ERRORS):
        return Verdict.RESEND
    if isinstance(err, redis.ResponseError):
        if str(err).startswith("WRONGTYPE"):
            return Verdict.RAISE if phase == "acquire" else Verdict.LOST
        if phase == "renew" or (is_try_again(err) and phase != "try"):
            return Verdict.RESEND
    return Verdict.RAISE


def is_unknown_option(err: BaseException) -> bool:
    """An older server answers an option it does not know (`ID`, `KEEP`)
    with a syntax error."""
    return isinstance(err, redis.ResponseError) and "syntax error" in str(err)


def pause(attempt: int, now: float, deadline: Optional[float]) -> Optional[float]:
    """Seconds to wait before resend number `attempt` (10 ms doubling up to
    500 ms), or None when the deadline leaves no time for it."""
    p = float(min(0.01 * (2 ** attempt), 0.5))
    if deadline is not None and now + p >= deadline:
        left = float(deadline - now)
        return left if left > 0.001 else None
    return p


def lost_message(key: str, holder: str, why: Any) -> str:
    return f"{key}: the hold of {holder} is lost ({why})"
