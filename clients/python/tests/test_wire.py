"""padlock packs its own commands for redis-py connections (`_wire`): the
bytes must be exactly what redis-py would have sent, in the client's
encoding, and anything padlock does not pack itself is left to redis-py."""

import asyncio

import pytest
import redis
import redis.asyncio as aredis
import redis.asyncio.connection as aconn
import redis.connection as conn

from padlock import Lock, aio
from padlock._wire import packed

ARGS = [
    ["LOCK.ACQUIRE", "k", "h", 5000, "BLOCK", 0, "MAILBOX", "padlock:mailbox:x", "KEEP", "ID", "r-1"],
    ["SEM.ACQUIRE", b"k\xff\x00", "h\u00e9\u2603", 3, 10, "PERMITS", 2],
    ["LOCK.RELEASE", "", "h", "ID", "0"],
    ["PING"],
    ["ECHO", -17, 2**70],
]


@pytest.mark.parametrize("args", ARGS)
@pytest.mark.parametrize("make", [conn.Connection, aconn.Connection])
def test_packed_bytes_are_what_redis_py_sends(make, args):
    c = make()
    assert packed(c, args) == b"".join(conn.Connection().pack_command(*args))


def test_packed_follows_the_clients_encoding():
    c = conn.Connection(encoding="latin-1")
    args = ["LOCK.ACQUIRE", "caf\u00e9", "h", 1000]
    assert packed(c, args) == b"".join(c.pack_command(*args))
    assert b"caf\xe9" in packed(c, args)


@pytest.mark.parametrize("odd", [1.5, True, memoryview(b"x"), bytearray(b"x")])
def test_what_padlock_does_not_pack_is_left_to_redis_py(odd):
    assert packed(conn.Connection(), ["ECHO", odd]) is None


def test_a_connection_not_redis_pys_is_left_alone():
    class Other:
        encoder = conn.Connection().encoder

    assert packed(Other(), ["PING"]) is None


def test_a_lock_goes_through_packed_commands_on_both_flavours(server, monkeypatch):
    def refuse(original):
        def pack_command(self, *args):
            assert str(args[0]) not in ("LOCK.ACQUIRE", "LOCK.RELEASE"), "packed by redis-py"
            return original(self, *args)
        return pack_command

    for cls in (conn.Connection, aconn.Connection):
        monkeypatch.setattr(cls, "pack_command", refuse(cls.pack_command))
    r = redis.Redis(port=server.port)
    with Lock(r, "wire:sync", ttl=5) as held:
        assert held.fence > 0
        assert held.owned()

    async def main():
        ar = aredis.Redis(port=server.port)
        async with aio.Lock(ar, "wire:aio", ttl=5) as held:
            assert held.fence > 0
            assert await held.owned()
        await ar.aclose()

    asyncio.run(main())
    assert r.exists("wire:sync", "wire:aio") == 0
