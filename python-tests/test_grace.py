"""docs/commands.md, Durability — restart grace (`restart-grace-ms`): after the module
loads, free locks and permits are refused with -TRYAGAIN (BLOCK waits), and
EXTEND of a missing entry re-creates it for its holder."""

import time

import pytest
import redis

from conftest import Background, wait_for
from test_locks import info
from test_semaphores import sinfo


@pytest.fixture
def grace_server(make_server):
    return make_server(module_args=["restart-grace-ms", "3000"])


def test_off_by_default(r):
    assert r.config_get("padlock.restart-grace-ms") == {"padlock.restart-grace-ms": "0"}
    assert r.execute_command("LOCK.ACQUIRE", "k", "h", 1000) > 0


def test_free_lock_refused_during_grace(grace_server):
    r = grace_server.client()
    with pytest.raises(redis.ResponseError, match="TRYAGAIN"):
        r.execute_command("LOCK.ACQUIRE", "k", "h", 1000)
    with pytest.raises(redis.ResponseError, match="TRYAGAIN"):
        r.execute_command("LOCK.MACQUIRE", 2, "a", "b", "h", 1000)
    with pytest.raises(redis.ResponseError, match="TRYAGAIN"):
        r.execute_command("SEM.ACQUIRE", "s", "h", 2, 1000)
    assert r.dbsize() == 0


def test_extend_recreates_lock_for_its_holder(grace_server):
    r = grace_server.client()
    assert r.execute_command("LOCK.EXTEND", "k", "worker", 10000) == 1
    i = info(r, "k")
    assert (i["holder"], i["count"]) == (b"worker", 1) and i["ttl"] > 9000
    f = i["fence"]
    assert r.execute_command("LOCK.ACQUIRE", "k", "worker", 10000) == f, "reentry is not a free lock"
    assert r.execute_command("LOCK.ACQUIRE", "k", "other", 10000) is None
    with pytest.raises(redis.ResponseError, match="^NOTHELD"):
        r.execute_command("LOCK.REENTER", "missing", "worker", 1000)


def test_extend_recreates_semaphore_permits(grace_server):
    r = grace_server.client()
    assert r.execute_command("SEM.EXTEND", "s", "a", 10000, "PERMITS", 2) == 1
    assert r.execute_command("SEM.EXTEND", "s", "b", 10000) == 1
    i = sinfo(r, "s")
    assert (i["limit"], i["used"]) == (3, 3), "limit: the permits re-created so far"
    assert {h: v[0] for h, v in i["holders"].items()} == {b"a": 2, b"b": 1}


def test_block_waits_out_the_grace(grace_server):
    r = grace_server.client()
    w = Background(grace_server, "LOCK.ACQUIRE", "k", "h", 1000, "BLOCK", 0)
    assert wait_for(lambda: r.info("padlock")["padlock_blocked_clients"] == 1)
    assert w.result(timeout=10) > 0, "served when the grace ended"
    assert info(r, "k")["holder"] == b"h"
    assert r.execute_command("LOCK.ACQUIRE", "k2", "h", 1000) > 0, "grace over"


def test_auto_uses_each_requests_ttl(make_server):
    s = make_server(module_args=["restart-grace-ms", "auto"])
    r = s.client()
    assert r.config_get("padlock.restart-grace-ms")["padlock.restart-grace-ms"] == "auto"
    with pytest.raises(redis.ResponseError, match="TRYAGAIN"):
        r.execute_command("LOCK.ACQUIRE", "k", "h", 60000)
    time.sleep(0.05)
    assert r.execute_command("LOCK.ACQUIRE", "k", "h", 10) > 0, "a 10 ms holder cannot still be working"


def test_config_set(r):
    r.config_set("padlock.restart-grace-ms", "auto")
    assert r.config_get("padlock.restart-grace-ms")["padlock.restart-grace-ms"] == "auto"
    r.config_set("padlock.restart-grace-ms", "250")
    assert r.config_get("padlock.restart-grace-ms")["padlock.restart-grace-ms"] == "250"
    with pytest.raises(redis.ResponseError):
        r.config_set("padlock.restart-grace-ms", "later")
    r.config_set("padlock.restart-grace-ms", "0")


def test_an_operator_sees_the_grace_and_ends_it(make_server):
    """The grace is logged when it starts and ends, INFO padlock shows it
    (grace_active, grace_left_ms), and CONFIG SET ... 0 ends it at once:
    the waiter it held back is served then, not at the grace's end."""
    s = make_server(module_args=["restart-grace-ms", "auto"])
    r = s.client()
    info = r.info("padlock")
    assert info["padlock_grace_active"] == 1 and info["padlock_grace_left_ms"] > 0
    assert wait_for(lambda: "restart grace running" in s.tail(200), timeout=3)
    w = Background(s, "LOCK.ACQUIRE", "k", "h", 60000, "BLOCK", 10000)
    time.sleep(0.2)
    assert not w.done(), "held back by the grace"
    t0 = time.time()
    r.config_set("padlock.restart-grace-ms", 0)
    assert w.result() > 0 and time.time() - t0 < 1, "served as soon as the grace ended"
    info = r.info("padlock")
    assert info["padlock_grace_active"] == 0 and info["padlock_grace_left_ms"] == 0
    assert wait_for(lambda: "restart grace ended" in s.tail(200), timeout=3)
