"""padlock's commands put into RESP bytes once, for redis-py connections.

Without hiredis, redis-py packs a command in Python, argument by argument
through its encoder (type checks, then a buffer split for large values):
for the eleven arguments of a mailbox acquire (`... BLOCK 0 MAILBOX box
KEEP ID rid`) that was 8.7 µs on the benchmark machine, against 1.9 µs for
a `DEL` — the largest share of what an uncontended acquire + release cost
the caller beyond `SET NX PX` + `DEL`. padlock's arguments are short
strings, bytes and integers, which one join packs in about a third of the
time. Anything else, and every connection that is not redis-py's own (glide),
goes through the driver's `send_command` as before; with hiredis, redis-py's
packer is C and is used."""

from __future__ import annotations

from typing import Any, Optional, Sequence

import redis.asyncio.connection as _aconn
import redis.connection as _conn
from redis.utils import HIREDIS_AVAILABLE

_OURS = (getattr(_conn, "AbstractConnection", _conn.Connection),
         getattr(_aconn, "AbstractConnection", _aconn.Connection))


def _bulk(b: bytes) -> bytes:
    return b"$%d\r\n%s\r\n" % (len(b), b)


#: The words padlock sends on every command, packed once (ASCII: the same
#: bytes in any encoding a Redis client uses).
_WORDS = {w: _bulk(w.encode()) for w in (
    "LOCK.ACQUIRE", "LOCK.RELEASE", "LOCK.EXTEND", "LOCK.REENTER", "LOCK.MACQUIRE", "LOCK.MRELEASE",
    "LOCK.CANCEL", "SEM.ACQUIRE", "SEM.RELEASE", "SEM.EXTEND", "RWLOCK.ACQUIRE", "RWLOCK.RELEASE",
    "RWLOCK.EXTEND", "BLOCK", "MAILBOX", "KEEP", "ID", "PERMITS", "READ", "WRITE", "LEFT", "COUNT",
    "LMPOP", "BLMPOP", "PING", "0", "1")}


def packed(conn: Any, args: Sequence[Any]) -> Optional[bytes]:
    """`args` as one RESP array for `conn.send_packed_command`, encoded as
    `conn`'s client encodes strings; None where the driver should pack."""
    if HIREDIS_AVAILABLE or not isinstance(conn, _OURS):
        return None
    enc = conn.encoder
    out = [b"*%d\r\n" % len(args)]
    word = _WORDS.get
    for a in args:
        t = type(a)
        if t is str:
            w = word(a)
            if w is not None:
                out.append(w)
                continue
            b = a.encode(enc.encoding, enc.encoding_errors)
        elif t is int:
            b = b"%d" % a
        elif t is bytes:
            b = a
        else:
            return None  # floats, subclasses, memoryviews: redis-py's own rules
        out.append(b"$%d\r\n%s\r\n" % (len(b), b))
    return b"".join(out)


def put(conn: Any, args: Sequence[Any]) -> None:
    """Sends `args` on a blocking connection."""
    wire = packed(conn, args)
    if wire is None:
        conn.send_command(*args)
    else:
        conn.send_packed_command([wire])


async def put_async(conn: Any, args: Sequence[Any]) -> None:
    """Sends `args` on an asyncio connection."""
    wire = packed(conn, args)
    if wire is None:
        await conn.send_command(*args)
    else:
        await conn.send_packed_command([wire])
