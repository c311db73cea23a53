"""The asyncio keeper runs a command in its caller's task when it is idle,
and keeps every command's limit on one timer: a cancelled caller still
never cuts an exchange in half, a command queued behind another still goes
out, and a limit shorter than the one before is kept."""

import asyncio
import time

import pytest
import redis
import redis.asyncio as aredis

from padlock._asyncio_runtime import Keeper


def run(coro):
    return asyncio.run(coro)


def keeper_on(server):
    async def make():
        return aredis.Connection(port=server.port)

    return Keeper(make)


def test_a_caller_cancelled_mid_reply_leaves_the_connection_and_its_reply_behind(server):
    async def main():
        k = keeper_on(server)
        await k.call(["CLIENT", "SETNAME", "keeper"], 5)
        me = (await k.call(["CLIENT", "ID"], 5))[0]
        epoch = k.epoch
        slow = asyncio.get_running_loop().create_task(k.call(["BLPOP", "nothing", "0.2"], 5))
        await asyncio.sleep(0.05)
        slow.cancel()
        with pytest.raises(asyncio.CancelledError):
            await slow
        # The next command waits for the cancelled one's reply to be read,
        # then gets its own, on the same connection.
        assert (await k.call(["ECHO", "mine"], 5))[0] == b"mine"
        assert (await k.call(["CLIENT", "ID"], 5))[0] == me
        assert k.epoch == epoch, "the connection (and every KEEP binding on it) stayed"

    run(main())


def test_a_command_queued_behind_another_goes_out_though_its_caller_is_cancelled(server, r):
    async def main():
        k = keeper_on(server)
        await k.call(["PING"], 5)
        loop = asyncio.get_running_loop()
        first = loop.create_task(k.call(["BLPOP", "nothing", "0.2"], 5))
        await asyncio.sleep(0.02)
        queued = loop.create_task(k.call(["SET", "sent", "1"], 5))
        await asyncio.sleep(0.02)
        queued.cancel()
        with pytest.raises(asyncio.CancelledError):
            await queued
        assert (await first)[0] is None
        assert (await k.call(["GET", "sent"], 5))[0] == b"1"

    run(main())
    assert r.get("sent") == b"1"


def test_a_shorter_limit_than_the_one_before_is_kept(server):
    async def main():
        k = keeper_on(server)
        # A long limit arms the keeper's timer far ahead ...
        await k.call(["PING"], 30)
        epoch = k.epoch
        start = time.monotonic()
        # ... and a shorter one still ends its command on time.
        with pytest.raises(redis.TimeoutError):
            await k.call(["BLPOP", "nothing", "0"], 0.2)
        took = time.monotonic() - start
        assert took < 2, f"the 0.2 s limit took {took:.2f} s"
        assert k.epoch == epoch + 1, "a command past its limit closes the connection"
        # A new connection for what follows, which keeps its own limit.
        assert (await k.call(["PING"], 5))[0] in (b"PONG", True)
        with pytest.raises(redis.TimeoutError):
            await k.call(["BLPOP", "nothing", "0"], 0.1)

    run(main())


def test_a_cancellation_is_not_taken_for_a_timeout(server):
    async def main():
        k = keeper_on(server)
        task = asyncio.get_running_loop().create_task(k.call(["BLPOP", "nothing", "0.3"], 0.05))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # The limit passes while the cancelled reply is still owed: the
        # keeper stays usable either way.
        await asyncio.sleep(0.1)
        assert (await k.call(["ECHO", "after"], 5))[0] == b"after"

    run(main())
