"""docs/commands.md, Durability — the state commands (PADLOCK.LOCKSET/SEMSET/RWSET/POST)
are for the replication stream and the AOF only, and accept exactly the
states the loader accepts. A client (any user) gets an error or "unknown
command" and nothing changes; the master link and the AOF still apply them;
what the master sends carries absolute deadlines and the right fences; full
syncs (disk and diskless), partial resyncs and AOF restarts reach the
master's exact state."""

import os
import pathlib
import time

import pytest
import redis

from harness import resp

from conftest import wait_for
from test_durability import lock_state, populate, start_pair

EFFECTS = [
    ["PADLOCK.FENCEFLOOR", 2**52],
    ["PADLOCK.LOCKSET", "acct:1", "mallory", 1, 5, 0],
    ["PADLOCK.SEMSET", "pool", "mallory", 5, 2, 9999999999999],
    ["PADLOCK.RWSET", "rw", "mallory", 0, 1, 7, 9999999999999],
    ["PADLOCK.POST", "mb", 9999999999999, "forged 1"],
]
USERS = {
    "all-but-admin": ["+@all", "-@admin"],
    "write": ["+@write", "+@read", "+@connection"],
    "padlock": ["+@padlock", "+@connection"],
}


def aof_server(make_server, commands, module_args=(), subdir=None):
    """A server that loads `commands` from an AOF it finds at start (the
    old single-file form, which every server of the matrix takes over)."""
    from conftest import Server
    import tempfile
    d = pathlib.Path(tempfile.mkdtemp(prefix="padlock-aof-"))
    (d / "appendonly.aof").write_bytes(resp("SELECT", 0) + b"".join(resp(*c) for c in commands))
    return make_server(module_args=module_args, subdir=subdir,
                       extra=["--appendonly", "yes", "--appendfilename", "appendonly.aof",
                              "--dir", str(d)]), d


def snapshot(r):
    keys = sorted(r.keys("*"))
    return keys, [r.dump(k) for k in keys], r.info("padlock")["padlock_last_fence"]


def test_clients_cannot_run_effect_commands(server):
    r = server.client()
    r.execute_command("LOCK.ACQUIRE", "acct:1", "bob", 60000)
    users = {"default": r}
    cats = r.execute_command("ACL", "CAT")
    for name, rules in USERS.items():
        if name == "padlock" and b"padlock" not in cats and "padlock" not in cats:
            continue  # Redis 7.0: no module categories
        r.execute_command("ACL", "SETUSER", name, "on", "nopass", "~*", *rules)
        users[name] = server.client(username=name, password="x")
    before = snapshot(r)
    for name, c in users.items():
        for cmd in EFFECTS:
            with pytest.raises(redis.ResponseError) as e:
                c.execute_command(*cmd)
            msg = str(e.value)
            assert ("replication stream and the AOF only" in msg or "unknown command" in msg
                    or "permissions" in msg), (name, cmd, msg)
            # Inside Lua too.
            with pytest.raises(redis.ResponseError):
                c.eval("return redis.call(KEYS[1], unpack(ARGV))", 1, *[str(a) for a in cmd])
    assert snapshot(r) == before, "nothing changed"
    assert r.execute_command("LOCK.RELEASE", "acct:1", "bob") == 0, "bob still held it"


def test_redis8_hides_effect_commands(r):
    info = r.info("server")
    if "valkey_version" in info or int(info["redis_version"].split(".")[0]) < 8:
        pytest.skip("the internal command flag needs Redis 8.0")
    with pytest.raises(redis.ResponseError, match="unknown command"):
        r.execute_command(*EFFECTS[0])
    from test_docs import raw
    assert raw(r, "COMMAND", "INFO", "padlock.lockset") == [None]
    assert raw(r, "COMMAND", "DOCS", "padlock.lockset") == []


def test_aof_applies_mailbox_posts(make_server):
    """A post is one effect: the element appended, the list's absolute
    expiry set; a mailbox that became another type drops it."""
    s, _ = aof_server(make_server, [
        ["PADLOCK.POST", "mb", 9999999999999, "r1 5"],
        ["PADLOCK.POST", "mb", 9999999999998, "r2 nil"],
        ["SET", "str", "1"],
        ["PADLOCK.POST", "str", 9999999999999, "r3 7"],
        ["PADLOCK.POST", "bad", "soon", "r4 7"],
    ])
    r = s.client()
    assert r.lrange("mb", 0, -1) == [b"r1 5", b"r2 nil"]
    assert r.pexpiretime("mb") == 9999999999998
    assert r.get("str") == b"1"
    assert r.exists("bad") == 0


def test_aof_applies_effects_and_refuses_what_cannot_load(make_server):
    big = 2**63 - 1
    s, d = aof_server(make_server, [
        ["PADLOCK.LOCKSET", "ok", "h", 2, 1234567, 9999999999999],
        ["PADLOCK.LOCKSET", "fence-max", "h", 1, 2**53 - 1, 0],
        ["PADLOCK.LOCKSET", "fence-big", "h", 1, big, 0],
        ["PADLOCK.LOCKSET", "fence-2^53", "h", 1, 2**53, 0],
        ["PADLOCK.LOCKSET", "count-big", "h", big, 5, 0],
        ["PADLOCK.LOCKSET", "count-0", "h", 0, 5, 0],
        ["PADLOCK.LOCKSET", "deadline-big", "h", 1, 5, big],
        ["PADLOCK.LOCKSET", "holder-long", "h" * 65537, 1, 5, 0],
        ["PADLOCK.SEMSET", "sem", "a", 5, 2, 9999999999999],
        ["PADLOCK.SEMSET", "sem-deadline", "h", 5, 2, big],
        ["PADLOCK.SEMSET", "sem-permits", "h", 5, 2**31, 9999999999999],
        ["PADLOCK.SEMSET", "sem-no-deadline", "h", 5, 2, 0],
        ["PADLOCK.RWSET", "rw", "r", 2, 0, 9, 9999999999999],
        ["PADLOCK.RWSET", "rw", "w", 0, 1, 10, 9999999999999],  # a writer beside a reader
        ["PADLOCK.RWSET", "rw-fence", "r", 1, 0, big, 9999999999999],
        ["PADLOCK.RWSET", "rw-reads", "r", 2**31, 0, 3, 9999999999999],
        ["PADLOCK.SEMSET", "{sem}0100", "a", "0100", 1, 9999999999999],
        ["SET", "plain", "1"],
    ])
    r = s.client()
    assert lock_state(r, "ok") == (b"h", 2, 1234567)
    assert r.pexpiretime("ok") == 9999999999999
    assert lock_state(r, "fence-max") == (b"h", 1, 2**53 - 1)
    refused = ["fence-big", "fence-2^53", "count-big", "count-0", "deadline-big", "holder-long",
               "sem-deadline", "sem-permits", "sem-no-deadline", "rw-fence", "rw-reads", "{sem}0100"]
    for k in refused:
        assert r.exists(k) == 0, k
    assert r.exists("sem", "rw", "plain") == 3
    holders = r.execute_command("RWLOCK.INFO", "rw")
    assert b"w" not in holders[holders.index(b"holders") + 1]
    assert r.info("padlock")["padlock_last_fence"] == 2**53 - 1
    # At its bound the counter refuses new grants with an error naming it;
    # reentry still works, and what was accepted saves and loads again.
    with pytest.raises(redis.ResponseError, match="fence counter is at its bound"):
        r.execute_command("LOCK.ACQUIRE", "new", "h", 1000)
    assert r.exists("new") == 0
    assert r.execute_command("LOCK.ACQUIRE", "ok", "h", 1000) == 1234567
    before = snapshot(r)
    assert r.execute_command("DEBUG", "RELOAD") == b"OK"
    assert snapshot(r)[0] == before[0]
    r.execute_command("BGREWRITEAOF")
    assert wait_for(lambda: r.info("persistence")["aof_rewrite_in_progress"] == 0, timeout=10)
    s.restart()
    r = s.client()
    assert lock_state(r, "fence-max") == (b"h", 1, 2**53 - 1)
    assert r.info("padlock")["padlock_last_fence"] == 2**53 - 1


def test_aof_tails_of_every_form_are_remembered(make_server):
    """An effect's request-id as padlock sends it (one word after the
    effect's own, `at-ms:print:rule:request-id`) and as earlier builds sent
    it (`ID` and that word; `ID at-ms:print:rule request-id`): each loads
    from an AOF, the id remembered with the reply its effect's fence says,
    so a resend answers that and changes nothing."""
    first = make_server(extra=["--appendonly", "yes", "--appendfsync", "always"])
    c = first.client()
    keys = ("one", "marked", "split")
    for key in keys:
        c.execute_command("LOCK.ACQUIRE", key, "h", 60000, "ID", "a:b:c")
    sent = [e for e in parse_commands(read_aof_incr(first.dir)) if e[0].upper() == b"PADLOCK.LOCKSET"]
    assert [len(e) for e in sent] == [7, 7, 7], sent
    assert all(e[6].endswith(b":fence:a:b:c") for e in sent), sent
    one, marked, split = sent
    first.stop()
    s, _ = aof_server(make_server, [
        one,
        [*marked[:6], b"ID", marked[6]],
        [*split[:6], b"ID", split[6].rsplit(b":a:b:c", 1)[0], b"a:b:c"],
    ])
    r = s.client()
    assert r.info("padlock")["padlock_request_ids"] == 3
    for e in (one[:6], marked[:6], split[:6]):
        key, fence = e[1].decode(), int(e[4])
        assert r.execute_command("LOCK.ACQUIRE", key, "h", 60000, "ID", "a:b:c") == fence
        assert lock_state(r, key) == (b"h", 1, fence), "a resend, not a reentry"


def test_an_id_riding_on_a_free_needs_a_holder_an_rdb_can_load(make_server):
    """A state that frees a lock (count 0) reads no holder of its own, so an
    id riding on it under an empty or overlong holder was remembered, saved
    in the RDB, and then refused by the load: the server could not start
    from its own RDB (a fuzz seed found it). Such a tail is refused now, and
    what was accepted reloads."""
    now = int(time.time() * 1000)
    tail = b"%d:1:fence:r1" % now
    s, _ = aof_server(make_server, [
        ["PADLOCK.LOCKSET", "empty", "", 0, 0, 0, tail],
        ["PADLOCK.LOCKSET", "long", "h" * 65537, 0, 0, 0, tail],
        ["PADLOCK.LOCKSET", "held", "h", 1, 5, now + 600000, tail],
        ["PADLOCK.LOCKSET", "freed", "h", 0, 0, 0, tail],
    ])
    r = s.client()
    assert r.info("padlock")["padlock_request_ids"] == 2, "the two well formed tails"
    assert r.execute_command("DEBUG", "RELOAD") == b"OK"
    assert r.info("padlock")["padlock_request_ids"] == 2
    # Remembered under its holder: the same id with other arguments is
    # refused as a reuse.
    with pytest.raises(redis.ResponseError, match="used for another request"):
        r.execute_command("LOCK.RELEASE", "freed", "h", "ID", "r1")


def test_effects_take_the_holders_an_rdb_loads(make_server):
    # The master judged the holder by its own max-holder-len (higher than
    # this server's, or than it is now): an effect refused here would lose
    # a hold the master keeps. The bound of what loads is 64 KiB.
    s, _ = aof_server(make_server, [
        ["PADLOCK.LOCKSET", "short", "abcd", 1, 5, 0],
        ["PADLOCK.LOCKSET", "long", "abcde", 1, 6, 0],
        ["PADLOCK.SEMSET", "sem", "h" * 600, 3, 1, 9999999999999],
        ["PADLOCK.RWSET", "rw", "h" * 600, 1, 0, 7, 9999999999999],
        ["PADLOCK.LOCKSET", "too-long", "h" * 65537, 1, 8, 0],
    ], module_args=["max-holder-len", "4"])
    r = s.client()
    assert r.exists("short", "long", "sem", "rw") == 4 and r.exists("too-long") == 0
    assert r.execute_command("DEBUG", "RELOAD") == b"OK"
    assert r.exists("short", "long", "sem", "rw") == 4


def read_aof_incr(d):
    aofdir = pathlib.Path(d) / "appendonlydir"
    incr = sorted(aofdir.glob("*.incr.aof"))
    return b"".join(p.read_bytes() for p in incr)


def parse_commands(data):
    out, i = [], 0
    while i < len(data):
        assert data[i:i + 1] == b"*", data[i:i + 40]
        j = data.index(b"\r\n", i)
        n = int(data[i + 1:j])
        i = j + 2
        args = []
        for _ in range(n):
            j = data.index(b"\r\n", i)
            ln = int(data[i + 1:j])
            args.append(data[j + 2:j + 2 + ln])
            i = j + 2 + ln + 2
        out.append(args)
    return out


def test_master_sends_effects_with_absolute_deadlines_and_fences(make_server):
    s = make_server(extra=["--appendonly", "yes", "--appendfsync", "always"])
    r = s.client()
    t0 = int(time.time() * 1000)
    f = r.execute_command("LOCK.ACQUIRE", "k", "h", 60000)
    r.execute_command("LOCK.ACQUIRE", "k", "h", 30000)
    r.execute_command("SEM.ACQUIRE", "s", "a", 3, 40000, "PERMITS", 2)
    g = r.execute_command("RWLOCK.ACQUIRE", "w", "x", "WRITE", 50000)
    r.execute_command("LOCK.RELEASE", "k", "h")
    r.execute_command("LOCK.RELEASE", "k", "h")
    t1 = int(time.time() * 1000)
    cmds = [c for c in parse_commands(read_aof_incr(s.dir)) if c[0].upper() != b"SELECT"]
    names = [c[0].upper() for c in cmds]
    assert names == [b"PADLOCK.LOCKSET", b"PADLOCK.LOCKSET", b"PADLOCK.SEMSET",
                     b"PADLOCK.RWSET", b"PADLOCK.LOCKSET", b"DEL"], names
    first, reentry, sem, rw, release = cmds[:5]
    assert first[1:5] == [b"k", b"h", b"1", str(f).encode()]
    assert t0 + 60000 <= int(first[5]) <= t1 + 60000, "an absolute deadline"
    assert reentry[3:5] == [b"2", str(f).encode()] and t0 + 30000 <= int(reentry[5]) <= t1 + 30000
    assert sem[1:5] == [b"s", b"a", b"3", b"2"] and t0 + 40000 <= int(sem[5]) <= t1 + 40000
    assert rw[1:6] == [b"w", b"x", b"0", b"1", str(g).encode()]
    assert release[3:5] == [b"1", str(f).encode()]


def test_replicas_reach_the_masters_state_disk_diskless_and_partial(make_server):
    for diskless in ("no", "yes"):
        master = make_server(extra=["--repl-diskless-sync", diskless, "--repl-diskless-sync-delay", "0"])
        m = master.client()
        populate(m)
        m.execute_command("SEM.ACQUIRE", "s", "a", 3, 60000, "PERMITS", 2)
        m.execute_command("RWLOCK.ACQUIRE", "w", "r", "READ", 60000)
        replica = make_server(extra=["--replicaof", "127.0.0.1", str(master.port),
                                     "--repl-diskless-load", "swapdb" if diskless == "yes" else "disabled"])
        rep = replica.client()
        assert wait_for(lambda: rep.info("replication")["master_link_status"] == "up", timeout=30)
        assert m.wait(1, 3000) == 1
        assert snapshot(rep)[:2] == snapshot(m)[:2], diskless
        assert rep.info("padlock")["padlock_last_fence"] == m.info("padlock")["padlock_last_fence"]
    # Partial resync: the link drops, the master goes on, the replica
    # catches up from the backlog (not a full sync).
    full_before = m.info("stats")["sync_full"]
    rep.execute_command("CLIENT", "KILL", "TYPE", "master")
    m.execute_command("LOCK.ACQUIRE", "later", "h", 60000)
    m.execute_command("SEM.RELEASE", "s", "a", "PERMITS", 1)
    assert wait_for(lambda: rep.info("replication")["master_link_status"] == "up", timeout=30)
    assert m.wait(1, 3000) == 1
    assert snapshot(rep)[:2] == snapshot(m)[:2]
    assert m.info("stats")["sync_full"] == full_before
    assert m.info("stats")["sync_partial_ok"] >= 1


def test_migrate_and_restore_keep_state(make_server):
    a, b = make_server(), make_server()
    ra, rb = a.client(), b.client()
    f = ra.execute_command("LOCK.ACQUIRE", "k", "h", 60000)
    ra.execute_command("SEM.ACQUIRE", "s", "x", 4, 60000, "PERMITS", 3)
    assert ra.migrate("127.0.0.1", b.port, ["k", "s"], 0, 5000) == b"OK"
    assert lock_state(rb, "k") == (b"h", 1, f) and rb.pttl("k") > 50000
    sem = rb.execute_command("SEM.INFO", "s")
    assert dict(zip(sem[::2], sem[1::2]))[b"used"] == 3
    assert rb.info("padlock")["padlock_last_fence"] >= f
    assert rb.execute_command("LOCK.ACQUIRE", "new", "h", 1000) > f


def test_fence_floor_effect_raises_the_counter_within_its_bound(make_server):
    s, _ = aof_server(make_server, [
        ["PADLOCK.FENCEFLOOR", 2**52],
        ["PADLOCK.FENCEFLOOR", 2**53],
        ["PADLOCK.FENCEFLOOR", 5],
    ])
    r = s.client()
    assert r.info("padlock")["padlock_last_fence"] == 2**52, "raised, never past 2^53, never lowered"
    assert r.execute_command("LOCK.ACQUIRE", "k", "h", 1000) == 2**52 + 1
