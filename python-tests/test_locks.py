"""docs/commands.md, Locks — LOCK.ACQUIRE / REENTER / RELEASE / EXTEND / INFO /
MACQUIRE / MRELEASE, and the lock key behaving like any Redis key."""

import time

import pytest
import redis

from conftest import wait_for


def info(r, key):
    raw = r.execute_command("LOCK.INFO", key)
    if raw is None:
        return None
    if isinstance(raw, dict):
        return {k.decode() if isinstance(k, bytes) else k: v for k, v in raw.items()}
    return {raw[i].decode(): raw[i + 1] for i in range(0, len(raw), 2)}


def test_acquire_free_key_returns_fence(r):
    fence = r.execute_command("LOCK.ACQUIRE", "k", "h1", 5000)
    assert isinstance(fence, int) and fence > 0
    i = info(r, "k")
    assert i["holder"] == b"h1" and i["count"] == 1 and i["fence"] == fence
    assert 4900 <= i["ttl"] <= 5000
    assert i["waiters"] == 0
    assert 4900 <= r.pttl("k") <= 5000


def test_reentry_keeps_fence_counts_and_resets_lease(r):
    f1 = r.execute_command("LOCK.ACQUIRE", "k", "h1", 1000)
    f2 = r.execute_command("LOCK.ACQUIRE", "k", "h1", 60000)
    assert f1 == f2
    i = info(r, "k")
    assert i["count"] == 2
    assert r.pttl("k") > 59000


def test_other_holder_gets_nil_and_changes_nothing(r):
    f = r.execute_command("LOCK.ACQUIRE", "k", "h1", 5000)
    assert r.execute_command("LOCK.ACQUIRE", "k", "h2", 60000) is None
    i = info(r, "k")
    assert (i["holder"], i["count"], i["fence"]) == (b"h1", 1, f)
    assert r.pttl("k") <= 5000


def test_wrongtype(r):
    r.set("s", "v")
    for cmd in (["LOCK.ACQUIRE", "s", "h", 100], ["LOCK.REENTER", "s", "h", 100],
                ["LOCK.RELEASE", "s", "h"], ["LOCK.EXTEND", "s", "h", 100],
                ["LOCK.INFO", "s"], ["LOCK.MACQUIRE", 1, "s", "h", 100],
                ["LOCK.MRELEASE", 1, "s", "h"]):
        with pytest.raises(redis.ResponseError, match="^WRONGTYPE"):
            r.execute_command(*cmd)
    assert r.get("s") == b"v"


def test_reenter_only_when_held(r):
    with pytest.raises(redis.ResponseError, match="^NOTHELD"):
        r.execute_command("LOCK.REENTER", "k", "h1", 1000)
    assert not r.exists("k"), "REENTER never acquires a free lock"
    f = r.execute_command("LOCK.ACQUIRE", "k", "h1", 1000)
    assert r.execute_command("LOCK.REENTER", "k", "h1", 60000) == 2
    assert r.execute_command("LOCK.REENTER", "k", "h1", 60000) == 3
    assert r.pttl("k") > 59000
    with pytest.raises(redis.ResponseError, match="^NOTHELD"):
        r.execute_command("LOCK.REENTER", "k", "h2", 1000)
    assert info(r, "k")["count"] == 3 and info(r, "k")["fence"] == f


def test_release_counts_down_then_frees(r):
    r.execute_command("LOCK.ACQUIRE", "k", "h1", 5000)
    r.execute_command("LOCK.ACQUIRE", "k", "h1", 5000)
    assert r.execute_command("LOCK.RELEASE", "k", "h1") == 1
    assert info(r, "k")["count"] == 1
    assert r.execute_command("LOCK.RELEASE", "k", "h1") == 0
    assert not r.exists("k")
    assert info(r, "k") is None


@pytest.mark.parametrize("case", ["never", "other", "expired"])
def test_release_not_held(r, case):
    if case == "other":
        r.execute_command("LOCK.ACQUIRE", "k", "h2", 5000)
    if case == "expired":
        r.execute_command("LOCK.ACQUIRE", "k", "h1", 50)
        time.sleep(0.1)
    before = info(r, "k")
    with pytest.raises(redis.ResponseError, match="^NOTHELD"):
        r.execute_command("LOCK.RELEASE", "k", "h1")
    assert info(r, "k") == before or (before and info(r, "k")["holder"] == before["holder"])


def test_extend_resets_lease_only(r):
    r.execute_command("LOCK.ACQUIRE", "k", "h1", 200)
    r.execute_command("LOCK.ACQUIRE", "k", "h1", 200)
    assert r.execute_command("LOCK.EXTEND", "k", "h1", 60000) == 1
    assert r.pttl("k") > 59000
    assert info(r, "k")["count"] == 2
    with pytest.raises(redis.ResponseError, match="^NOTHELD"):
        r.execute_command("LOCK.EXTEND", "k", "h2", 60000)
    with pytest.raises(redis.ResponseError, match="^NOTHELD"):
        r.execute_command("LOCK.EXTEND", "nokey", "h1", 60000)
    assert not r.exists("nokey")


def test_lease_expiry_frees_the_lock(r):
    r.execute_command("LOCK.ACQUIRE", "k", "h1", 80)
    assert wait_for(lambda: not r.exists("k"), timeout=2)
    with pytest.raises(redis.ResponseError, match="^NOTHELD"):
        r.execute_command("LOCK.EXTEND", "k", "h1", 1000)
    assert r.execute_command("LOCK.ACQUIRE", "k", "h2", 1000) > 0


def test_info_resp3_is_a_map(r3):
    r3.execute_command("LOCK.ACQUIRE", "k", "h1", 5000)
    raw = r3.execute_command("LOCK.INFO", "k")
    assert isinstance(raw, dict)
    assert set(raw) == {b"holder", b"count", b"fence", b"ttl", b"waiters", b"keep", b"queue"}
    assert r3.execute_command("LOCK.INFO", "missing") is None


def test_info_resp2_is_flat(r):
    r.execute_command("LOCK.ACQUIRE", "k", "h1", 5000)
    raw = r.execute_command("LOCK.INFO", "k")
    assert isinstance(raw, list) and len(raw) == 14


def test_key_behaves_like_a_redis_key(r):
    f = r.execute_command("LOCK.ACQUIRE", "k", "h1", 5000)
    assert r.type("k") == b"pdlk-lock"
    assert r.pexpire("k", 100000)
    assert r.pttl("k") > 99000
    assert info(r, "k")["ttl"] > 99000, "the lease is the key's expiry"
    assert list(r.scan_iter(_type="pdlk-lock")) == [b"k"]
    assert r.object("idletime", "k") >= 0
    assert r.memory_usage("k") > 0
    assert r.copy("k", "k2")
    assert info(r, "k2")["fence"] == f and info(r, "k2")["holder"] == b"h1"
    assert r.pttl("k2") > 0
    r.rename("k2", "k3")
    assert info(r, "k3")["holder"] == b"h1" and not r.exists("k2")
    assert r.delete("k") == 1
    assert r.execute_command("LOCK.ACQUIRE", "k", "h2", 1000) > f
    assert r.unlink("k3") == 1
    assert info(r, "k3") is None


def test_dump_restore_keeps_state(r):
    f = r.execute_command("LOCK.ACQUIRE", "k", "h1", 50000)
    r.execute_command("LOCK.ACQUIRE", "k", "h1", 50000)
    payload = r.dump("k")
    r.restore("k2", r.pttl("k"), payload)
    i = info(r, "k2")
    assert (i["holder"], i["count"], i["fence"]) == (b"h1", 2, f)
    assert 0 < r.pttl("k2") <= 50000


def test_fences_strictly_increase_across_keys(r):
    fences = [r.execute_command("LOCK.ACQUIRE", f"k{i}", "h", 5000) for i in range(50)]
    assert fences == sorted(fences) and len(set(fences)) == 50
    r.execute_command("LOCK.RELEASE", "k0", "h")
    assert r.execute_command("LOCK.ACQUIRE", "k0", "h", 5000) > fences[-1]


def test_fence_is_seeded_from_the_clock(r):
    """docs/commands.md, Words — seeded from `unix_ms << 10`, and below 2^53 so that a
    double (JavaScript, Lua, JSON) holds every fence exactly."""
    f = r.execute_command("LOCK.ACQUIRE", "k", "h", 5000)
    now_ms = int(time.time() * 1000)
    assert abs((f >> 10) - now_ms) < 60000
    assert 0 < f < 2**53
    g = r.execute_command("LOCK.ACQUIRE", "k2", "h", 5000)
    assert float(g) > float(f), "two fences of one millisecond differ as doubles"


def test_binary_safe_holders_and_keys(r):
    key, holder = b"k\x00\r\n\xff", b"h\x00\r\n\xfe"
    f = r.execute_command("LOCK.ACQUIRE", key, holder, 5000)
    assert info(r, key)["holder"] == holder
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("LOCK.RELEASE", key, b"other\n")
    msg = str(e.value)
    assert msg.startswith("NOTHELD")
    assert "\\x00" in msg and "\\x0d\\x0a" in msg and "\\xff" in msg and "other\\x0a" in msg
    assert r.execute_command("LOCK.ACQUIRE", key, holder, 5000) == f
    assert r.execute_command("LOCK.RELEASE", key, holder) == 1


# ---- multi-key --------------------------------------------------------------

def test_macquire_all_keys_in_order(r):
    fences = r.execute_command("LOCK.MACQUIRE", 3, "a", "b", "c", "h", 5000)
    assert len(fences) == 3 and fences == sorted(fences)
    for k, f in zip("abc", fences):
        assert info(r, k)["fence"] == f and r.pttl(k) > 4000


def test_macquire_all_or_nothing(r):
    fb = r.execute_command("LOCK.ACQUIRE", "b", "other", 5000)
    assert r.execute_command("LOCK.MACQUIRE", 3, "a", "b", "c", "h", 5000) is None
    assert not r.exists("a") and not r.exists("c")
    assert info(r, "b")["fence"] == fb and info(r, "b")["count"] == 1


def test_macquire_reenters_own_keys(r):
    fa = r.execute_command("LOCK.ACQUIRE", "a", "h", 5000)
    fences = r.execute_command("LOCK.MACQUIRE", 2, "a", "b", "h", 5000)
    assert fences[0] == fa and fences[1] > fa
    assert info(r, "a")["count"] == 2


def test_macquire_wrongtype_changes_nothing(r):
    r.set("b", "x")
    with pytest.raises(redis.ResponseError, match="^WRONGTYPE"):
        r.execute_command("LOCK.MACQUIRE", 2, "a", "b", "h", 5000)
    assert not r.exists("a")


def test_macquire_duplicate_keys(r):
    with pytest.raises(redis.ResponseError, match="^duplicate key"):
        r.execute_command("LOCK.MACQUIRE", 2, "a", "a", "h", 5000)
    assert not r.exists("a")


def test_mrelease_all_or_nothing(r):
    r.execute_command("LOCK.MACQUIRE", 2, "a", "b", "h", 5000)
    r.execute_command("LOCK.ACQUIRE", "a", "h", 5000)
    r.execute_command("LOCK.ACQUIRE", "c", "other", 5000)
    with pytest.raises(redis.ResponseError, match="^NOTHELD 'c'"):
        r.execute_command("LOCK.MRELEASE", 3, "a", "b", "c", "h")
    assert info(r, "a")["count"] == 2 and info(r, "b")["count"] == 1
    assert r.execute_command("LOCK.MRELEASE", 2, "a", "b", "h") == [1, 0]
    assert info(r, "a")["count"] == 1 and not r.exists("b")


def test_multi_key_commands_declare_their_keys(r):
    keys = lambda *a: [k.decode() if isinstance(k, bytes) else k for k in r.command_getkeys(*a)]
    assert keys("LOCK.MACQUIRE", 2, "a", "b", "h", 100) == ["a", "b"]
    assert keys("LOCK.MRELEASE", 3, "x", "y", "z", "h") == ["x", "y", "z"]
    assert keys("LOCK.ACQUIRE", "k", "h", 100) == ["k"]
    assert keys("LOCK.INFO", "k") == ["k"]


def test_watch_sees_changes_not_refusals(server):
    r, other = server.client(), server.client()
    r.execute_command("LOCK.ACQUIRE", "k", "a", 5000)
    r.execute_command("SEM.ACQUIRE", "s", "a", 1, 5000)
    with r.pipeline() as p:
        p.watch("k", "s")
        assert other.execute_command("LOCK.ACQUIRE", "k", "b", 5000) is None
        assert other.execute_command("SEM.ACQUIRE", "s", "b", 1, 5000) is None
        p.multi()
        p.ping()
        assert p.execute() == [True], "a refused acquire changes nothing"
    with r.pipeline() as p:
        p.watch("k")
        other.execute_command("LOCK.EXTEND", "k", "a", 9000)
        p.multi()
        p.ping()
        with pytest.raises(redis.WatchError):
            p.execute()
