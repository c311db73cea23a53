"""docs/commands.md, Durability, replication — RDB, AOF (with and without the RDB
preamble), restarts with and without data, live replicas, promotion."""

import time

import pytest
import redis

from conftest import wait_for
from test_locks import info


def lock_state(r, key):
    i = info(r, key)
    return None if i is None else (i["holder"], i["count"], i["fence"])


def populate(r):
    f1 = r.execute_command("LOCK.ACQUIRE", "a", "h1", 60000)
    r.execute_command("LOCK.ACQUIRE", "a", "h1", 60000)
    f2 = r.execute_command("LOCK.ACQUIRE", b"b\x00\n", b"h\x00\r\n2", 30000)
    r.execute_command("LOCK.ACQUIRE", "gone", "h3", 30000)
    r.execute_command("LOCK.RELEASE", "gone", "h3")
    return max(f1, f2)


def test_debug_reload_keeps_state(r):
    top = populate(r)
    before = {k: lock_state(r, k) for k in ("a", b"b\x00\n")}
    pttl = r.pttl("a")
    r.execute_command("DEBUG", "RELOAD")
    assert {k: lock_state(r, k) for k in ("a", b"b\x00\n")} == before
    assert not r.exists("gone")
    assert 0 < r.pttl("a") <= pttl
    assert r.execute_command("LOCK.ACQUIRE", "c", "h", 1000) > top


def test_rdb_restart_keeps_state_and_never_a_longer_lease(make_server):
    s = make_server()
    r = s.client()
    top = populate(r)
    before = lock_state(r, "a")
    s.restart(save=True)
    time.sleep(0.3)
    r = s.client()
    assert lock_state(r, "a") == before
    assert r.pttl("a") <= 60000 - 300
    assert r.execute_command("LOCK.ACQUIRE", "c", "h", 1000) > top


@pytest.mark.parametrize("preamble", ["yes", "no"])
def test_aof_restart_with_rewrite_and_tail(make_server, preamble):
    extra = ["--appendonly", "yes", "--appendfsync", "always", "--aof-use-rdb-preamble", preamble]
    s = make_server(extra=extra)
    r = s.client()
    top = populate(r)
    r.bgrewriteaof()
    assert wait_for(lambda: r.info("persistence")["aof_rewrite_in_progress"] == 0
                    and r.info("persistence")["aof_rewrite_scheduled"] == 0, timeout=10)
    # The tail: written after the rewrite.
    r.execute_command("LOCK.RELEASE", "a", "h1")
    tail_fence = r.execute_command("LOCK.ACQUIRE", "t", "h4", 40000)
    r.execute_command("LOCK.EXTEND", b"b\x00\n", b"h\x00\r\n2", 50000)
    before = {k: lock_state(r, k) for k in ("a", b"b\x00\n", "t", "gone")}
    pttl_b = r.pttl(b"b\x00\n")
    s.kill()
    s.extra = extra
    s.start()
    r = s.client()
    after = {k: lock_state(r, k) for k in ("a", b"b\x00\n", "t", "gone")}
    assert after == before
    assert after["a"][1] == 1 and after["t"][2] == tail_fence
    assert 0 < r.pttl(b"b\x00\n") <= pttl_b
    assert r.execute_command("LOCK.ACQUIRE", "n", "h", 1000) > max(top, tail_fence)


def test_fences_increase_after_restart_without_data(make_server):
    s = make_server()
    r = s.client()
    fences = [r.execute_command("LOCK.ACQUIRE", f"k{i}", "h", 1000) for i in range(100)]
    s.restart(save=False)
    r = s.client()
    assert r.dbsize() == 0
    assert r.execute_command("LOCK.ACQUIRE", "k0", "h", 1000) > max(fences)


def start_pair(make_server, module_args=(), extra=()):
    """A master (with `module_args` and `extra` server arguments) and its
    replica, linked."""
    master = make_server(module_args=module_args, extra=["--repl-diskless-sync-delay", "0", *extra])
    replica = make_server(extra=["--replicaof", "127.0.0.1", str(master.port)])
    m, rep = master.client(), replica.client()
    assert wait_for(lambda: rep.info("replication")["master_link_status"] == "up", timeout=30)
    return master, replica, m, rep


def test_a_lower_max_holder_len_loses_no_hold(make_server):
    # Holds taken under a bound of 512 outlive an AOF restart under 100, on
    # a replica whose bound is 100 too, and their holders can still give
    # them back (a release stores no holder); only new holds obey 100.
    extra = ["--appendonly", "yes", "--appendfsync", "always", "--aof-use-rdb-preamble", "no"]
    master = make_server(module_args=("max-holder-len", "512"),
                         extra=["--repl-diskless-sync-delay", "0", *extra])
    replica = make_server(module_args=("max-holder-len", "100"),
                          extra=["--replicaof", "127.0.0.1", str(master.port)])
    m, rep = master.client(), replica.client()
    assert wait_for(lambda: rep.info("replication")["master_link_status"] == "up", timeout=30)
    h = "x" * 300
    f = m.execute_command("LOCK.ACQUIRE", "a", h, 60000, "ID", "r1")
    m.execute_command("LOCK.ACQUIRE", "a", h, 60000, "ID", "r2")
    assert m.execute_command("LOCK.RELEASE", "a", h, "ID", "r3") == 1
    m.execute_command("LOCK.ACQUIRE", "b", h, 60000)
    m.execute_command("SEM.ACQUIRE", "s", h, 3, 60000, "PERMITS", 2, "ID", "r4")
    assert m.execute_command("SEM.RELEASE", "s", h, "PERMITS", 1, "ID", "r5") == 1
    m.execute_command("RWLOCK.ACQUIRE", "w", h, "READ", 60000)
    m.execute_command("RWLOCK.ACQUIRE", "w", h, "READ", 60000)
    assert m.execute_command("RWLOCK.RELEASE", "w", h, "READ", "ID", "r6") == [1, 0]
    assert m.wait(1, 2000) == 1
    keys = ("a", "b", "s", "w")
    dumps = [m.dump(k) for k in keys]
    assert [rep.dump(k) for k in keys] == dumps
    m.config_set("padlock.max-holder-len", 100)
    master.kill()
    master.module_args = ("max-holder-len", "100")
    master.start()
    m = master.client()
    assert [m.dump(k) for k in keys] == dumps
    assert lock_state(m, "a") == (h.encode(), 1, f)
    # The releases' ids were remembered where they ran again.
    for r in (m, rep):
        assert r.info("padlock")["padlock_request_ids"] >= 6
    assert m.execute_command("LOCK.RELEASE", "a", h, "ID", "r3") == 1, "a resend replays"
    assert m.execute_command("LOCK.RELEASE", "a", h, "ID", "r7") == 0
    assert m.execute_command("LOCK.MRELEASE", 1, "b", h) == [0]
    assert m.execute_command("SEM.RELEASE", "s", h) == 0
    assert m.execute_command("RWLOCK.RELEASE", "w", h, "READ") == [0, 0]
    # Holding nothing now, the holder is too long for every command.
    for cmd in (["LOCK.ACQUIRE", "a", h, 1000], ["LOCK.EXTEND", "a", h, 1000],
                ["LOCK.RELEASE", "a", h], ["LOCK.MRELEASE", 1, "b", h], ["SEM.RELEASE", "s", h],
                ["RWLOCK.RELEASE", "w", h, "READ"], ["LOCK.CANCEL", "a", h, "r9"]):
        with pytest.raises(redis.ResponseError, match="^holder must be 1 to 100 bytes long$"):
            m.execute_command(*cmd)
    assert m.dbsize() == 0


def test_replica_ends_in_the_masters_state(make_server):
    master, replica, m, rep = start_pair(make_server)
    populate(m)
    m.execute_command("LOCK.EXTEND", "a", "h1", 90000)
    m.execute_command("LOCK.REENTER", "a", "h1", 90000)
    m.execute_command("LOCK.MACQUIRE", 2, "x", "y", "h9", 20000)
    m.execute_command("LOCK.MRELEASE", 1, "y", "h9")
    assert m.wait(1, 2000) == 1
    for k in ("a", b"b\x00\n", "gone", "x", "y"):
        assert lock_state(rep, k) == lock_state(m, k), k
        assert abs(rep.pttl(k) - m.pttl(k)) < 100, k
    assert lock_state(rep, "a")[1] == 3
    # Read-only commands answer on the replica; writes are refused.
    assert info(rep, "a")["ttl"] > 80000
    with pytest.raises(redis.ReadOnlyError):
        rep.execute_command("LOCK.ACQUIRE", "z", "h", 1000)


def test_expiry_on_master_reaches_replica(make_server):
    master, replica, m, rep = start_pair(make_server)
    m.execute_command("LOCK.ACQUIRE", "k", "h", 100)
    m.wait(1, 1000)
    assert wait_for(lambda: m.exists("k") == 0, timeout=3)
    assert wait_for(lambda: rep.execute_command("DBSIZE") == 0, timeout=3)


def test_promoted_replica_issues_larger_fences(make_server):
    master, replica, m, rep = start_pair(make_server)
    fences = [m.execute_command("LOCK.ACQUIRE", f"k{i}", "h", 60000) for i in range(20)]
    m.wait(1, 2000)
    master.stop()
    rep.execute_command("REPLICAOF", "NO", "ONE")
    f = rep.execute_command("LOCK.ACQUIRE", "new", "h", 1000)
    assert f > max(fences)
    assert lock_state(rep, "k19")[2] == fences[-1]
