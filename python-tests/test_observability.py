"""docs/commands.md, Observability — INFO padlock counters and gauges, keyspace
notifications of the module class; ACL categories and key patterns."""

import time

import pytest
import redis

from conftest import wait_for


def stats(r):
    return r.info("padlock")


def test_info_counters(r):
    before = stats(r)
    r.execute_command("LOCK.ACQUIRE", "k", "h", 5000)
    r.execute_command("LOCK.ACQUIRE", "k", "h", 5000)
    r.execute_command("LOCK.REENTER", "k", "h", 5000)
    r.execute_command("LOCK.ACQUIRE", "k", "other", 5000)
    r.execute_command("LOCK.EXTEND", "k", "h", 5000)
    r.execute_command("LOCK.RELEASE", "k", "h")
    after = stats(r)
    d = lambda f: after[f"padlock_{f}"] - before.get(f"padlock_{f}", 0)
    assert d("acquired") == 1 and d("reentered") == 2 and d("contended") == 1
    assert d("extended") == 1 and d("released") == 1
    assert after["padlock_locks"] == 1
    assert after["padlock_last_fence"] > 0


def test_expired_counter_and_gauge(r):
    r.execute_command("LOCK.ACQUIRE", "k", "h", 30)
    assert stats(r)["padlock_locks"] == 1
    assert wait_for(lambda: stats(r)["padlock_expired"] == 1 and not r.exists("k"), timeout=3)
    assert wait_for(lambda: stats(r)["padlock_locks"] == 0, timeout=3)


def test_keyspace_notifications(server):
    r = server.client()
    r.config_set("notify-keyspace-events", "Kdx")
    p = server.client().pubsub()
    p.psubscribe("__keyspace@0__:*")
    p.get_message(timeout=1)
    r.execute_command("LOCK.ACQUIRE", "k", "h", 5000)
    r.execute_command("LOCK.RELEASE", "k", "h")
    r.execute_command("LOCK.ACQUIRE", "e", "h", 30)
    seen = []
    deadline = time.time() + 3
    while time.time() < deadline and ("e", "lock.expired") not in seen:
        m = p.get_message(timeout=0.1)
        if m and m["type"] == "pmessage":
            seen.append((m["channel"].decode().split(":", 1)[1], m["data"].decode()))
    assert ("k", "lock.acquire") in seen
    assert ("k", "lock.release") in seen
    assert ("e", "lock.acquire") in seen
    assert ("e", "lock.expired") in seen
    p.close()


def test_acl_key_patterns_apply(server):
    r = server.client()
    r.execute_command("ACL", "SETUSER", "app", "on", "nopass", "+@all", "~lock:*")
    app = server.client(username="app", password="x")
    assert app.execute_command("LOCK.ACQUIRE", "lock:1", "h", 1000) > 0
    with pytest.raises(redis.exceptions.NoPermissionError):
        app.execute_command("LOCK.ACQUIRE", "other", "h", 1000)
    with pytest.raises(redis.exceptions.NoPermissionError):
        app.execute_command("LOCK.MACQUIRE", 2, "lock:2", "other", "h", 1000)
    assert not r.exists("lock:2")


def test_acl_module_category(server):
    r = server.client()
    if b"padlock" not in r.execute_command("ACL", "CAT") and "padlock" not in r.execute_command("ACL", "CAT"):
        pytest.skip("this server cannot add module ACL categories")
    r.execute_command("ACL", "SETUSER", "app", "on", "nopass", "+@padlock", "~*")
    app = server.client(username="app", password="x")
    assert app.execute_command("LOCK.ACQUIRE", "k", "h", 1000) > 0
    with pytest.raises(redis.exceptions.NoPermissionError):
        app.set("k2", "v")
    # No permission, or (Redis 8: an internal command) unknown.
    with pytest.raises(redis.ResponseError, match="permission|unknown command"):
        app.execute_command("PADLOCK.LOCKSET", "k3", "h", 1, 1, 0)


def test_internal_commands_are_admin(server):
    r = server.client()
    if b"padlock.lockset" not in r.execute_command("ACL", "CAT", "admin"):
        pytest.skip("this server gives module commands no ACL categories (Redis 7.0)")
    r.execute_command("ACL", "SETUSER", "app", "on", "nopass", "+@all", "-@admin", "~*")
    app = server.client(username="app", password="x")
    assert app.execute_command("LOCK.ACQUIRE", "k", "h", 1000) > 0
    with pytest.raises(redis.ResponseError, match="permission|unknown command"):
        app.execute_command("PADLOCK.LOCKSET", "k2", "forged", 1, 1, 0)
    assert not r.exists("k2")


def test_command_flags(r):
    info = r.execute_command("COMMAND", "INFO", "lock.acquire", "lock.info", "lock.macquire")
    flags = {name: {f.decode() if isinstance(f, bytes) else f for f in row["flags"]}
             for name, row in info.items()}
    assert {"write", "denyoom", "fast"} <= flags["lock.acquire"]
    assert {"readonly", "fast"} <= flags["lock.info"]
    assert "write" in flags["lock.macquire"]


def test_metrics_script_for_redis_exporter(r):
    """deploy/padlock-metrics.lua, as redis_exporter's --script runs it
    (EVAL script 0 0), returns every INFO padlock field as key/value."""
    import pathlib
    script = (pathlib.Path(__file__).resolve().parent.parent / "deploy" / "padlock-metrics.lua").read_text()
    r.execute_command("LOCK.ACQUIRE", "k", "h", 5000)
    r.execute_command("LOCK.ACQUIRE", "done", "h", 5000)
    r.execute_command("LOCK.RELEASE", "done", "h")
    flat = r.eval(script, 0, 0)
    got = {flat[i].decode(): float(flat[i + 1]) for i in range(0, len(flat), 2)}
    info = {k: v for k, v in r.info("padlock").items()}
    lines = {k for k in info if "_percentiles_usec_" in k}
    assert len(lines) == 6
    buckets = {k for k in info if "_buckets_usec_" in k}
    assert len(buckets) == 6
    want = ((set(info) - lines - buckets) | {f"{k}_{q}" for k in lines for q in ("p50", "p99", "p99_9")}
            | {f"{k}_{b}" for k in buckets for b in info[k]})
    assert set(got) == want
    assert got["padlock_hold_buckets_usec_lock_count"] == 1, "one hold ended"
    assert got["padlock_locks"] == 1 and got["padlock_acquired"] == info["padlock_acquired"]
    assert got["padlock_hold_percentiles_usec_lock_p50"] >= 1, "one hold ended"
