"""Client edges: a ttl the server refuses to keep is refused before any
wait, the same way as without one (never a grant whose lease may already
have run out); an on_lost callback that raises is logged with its
traceback and the watching goes on."""

import logging
import time

import pytest
import redis

from padlock import Lock
from padlock import aio


def test_a_ttl_below_the_keep_floor_is_refused_before_waiting(r):
    other = Lock(r, "k", ttl=30, holder="other")
    assert other.acquire() is not None
    for blocking in (False, True):
        lock = Lock(r, "k", ttl=0.1)
        t0 = time.monotonic()
        with pytest.raises(redis.ResponseError, match="KEEP must be at least 300"):
            lock.acquire(blocking=blocking, timeout=5)
        assert time.monotonic() - t0 < 1, "refused up front, not after a wait"
        assert not lock.held
    other.release()
    # Free: refused all the same (no grant that runs out at once).
    with pytest.raises(redis.ResponseError, match="at least 300"):
        Lock(r, "k", ttl=0.1).acquire()
    assert r.exists("k") == 0
    # Without renewal a short lease is what was asked for.
    assert Lock(r, "k", ttl=0.1, renew=False).acquire() is not None


def test_a_raising_on_lost_is_logged_and_the_others_are_still_watched(r, caplog):
    def boom(hold):
        raise RuntimeError("handler failed")

    lost = Lock(r, "a", ttl=0.6, on_lost=boom)
    kept = Lock(r, "b", ttl=0.6)
    assert lost.acquire() and kept.acquire()
    with caplog.at_level(logging.ERROR, logger="padlock"):
        r.delete("a")
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and "handler failed" not in caplog.text:
            time.sleep(0.05)
    assert "on_lost callback of a raised" in caplog.text and "RuntimeError: handler failed" in caplog.text
    time.sleep(1)
    assert kept.held and r.exists("b"), "the other hold is still watched"
    kept.release()


def test_async_ttl_below_the_floor_is_refused_before_waiting(server):
    import asyncio

    import redis.asyncio as aredis

    async def go():
        c = aredis.Redis(port=server.port)
        try:
            with pytest.raises(redis.ResponseError, match="at least 300"):
                await aio.Lock(c, "k", ttl=0.1).acquire()
        finally:
            await c.aclose()
    asyncio.run(go())


def test_holds_left_over_are_bounded_in_number_and_time():
    # A holder never seen again (a task's, an object's) leaves its leftover
    # behind: expired ones and, past the bound, the oldest are dropped.
    from padlock import _holders

    counts = _holders._Counts()
    for i in range(_holders.LEFT_MAX + 5):
        counts.left_over(f"k{i}", "h", ["LOCK.RELEASE", f"k{i}", "h"], 1.0)
    assert len(counts._left) == _holders.LEFT_MAX
    assert counts.leftover("k0", "h") is None  # the oldest went first
    last = _holders.LEFT_MAX + 4
    assert counts.leftover(f"k{last}", "h") == ["LOCK.RELEASE", f"k{last}", "h"]
    counts.left_over("old", "h", ["LOCK.RELEASE", "old", "h"], 1.0)
    counts._left[("old", "h")] = (counts._left[("old", "h")][0], 0.0)  # its time is up
    assert counts.leftover("old", "h") is None
