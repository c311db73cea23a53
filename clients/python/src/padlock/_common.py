"""What the sync and asyncio flavours share: errors, holder ids and the
replies' shapes (how requests are resent is `_retry`)."""

from __future__ import annotations

import heapq
import secrets
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

import redis


class PadlockError(Exception):
    """Base of the errors this library raises."""


class NotHeldError(PadlockError):
    """The holder does not hold the key (any more): `-NOTHELD`."""


class DeadlockError(PadlockError):
    """Waiting would close a cycle of the wait-for graph. `cycle` alternates
    holder, key, holder, ... and ends at the holder that asked."""

    def __init__(self, message: str, cycle: list[str]) -> None:
        super().__init__(message)
        self.cycle = cycle


class NotAcquiredError(PadlockError):
    """A `with` block could not get its hold within `blocking_timeout`."""


class LockLostError(PadlockError):
    """The lease ran out or the key was removed while the work went on."""


@dataclass(frozen=True)
class Replicas:
    """Grants that wait for replicas (`replicas=` on every lock): a fresh
    acquire is reported only once `count` replicas have it (`WAIT count
    timeout`, and with `aof` also `WAITAOF 0 count timeout`), so that a
    failover within that time cannot hand the lock to another holder.
    Short of that, `on_shortfall="release"` gives the hold back and the
    acquire fails as a timed-out one does; `"warn"` keeps it and logs. A
    final release waits the same way and logs a shortfall (a release not
    yet on a replica errs on the safe side: the key looks held there).

    The `WAIT` runs on the process's shared connection: while a replica
    lags it holds that connection up to `timeout`."""

    count: int = 1
    timeout: float = 0.5
    on_shortfall: str = "release"
    aof: bool = False

    def __post_init__(self) -> None:
        if self.count < 1:
            raise ValueError("replicas: count must be at least 1")
        if self.timeout <= 0:
            raise ValueError("replicas: timeout must be positive (WAIT 0 would wait for ever)")
        if self.on_shortfall not in ("release", "warn"):
            raise ValueError('replicas: on_shortfall is "release" or "warn"')

    @staticmethod
    def of(value: "int | Replicas | None") -> "Optional[Replicas]":
        """`replicas=1` is `Replicas(1)`; 0 or None: no waiting."""
        if value is None or isinstance(value, Replicas):
            return value
        return Replicas(value) if value else None

    def wait_commands(self) -> list[list[Any]]:
        ms = max(1, int(self.timeout * 1000))
        out: list[list[Any]] = [["WAIT", self.count, ms]]
        if self.aof:
            out.append(["WAITAOF", 0, self.count, ms])
        return out

    def counted(self, replies: Sequence[Any]) -> int:
        """How many replicas have every write so far, by the replies to
        `wait_commands` (WAITAOF answers `[local, replicas]`)."""
        n = int(replies[0])
        if self.aof and len(replies) > 1:
            n = min(n, int(replies[1][1]))
        return n


def new_holder() -> str:
    """A random 128-bit holder id: two processes never share one."""
    return secrets.token_hex(16)


def to_ms(seconds: float) -> int:
    return max(1, int(round(seconds * 1000)))


def translate(err: redis.ResponseError) -> Exception:
    text = str(err)
    if text.startswith("DEADLOCK"):
        return DeadlockError(text, text[len("DEADLOCK "):].split(" -> "))
    if text.startswith("NOTHELD"):
        return NotHeldError(text)
    return err


def is_try_again(err: Exception) -> bool:
    """The restart grace refused a grant: retry after a while."""
    return isinstance(err, redis.exceptions.TryAgainError) or (
        isinstance(err, redis.ResponseError) and str(err).startswith("TRYAGAIN")
    )


def is_moved(err: BaseException) -> bool:
    """The key's slot lives on another node now (a resharding): redis-py's
    `MovedError`, or a mailed `-MOVED` outcome."""
    return isinstance(err, redis.exceptions.MovedError) or (
        isinstance(err, redis.ResponseError) and str(err).startswith("MOVED ")
    )


def block_args(blocking: bool, timeout: Optional[float]) -> list[Any]:
    if not blocking:
        return []
    return ["BLOCK", 0 if timeout is None else to_ms(timeout)]


def as_str(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def as_map(raw: Any) -> dict[str, Any]:
    """A map reply (RESP3) or a flat field/value array (RESP2)."""
    if raw is None:
        return {}
    if isinstance(raw, dict):
        return {as_str(k): v for k, v in raw.items()}
    return {as_str(raw[i]): raw[i + 1] for i in range(0, len(raw), 2)}


@dataclass(frozen=True)
class Edge:
    """One edge of `LOCK.GRAPH`: `waiter` waits for `key` (in database
    `db`), held by `holders`; `ttl_ms` left (-1: waits forever)."""

    waiter: str
    key: str
    holders: tuple[str, ...]
    ttl_ms: int
    db: int = 0


def parse_graph(raw: Sequence[Any]) -> list[Edge]:
    return [
        Edge(as_str(e[0]), as_str(e[1]), tuple(as_str(h) for h in e[2]), int(e[3]),
             int(e[4]) if len(e) > 4 else 0)
        for e in raw
    ]


@dataclass(frozen=True)
class Hot:
    """One row of `LOCK.TOP`: a key (of database `db`) with waiters right
    now."""

    key: str
    kind: str
    waiters: int
    oldest_wait_ms: int
    holders: int
    db: int = 0


def parse_top(raw: Sequence[Any]) -> list[Hot]:
    return [Hot(as_str(r[0]), as_str(r[1]), int(r[2]), int(r[3]), int(r[4]),
                int(r[5]) if len(r) > 5 else 0) for r in raw]


def cycle_nodes(edges: Sequence[Edge]) -> set[str]:
    """Holders and keys on a cycle of the wait-for graph (holder → key it
    waits for → holder of that key → ...), as `to_dot` names them."""
    succ: dict[str, set[str]] = {}
    for e in edges:
        succ.setdefault(e.waiter, set()).add("key:" + e.key)
        succ.setdefault("key:" + e.key, set()).update(e.holders)

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), [start]
        while todo:
            n = todo.pop()
            for m in succ.get(n, ()):
                if m == goal:
                    return True
                if m not in seen:
                    seen.add(m)
                    todo.append(m)
        return False

    return {n for n in succ if reaches(n, n)}


def to_dot(
    edges: Sequence[Edge],
    waited: Optional[Mapping[str, int]] = None,
    long_wait_ms: int = 1000,
) -> str:
    """The graph in Graphviz DOT: holders as ellipses, keys as boxes; what
    lies on a cycle in red; keys whose oldest waiter has waited at least
    `long_wait_ms` (from `waited`, key → ms, as `top` reports it) filled
    orange."""

    def q(s: str) -> str:
        return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'

    hot = cycle_nodes(edges)
    red = "color=red, fontcolor=red, penwidth=2"
    waited = waited or {}
    lines = ["digraph padlock {", "  rankdir=LR;"]
    for key in sorted({e.key for e in edges} | set(waited)):
        marks = ["shape=box", f"label={q(key)}"]
        if waited.get(key, 0) >= long_wait_ms:
            marks += ["style=filled", "fillcolor=orange"]
            marks[1] = f"label={q(f'{key} (waited {waited[key]} ms)')}"
        if "key:" + key in hot:
            marks.append(red)
        lines.append(f"  {q('key:' + key)} [{', '.join(marks)}];")
    for n in sorted(hot):
        if not n.startswith("key:"):
            lines.append(f"  {q(n)} [{red}];")
    for e in edges:
        label = "forever" if e.ttl_ms < 0 else f"{e.ttl_ms} ms left"
        on_cycle = e.waiter in hot and "key:" + e.key in hot
        lines.append(f"  {q(e.waiter)} -> {q('key:' + e.key)} [label={q(label)}{', ' + red if on_cycle else ''}];")
    for key, h in sorted({(e.key, h) for e in edges for h in e.holders}):
        on_cycle = "key:" + key in hot and h in hot
        lines.append(f"  {q('key:' + key)} -> {q(h)} [style=dashed{', ' + red if on_cycle else ''}];")
    lines.append("}")
    return "\n".join(lines)


# -- mailbox waits (`MAILBOX`): the parts both flavours share --------------------

#: How many mailed elements one read (`BLMPOP`/`LMPOP ... COUNT`) takes at
#: most: a read that takes fewer found the mailbox empty.
DRAIN = 100


def popped(reply: Any) -> list[Any]:
    """The elements of a `BLMPOP`/`LMPOP` reply: `[key, [element ...]]`,
    `{key: [element ...]}` (glide makes it a map), or none."""
    if not reply:
        return []
    if isinstance(reply, dict):
        return [e for elements in reply.values() for e in elements]
    return list(reply[1])


def mail_element(element: Any) -> tuple[str, str]:
    """A mailbox element: the request-id it answers, and the outcome."""
    rid, _, outcome = bytes(element).decode(errors="replace").partition(" ")
    return rid, outcome


def parse_outcome(outcome: str) -> Any:
    """A mailbox element's reply: fence(s) or permits, None (timed out), or
    the error it names."""
    if outcome == "nil":
        return None
    if outcome.startswith("-"):
        raise redis.ResponseError(outcome[1:])
    if "," in outcome:
        return [int(f) for f in outcome.split(",")]
    return int(outcome)


def with_mailbox(args: Sequence[Any], mailbox: str) -> tuple[list[Any], int]:
    """A wait's arguments with `MAILBOX mailbox` after its `BLOCK`, and its
    BLOCK timeout (ms)."""
    out = list(args)
    i = out.index("BLOCK")
    out[i + 2:i + 2] = ["MAILBOX", mailbox]
    return out, int(out[i + 1])


def taken_back(args: Sequence[Any]) -> tuple[Any, Any, list[Any]]:
    """For taking back a wait: its key and holder (what `LOCK.CANCEL`
    names), and the same request waiting 1 ms (a resend, answered with its
    grant if it had one)."""
    multi = args[0] == "LOCK.MACQUIRE"
    key, holder = (args[2], args[2 + int(args[1])]) if multi else (args[1], args[2])
    i = list(args).index("BLOCK")
    return key, holder, [*args[:i + 1], 1, *args[i + 2:]]


def live_rounds(heap: list[Any]) -> list[Any]:
    """A watcher's heap of `(at, seq, hold ref, gen)` rounds without those
    of holds released (or watched anew) since they were added, which would
    each cost the watcher a wake-up when due; a heap again."""
    live = []
    for entry in heap:
        hold = entry[2]()
        if hold is not None and hold._watches(entry[3]):
            live.append(entry)
    heapq.heapify(live)
    return live
