"""Nothing a client sends can poison the server (docs/commands.md, "Words" — fence,
counters; Replies and errors — maxmemory; Eviction; LOCK.GRAPH;
Configuration): crafted RESTORE payloads at and past every bound, memory
pressure, other users' keys in introspection, eviction, and configuration
typos."""

import struct
import time

import pytest
import redis

from conftest import Server, wait_for
from test_damage import seal

MAX_FENCE = 2**53 - 1
MAX_COUNT = 2**31 - 1


def enc(v):
    """An RDB length-encoded integer (the module API's unsigned form)."""
    if v < 64:
        return bytes([v])
    if v < 16384:
        return bytes([0x40 | (v >> 8), v & 0xFF])
    if v < 2**32:
        return b"\x80" + struct.pack(">I", v)
    return b"\x81" + struct.pack(">Q", v)


def u(v):
    return b"\x02" + enc(v)


def s(v):
    return u(v & (2**64 - 1))


def blob(b):
    return b"\x05" + enc(len(b)) + b


class Payloads:
    """DUMP payloads built field by field on a real value's module id and
    RDB version, with a valid CRC-64, so Redis hands them to padlock."""

    def __init__(self, r, tag="{p}"):
        r.execute_command("LOCK.ACQUIRE", tag + "lock", "h", 60000)
        r.execute_command("SEM.ACQUIRE", tag + "sem", "h", 3, 60000)
        r.execute_command("RWLOCK.ACQUIRE", tag + "rw", "h", "READ", 60000)
        self.head, self.version = {}, None
        for kind in ("lock", "sem", "rw"):
            d = r.dump(tag + kind)
            assert d[0] == 7 and d[1] == 0x81, "a module value with its 64-bit id"
            self.head[kind], self.version = d[:10], d[-10:-8]
            r.delete(tag + kind)

    def lock(self, count, fence, holder=b"h"):
        return seal(self.head["lock"] + blob(holder) + u(count) + u(fence) + b"\x00", self.version)

    def sem(self, limit, holders):
        body = u(limit) + u(len(holders))
        for h, permits, deadline in holders:
            body += blob(h) + u(permits) + s(deadline)
        return seal(self.head["sem"] + body + b"\x00", self.version)

    def rw(self, holders):
        body = u(len(holders))
        for h, reads, writes, fence, deadline in holders:
            body += blob(h) + u(reads) + u(writes) + u(fence) + s(deadline)
        return seal(self.head["rw"] + body + b"\x00", self.version)


def last_fence(r):
    return r.info("padlock")["padlock_last_fence"]


def round_trips(r, key):
    """Accepted means loadable: DUMP, RESTORE elsewhere, same view."""
    d = r.dump(key)
    r.restore(key + "-copy", 0, d)
    assert r.dump(key + "-copy") == d
    r.delete(key + "-copy")


def test_restore_at_and_past_every_bound(server):
    r = server.client()
    p = Payloads(r)
    far = int(time.time() * 1000) + 3600_000
    accepted = {
        "lock-count-max": p.lock(MAX_COUNT, 5),
        "lock-fence-high": p.lock(1, 2**52),
        "sem-limit-max": p.sem(2**31 - 1, [(b"a", 2**31 - 1, far)]),
        "sem-deadline-max": p.sem(5, [(b"a", 1, 2**53)]),
        "rw-max": p.rw([(b"a", MAX_COUNT, 0, 2**52, far)]),
    }
    refused = {
        "lock-fence-2^53": p.lock(1, 2**53),
        "lock-fence-2^63-1": p.lock(1, 2**63 - 1),
        "lock-count-past": p.lock(MAX_COUNT + 1, 5),
        "lock-count-2^63": p.lock(2**63, 5),
        "sem-limit-past": p.sem(2**31, [(b"a", 1, far)]),
        "sem-permits-past": p.sem(5, [(b"a", 2**31, far)]),
        "sem-deadline-past": p.sem(5, [(b"a", 1, 2**53 + 1)]),
        "sem-deadline-2^63-1": p.sem(5, [(b"a", 1, 2**63 - 1)]),
        "sem-deadline-negative": p.sem(5, [(b"a", 1, -5)]),
        "rw-fence-past": p.rw([(b"a", 1, 0, 2**53, far)]),
        "rw-reads-past": p.rw([(b"a", MAX_COUNT + 1, 0, 5, far)]),
        "rw-writes-past": p.rw([(b"a", 0, MAX_COUNT + 1, 5, far)]),
    }
    for key, payload in refused.items():
        with pytest.raises(redis.ResponseError, match="Bad data format"):
            r.restore(key, 0, payload)
        assert r.exists(key) == 0, key
    for key, payload in accepted.items():
        assert r.restore(key, 60000, payload) == b"OK", key
        round_trips(r, key)
    assert last_fence(r) == 2**52, "a restored fence raises the counter, never past the bound"
    # A reentry at the count's bound is refused with an error naming it.
    with pytest.raises(redis.ResponseError, match="reentry count is at its bound"):
        r.execute_command("LOCK.ACQUIRE", "lock-count-max", "h", 1000)
    with pytest.raises(redis.ResponseError, match="hold count is at its bound"):
        r.execute_command("RWLOCK.ACQUIRE", "rw-max", "a", "READ", 1000)
    f = r.execute_command("LOCK.ACQUIRE", "fresh", "h", 1000)
    assert 2**52 < f <= MAX_FENCE
    # Everything accepted saves and loads again, the next fence included.
    before = {k: r.dump(k) for k in accepted}
    assert r.execute_command("DEBUG", "RELOAD") == b"OK"
    assert {k: r.dump(k) for k in accepted} == before
    assert r.execute_command("LOCK.ACQUIRE", "fresh2", "h", 1000) > f
    # A restored fence at the bound: the counter stops there, every new
    # grant is refused by name, and nothing goes negative or backwards.
    assert r.restore("at-bound", 0, p.lock(1, MAX_FENCE)) == b"OK"
    assert last_fence(r) == MAX_FENCE
    for _ in range(3):
        with pytest.raises(redis.ResponseError, match="fence counter is at its bound"):
            r.execute_command("LOCK.ACQUIRE", "another", "h", 1000)
        with pytest.raises(redis.ResponseError, match="fence counter is at its bound"):
            r.execute_command("RWLOCK.ACQUIRE", "another-rw", "h", "WRITE", 1000)
    assert r.exists("another", "another-rw") == 0
    assert r.execute_command("LOCK.ACQUIRE", "fresh", "h", 1000) == f, "reentry takes no fence"
    assert r.execute_command("DEBUG", "RELOAD") == b"OK"
    assert last_fence(r) == MAX_FENCE


def test_renewals_and_releases_run_when_memory_is_full(make_server):
    srv = make_server(extra=["--maxmemory-policy", "noeviction"])
    r = srv.client()
    r.execute_command("LOCK.ACQUIRE", "held", "h", 60000)
    r.execute_command("LOCK.ACQUIRE", "held2", "h", 60000)
    r.execute_command("SEM.ACQUIRE", "sem", "h", 3, 60000, "PERMITS", 2)
    r.execute_command("RWLOCK.ACQUIRE", "rw", "h", "READ", 60000)
    r.execute_command("LOCK.ACQUIRE", "other", "o", 60000)
    for i in range(20):
        r.set(f"fill:{i}", b"x" * 100_000)
    # Full: maxmemory below what is used (noeviction frees nothing).
    r.config_set("maxmemory", r.info("memory")["used_memory"] - 500_000)
    oom = redis.exceptions.OutOfMemoryError
    with pytest.raises(oom):
        r.set("one-more", "x")
    for cmd in (["LOCK.ACQUIRE", "new", "h", 1000], ["SEM.ACQUIRE", "sem", "x", 3, 1000],
                ["RWLOCK.ACQUIRE", "rw", "x", "READ", 1000], ["LOCK.MACQUIRE", 1, "m", "h", 1000],
                ["LOCK.REENTER", "held", "h", 1000], ["LOCK.WAITFOR", "other", "w", 1000]):
        with pytest.raises(oom):
            r.execute_command(*cmd)
    assert r.info("padlock")["padlock_wait_edges"] == 0, "no edge grew past maxmemory"
    # Renewing and giving back always run, as PEXPIRE and DEL do.
    assert r.execute_command("LOCK.EXTEND", "held", "h", 90000) == 1
    assert r.pttl("held") > 80000
    assert r.execute_command("SEM.EXTEND", "sem", "h", 90000) == 1
    assert r.execute_command("RWLOCK.EXTEND", "rw", "h", 90000) == 1
    assert r.execute_command("LOCK.RELEASE", "held", "h") == 0
    assert r.execute_command("LOCK.MRELEASE", 1, "held2", "h") == [0]
    assert r.execute_command("SEM.RELEASE", "sem", "h", "PERMITS", 1) == 1
    assert r.execute_command("RWLOCK.RELEASE", "rw", "h", "READ") == [0, 0]


def test_introspection_shows_only_what_the_user_may_read(server, bg):
    r = server.client()
    # Another team's wait: svc-payroll holds app:b and waits for
    # secret:ledger, which svc-ledger holds.
    r.execute_command("LOCK.ACQUIRE", "secret:ledger", "svc-ledger", 60000)
    r.execute_command("LOCK.ACQUIRE", "app:b", "svc-payroll", 60000)
    assert r.execute_command("LOCK.WAITFOR", "secret:ledger", "svc-payroll", 60000) == 1
    r.execute_command("ACL", "SETUSER", "app", "on", "nopass", "~app:*", "+@all", "-@admin")
    app = server.client(username="app", password="x")
    assert app.execute_command("LOCK.GRAPH") == []
    assert len(r.execute_command("LOCK.GRAPH")) == 1
    # The app's own wait shows, with its holders.
    app.execute_command("LOCK.ACQUIRE", "app:a", "t1", 60000)
    assert app.execute_command("LOCK.WAITFOR", "app:a", "t9", 60000) == 1
    graph = app.execute_command("LOCK.GRAPH")
    assert graph[0][:3] == [b"t9", b"app:a", [b"t1"]]
    assert b"secret" not in repr(graph).encode()
    assert len(app.execute_command("LOCK.GRAPH", "COUNT", 1)) == 1
    # A cycle through a key the user may not read: `?` for it and for the
    # holder reached through it.
    r.execute_command("LOCK.RELEASE", "secret:ledger", "svc-ledger")
    r.execute_command("LOCK.ACQUIRE", "secret:ledger", "t2", 60000)
    with pytest.raises(redis.ResponseError) as e:
        app.execute_command("LOCK.WAITFOR", "app:b", "t2", 1000)
    msg = str(e.value)
    assert msg == "DEADLOCK t2 -> app:b -> svc-payroll -> ? -> t2", msg
    # The same cycle, asked by a user who may read everything.
    with pytest.raises(redis.ResponseError, match="svc-payroll -> secret:ledger -> t2"):
        r.execute_command("LOCK.WAITFOR", "app:b", "t2", 1000)
    for bad in (["COUNT"], ["COUNT", 0], ["COUNT", "x"], ["LIMIT", 5]):
        with pytest.raises(redis.ResponseError):
            r.execute_command("LOCK.GRAPH", *bad)


@pytest.mark.parametrize("policy", ["volatile-lru", "allkeys-lru"])
def test_eviction_is_seen(make_server, policy):
    srv = make_server()
    r = srv.client()
    assert r.info("padlock")["padlock_eviction_safe"] == 1
    r.config_set("notify-keyspace-events", "Kd")
    p = srv.client().pubsub()
    p.psubscribe("__keyspace@0__:*")
    p.get_message(timeout=1)
    for i in range(30):
        r.execute_command("LOCK.ACQUIRE", f"lock:{i}", f"h{i}", 600000)
    r.execute_command("SEM.ACQUIRE", "sem", "h", 3, 600000)
    r.config_set("maxmemory-policy", policy)
    r.config_set("maxmemory", r.info("memory")["used_memory"] + 300_000)
    assert r.info("padlock")["padlock_eviction_safe"] == 0
    assert wait_for(lambda: f"maxmemory-policy {policy} can evict held locks" in srv.tail(2000), timeout=5)
    # Memory filled past maxmemory until some of padlock's keys go (only
    # they have an expiry for volatile-lru; they are the oldest for
    # allkeys-lru).
    time.sleep(0.01)
    try:
        for i in range(3000):
            r.set(f"fill:{i}", b"x" * 5_000)
            if i % 20 == 0 and r.exists(*[f"lock:{j}" for j in range(30)], "sem") < 27:
                break
    except redis.exceptions.OutOfMemoryError:
        pass  # nothing volatile left to evict
    locks_left = sum(r.exists(f"lock:{i}") for i in range(30)) + r.exists("sem")
    evicted = 31 - locks_left
    assert evicted > 0
    assert r.info("padlock")["padlock_evicted_held"] == evicted
    assert wait_for(lambda: "eviction removed the held" in srv.tail(2000), timeout=5)
    # One log line a second at most, with a count of those it folds in.
    lines = srv.tail(5000).count("eviction removed the held")
    assert 1 <= lines < evicted or evicted == 1, (lines, evicted)
    seen = set()
    deadline = time.time() + 3
    while time.time() < deadline and len(seen) < evicted:
        m = p.get_message(timeout=0.1)
        if m and m["type"] == "pmessage" and m["data"] in (b"lock.evicted", b"sem.evicted"):
            seen.add(m["channel"])
    assert len(seen) == evicted
    p.close()
    # eviction refuse: no acquire while the policy can evict; renewals and
    # releases still run.
    r.config_set("maxmemory", r.info("memory")["used_memory"] + 10_000_000)
    r.execute_command("LOCK.ACQUIRE", "survivor", "h", 600000)
    r.config_set("padlock.eviction", "refuse")
    assert r.config_get("padlock.eviction") == {"padlock.eviction": "refuse"}
    with pytest.raises(redis.ResponseError, match=f"maxmemory-policy {policy} can evict held locks"):
        r.execute_command("LOCK.ACQUIRE", "new", "h", 1000)
    with pytest.raises(redis.ResponseError, match="can evict held locks"):
        r.execute_command("SEM.ACQUIRE", "new-sem", "h", 2, 1000)
    assert r.execute_command("LOCK.EXTEND", "survivor", "h", 1000) == 1
    assert r.execute_command("LOCK.RELEASE", "survivor", "h") == 0
    with pytest.raises(redis.ResponseError):
        r.config_set("padlock.eviction", "sometimes")
    r.config_set("maxmemory-policy", "noeviction")
    assert r.info("padlock")["padlock_eviction_safe"] == 1
    assert r.execute_command("LOCK.ACQUIRE", "new", "h", 1000) > 0


@pytest.mark.parametrize("args, named", [
    (["restart-grace-m", "auto"], "unknown load argument 'restart-grace-m'"),
    (["max-holder-len", "0"], "max-holder-len must be an integer from 1 to 65536"),
    (["max-ttl-ms", "0100"], "max-ttl-ms must be an integer"),
    (["max-waiters", "+5"], "max-waiters must be an integer"),
    (["eviction", "maybe"], "'maybe' is not a valid value for eviction"),
    (["restart-grace-ms", "soon"], "not a valid value for restart-grace-ms"),
    (["max-ttl-ms"], "has no value"),
    (["max-ttl-ms", "5000", "max-ttl-ms", "6000"], "given twice"),
])
def test_configuration_typos_refuse_the_load(tmp_dir, args, named):
    srv = Server(tmp_dir, module_args=args)
    with pytest.raises(RuntimeError):
        srv.start()
    assert "padlock" in srv.tail(100) and named in srv.tail(100), srv.tail(20)


def test_integers_parse_as_redis_parses_them(r):
    for cmd in (["LOCK.ACQUIRE", "k", "h", "0100"], ["LOCK.ACQUIRE", "k", "h", "100", "BLOCK", "00"],
                ["SEM.ACQUIRE", "s", "h", "03", 100], ["LOCK.ACQUIRE", "k", "h", "-0"]):
        with pytest.raises(redis.ResponseError, match="must be an integer"):
            r.execute_command(*cmd)
    assert r.dbsize() == 0
    assert r.execute_command("LOCK.ACQUIRE", "k", "h", "100", "BLOCK", "0") > 0


def test_whole_key_expiry_counts_under_its_kind(r):
    r.execute_command("SEM.ACQUIRE", "s", "h", 3, 40)
    r.execute_command("RWLOCK.ACQUIRE", "w", "h", "READ", 40)
    r.execute_command("LOCK.ACQUIRE", "k", "h", 40)

    def counts():
        i = r.info("padlock")
        return i["padlock_expired"], i["padlock_sem_expired"], i["padlock_rw_expired"]

    assert wait_for(lambda: r.exists("s", "w", "k") == 0 and counts() == (1, 1, 1), timeout=5), counts()
