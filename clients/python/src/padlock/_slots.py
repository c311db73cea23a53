"""Mailboxes in a cluster, the parts both flavours share. A mailbox must
share its request's slot, and `BLMPOP` cannot wait on keys of two slots, so
there a process keeps one mailbox per slot in use (named with a hash tag of
that slot) and hears of writes to any of them through the server's client
tracking (`CLIENT TRACKING ... BCAST PREFIX`) on one subscribed connection
per node; the keeper then pops the mailbox named. One connection waits for
any number of slots."""

from __future__ import annotations

import string
from typing import Any, Optional, Sequence

from redis.crc import key_slot as _slot_of

#: The channel tracking invalidations arrive on (RESP2).
INVALIDATE = "__redis__:invalidate"

_TAGS: Optional[list[str]] = None
_ALPHABET = (string.digits + string.ascii_letters).encode()


def _crc_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
        table.append(crc & 0xFFFF)
    return table


_TABLE = _crc_table()


def _tags() -> list[str]:
    """For each slot, a short alphanumeric hash tag of that slot (CRC16
    XMODEM mod 16384), the shortest found first; computed once, by growing
    candidates one character at a time (one table step each)."""
    global _TAGS
    if _TAGS is not None:
        return _TAGS
    table = _TABLE
    tags: list[Optional[str]] = [None] * 16384
    left = 16384
    level: list[tuple[bytes, int]] = [(b"", 0)]
    while left:
        grown: list[tuple[bytes, int]] = []
        for prefix, crc in level:
            for c in _ALPHABET:
                n = ((crc << 8) & 0xFFFF) ^ table[((crc >> 8) ^ c) & 0xFF]
                word = prefix + bytes([c])
                grown.append((word, n))
                if tags[n & 16383] is None:
                    tags[n & 16383] = word.decode()
                    left -= 1
        level = grown
    _TAGS = [t or "" for t in tags]
    return _TAGS


def key_slot(key: Any) -> int:
    """The cluster slot of `key` (its hash tag's, if it has one)."""
    return int(_slot_of(key if isinstance(key, bytes) else str(key).encode()))


def slot_box(prefix: str, key: Any) -> str:
    """The mailbox of `key`'s slot: `prefix` and a hash tag of that slot."""
    return f"{prefix}{{{_tags()[key_slot(key)]}}}"


def request_key(args: Sequence[Any]) -> Any:
    """The key a request's slot is that of (a multi-key lock's first)."""
    return args[2] if args[0] == "LOCK.MACQUIRE" else args[1]


def invalidated(message: Any) -> Optional[list[str]]:
    """The keys an invalidation message names; None when it names every
    key (a flush), [] when it is no invalidation (a subscription's reply)."""
    if not isinstance(message, list) or len(message) != 3:
        return []
    kind = message[0].decode() if isinstance(message[0], bytes) else str(message[0])
    if kind != "message":
        return []
    keys = message[2]
    if keys is None:
        return None
    return [k.decode() if isinstance(k, bytes) else str(k) for k in keys]


def is_pong(message: Any) -> bool:
    """A subscribed connection's answer to `PING` (`["pong", ""]`)."""
    return isinstance(message, list) and len(message) == 2 and message[0] in (b"pong", "pong")
