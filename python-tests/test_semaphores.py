"""docs/commands.md, Semaphores — SEM.ACQUIRE / RELEASE / EXTEND / INFO, per-holder
leases, persistence and replication of semaphores."""

import time

import pytest
import redis

from conftest import wait_for
from test_durability import start_pair


def holders_info(r, command, key):
    """SEM.INFO / RWLOCK.INFO as a dict (RESP2 or RESP3), `holders` as a
    dict of lists; None for an absent key."""
    raw = r.execute_command(command, key)
    if raw is None:
        return None
    if isinstance(raw, list):
        raw = {raw[i]: raw[i + 1] for i in range(0, len(raw), 2)}
    out = {k.decode() if isinstance(k, bytes) else k: v for k, v in raw.items()}
    h = out["holders"]
    if isinstance(h, list):
        h = {h[i]: h[i + 1] for i in range(0, len(h), 2)}
    out["holders"] = {k: list(v) for k, v in h.items()}
    return out


def sinfo(r, key):
    return holders_info(r, "SEM.INFO", key)


def test_acquire_within_limit(r):
    assert r.execute_command("SEM.ACQUIRE", "s", "a", 3, 5000, "PERMITS", 2) == 2
    assert r.execute_command("SEM.ACQUIRE", "s", "b", 3, 5000, "PERMITS", 2) is None
    assert r.execute_command("SEM.ACQUIRE", "s", "b", 3, 5000) == 1
    i = sinfo(r, "s")
    assert (i["limit"], i["used"], i["available"], i["waiters"]) == (3, 3, 0, 0)
    assert set(i["holders"]) == {b"a", b"b"}
    assert i["holders"][b"a"][0] == 2 and 4000 < i["holders"][b"a"][1] <= 5000
    assert r.type("s") == b"pdlk-sema"


def test_reentrant_adds_permits_and_resets_lease(r):
    r.execute_command("SEM.ACQUIRE", "s", "a", 5, 1000)
    assert r.execute_command("SEM.ACQUIRE", "s", "a", 5, 60000, "PERMITS", 3) == 4
    i = sinfo(r, "s")
    assert i["holders"][b"a"][0] == 4 and i["holders"][b"a"][1] > 59000


def test_limit_stored_only_on_success(r):
    r.execute_command("SEM.ACQUIRE", "s", "a", 2, 5000, "PERMITS", 2)
    assert r.execute_command("SEM.ACQUIRE", "s", "b", 10, 5000, "PERMITS", 9) is None
    assert sinfo(r, "s")["limit"] == 2, "a failed request changes nothing"
    assert r.execute_command("SEM.ACQUIRE", "s", "b", 10, 5000, "PERMITS", 8) == 8
    assert sinfo(r, "s")["limit"] == 10


def test_lower_limit_takes_nothing_away(r):
    r.execute_command("SEM.ACQUIRE", "s", "a", 5, 5000, "PERMITS", 4)
    assert r.execute_command("SEM.ACQUIRE", "s", "b", 2, 5000) is None
    i = sinfo(r, "s")
    assert i["holders"][b"a"][0] == 4 and i["limit"] == 5 and i["used"] == 4


def test_permits_over_limit_is_an_error(r):
    with pytest.raises(redis.ResponseError, match="PERMITS"):
        r.execute_command("SEM.ACQUIRE", "s", "a", 2, 5000, "PERMITS", 3)
    assert not r.exists("s")


def test_release(r):
    r.execute_command("SEM.ACQUIRE", "s", "a", 5, 5000, "PERMITS", 4)
    r.execute_command("SEM.ACQUIRE", "s", "b", 5, 5000)
    assert r.execute_command("SEM.RELEASE", "s", "a", "PERMITS", 1) == 3
    with pytest.raises(redis.ResponseError, match="^NOTHELD"):
        r.execute_command("SEM.RELEASE", "s", "a", "PERMITS", 4)
    with pytest.raises(redis.ResponseError, match="^NOTHELD"):
        r.execute_command("SEM.RELEASE", "s", "nobody")
    assert sinfo(r, "s")["used"] == 4
    assert r.execute_command("SEM.RELEASE", "s", "a") == 0
    assert b"a" not in sinfo(r, "s")["holders"]
    assert r.execute_command("SEM.RELEASE", "s", "b") == 0
    assert not r.exists("s"), "the key goes with its last holder"
    with pytest.raises(redis.ResponseError, match="^NOTHELD"):
        r.execute_command("SEM.RELEASE", "missing", "a")


def test_extend(r):
    r.execute_command("SEM.ACQUIRE", "s", "a", 5, 200)
    assert r.execute_command("SEM.EXTEND", "s", "a", 60000) == 1
    assert r.execute_command("SEM.EXTEND", "s", "a", 60000, "PERMITS", 3) == 1
    assert sinfo(r, "s")["holders"][b"a"] == [1, pytest.approx(60000, abs=1000)]
    assert r.pttl("s") > 59000
    with pytest.raises(redis.ResponseError, match="^NOTHELD"):
        r.execute_command("SEM.EXTEND", "s", "b", 1000)
    with pytest.raises(redis.ResponseError, match="^NOTHELD"):
        r.execute_command("SEM.EXTEND", "missing", "b", 1000)
    assert not r.exists("missing")


def test_info_absent_and_resp3(r3):
    assert r3.execute_command("SEM.INFO", "nope") is None
    r3.execute_command("SEM.ACQUIRE", "s", "a", 5, 5000)
    raw = r3.execute_command("SEM.INFO", "s")
    assert isinstance(raw, dict) and isinstance(raw[b"holders"], dict)
    assert set(raw) == {b"limit", b"used", b"available", b"holders", b"waiters", b"keep", b"queue"}


def test_holders_expire_one_by_one(r):
    r.execute_command("SEM.ACQUIRE", "s", "short", 2, 150)
    r.execute_command("SEM.ACQUIRE", "s", "long", 2, 3000)
    assert r.execute_command("SEM.ACQUIRE", "s", "third", 2, 3000) is None
    assert r.pttl("s") > 2500, "the key lives as long as its latest holder"
    time.sleep(0.3)
    i = sinfo(r, "s")
    assert list(i["holders"]) == [b"long"] and i["used"] == 1 and i["available"] == 1
    assert r.execute_command("SEM.ACQUIRE", "s", "third", 2, 3000) == 1
    with pytest.raises(redis.ResponseError, match="^NOTHELD"):
        r.execute_command("SEM.RELEASE", "s", "short")


def test_key_disappears_when_all_leases_ran_out(r):
    r.execute_command("SEM.ACQUIRE", "s", "a", 2, 80)
    r.execute_command("SEM.ACQUIRE", "s", "b", 2, 120)
    assert wait_for(lambda: not r.exists("s"), timeout=3)
    assert sinfo(r, "s") is None


def test_lock_and_semaphore_keys_never_mix(r):
    r.execute_command("LOCK.ACQUIRE", "l", "h", 5000)
    r.execute_command("SEM.ACQUIRE", "s", "h", 2, 5000)
    for cmd in (["SEM.ACQUIRE", "l", "h", 2, 100], ["SEM.RELEASE", "l", "h"],
                ["SEM.EXTEND", "l", "h", 100], ["SEM.INFO", "l"]):
        with pytest.raises(redis.ResponseError, match="^WRONGTYPE"):
            r.execute_command(*cmd)
    for cmd in (["LOCK.ACQUIRE", "s", "h", 100], ["LOCK.INFO", "s"], ["LOCK.RELEASE", "s", "h"]):
        with pytest.raises(redis.ResponseError, match="^WRONGTYPE"):
            r.execute_command(*cmd)
    r.set("str", "v")
    with pytest.raises(redis.ResponseError, match="^WRONGTYPE"):
        r.execute_command("SEM.ACQUIRE", "str", "h", 2, 100)


def populate(r):
    r.execute_command("SEM.ACQUIRE", "s", "a", 5, 60000, "PERMITS", 2)
    r.execute_command("SEM.ACQUIRE", "s", b"b\x00\r\n", 5, 30000, "PERMITS", 3)
    r.execute_command("SEM.ACQUIRE", "t", "x", 1, 50000)


def comparable(i):
    return (i["limit"], i["used"], {h: v[0] for h, v in i["holders"].items()})


def test_debug_reload(r):
    populate(r)
    before = {k: sinfo(r, k) for k in ("s", "t")}
    r.execute_command("DEBUG", "RELOAD")
    for k in ("s", "t"):
        after = sinfo(r, k)
        assert comparable(after) == comparable(before[k])
        for h, (_, ttl) in after["holders"].items():
            assert ttl <= before[k]["holders"][h][1]


@pytest.mark.parametrize("preamble", ["yes", "no"])
def test_aof_restart(make_server, preamble):
    extra = ["--appendonly", "yes", "--appendfsync", "always", "--aof-use-rdb-preamble", preamble]
    s = make_server(extra=extra)
    r = s.client()
    populate(r)
    r.bgrewriteaof()
    assert wait_for(lambda: r.info("persistence")["aof_rewrite_in_progress"] == 0
                    and r.info("persistence")["aof_rewrite_scheduled"] == 0, timeout=10)
    r.execute_command("SEM.RELEASE", "s", "a", "PERMITS", 1)
    r.execute_command("SEM.ACQUIRE", "u", "y", 3, 40000, "PERMITS", 3)
    before = {k: comparable(sinfo(r, k)) for k in ("s", "t", "u")}
    s.kill()
    s.start()
    r = s.client()
    assert {k: comparable(sinfo(r, k)) for k in ("s", "t", "u")} == before
    assert sinfo(r, "s")["holders"][b"a"][1] <= 60000


def test_replica_converges(make_server):
    master, replica, m, rep = start_pair(make_server)
    populate(m)
    m.execute_command("SEM.ACQUIRE", "e", "short", 3, 100)
    m.execute_command("SEM.ACQUIRE", "e", "long", 3, 60000)
    m.execute_command("SEM.RELEASE", "s", "a", "PERMITS", 1)
    m.execute_command("SEM.EXTEND", "t", "x", 90000)
    m.wait(1, 2000)
    for k in ("s", "t", "e"):
        assert comparable(sinfo(rep, k)) == comparable(sinfo(m, k)), k
    time.sleep(0.2)
    # The replica hides the expired holder by itself...
    assert list(sinfo(rep, "e")["holders"]) == [b"long"]
    # ...and removes it when the master's write sends the effect.
    m.execute_command("SEM.ACQUIRE", "e", "new", 3, 60000)
    m.wait(1, 2000)
    assert comparable(sinfo(rep, "e")) == comparable(sinfo(m, "e")) == (3, 2, {b"long": 1, b"new": 1})
    assert abs(rep.pttl("e") - m.pttl("e")) < 100


def test_counters(r):
    r.execute_command("SEM.ACQUIRE", "s", "a", 1, 5000)
    r.execute_command("SEM.ACQUIRE", "s", "b", 1, 5000)
    r.execute_command("SEM.EXTEND", "s", "a", 5000)
    r.execute_command("SEM.RELEASE", "s", "a")
    i = r.info("padlock")
    assert (i["padlock_sem_acquired"], i["padlock_sem_contended"], i["padlock_sem_extended"],
            i["padlock_sem_released"]) == (1, 1, 1, 1)
    assert i["padlock_semaphores"] == 0


def test_memory_usage_per_holder(r, record_property):
    sizes = {}
    for n in (1, 100, 10000):
        key = f"m{n}"
        pipe = r.pipeline(transaction=False)
        for i in range(n):
            pipe.execute_command("SEM.ACQUIRE", key, f"holder-{i:08d}", 100000, 60000)
        pipe.execute()
        sizes[n] = r.memory_usage(key, samples=0)
        assert sinfo(r, key)["used"] == n
    record_property("memory_usage", sizes)
    print(f"MEMORY USAGE by holders: {sizes}")
    per_holder = (sizes[10000] - sizes[100]) / 9900
    assert 20 < per_holder < 300, sizes


def test_copy_and_dump_restore(r):
    r.execute_command("SEM.ACQUIRE", "s", "a", 4, 60000, "PERMITS", 3)
    r.execute_command("SEM.ACQUIRE", "s", "b", 4, 30000)
    assert r.copy("s", "s2")
    r.restore("s3", r.pttl("s"), r.dump("s"))
    for k in ("s2", "s3"):
        assert comparable(sinfo(r, k)) == comparable(sinfo(r, "s")) == (4, 4, {b"a": 3, b"b": 1})
        assert 0 < r.pttl(k) <= 60000
    assert r.execute_command("SEM.RELEASE", "s2", "a") == 0
    assert sinfo(r, "s")["used"] == 4, "copies are independent"
