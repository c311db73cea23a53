"""docs/commands.md, Read-write locks — RWLOCK.ACQUIRE / RELEASE / EXTEND / INFO: shared
readers, one writer, fair FIFO waits (readers at the head granted
together), upgrade and downgrade, deadlocks through read-write keys,
per-holder leases, persistence, replication, bad input."""

import time

import pytest
import redis

from conftest import wait_blocked, wait_for
from test_durability import start_pair
from test_semaphores import holders_info


def rinfo(r, key):
    out = holders_info(r, "RWLOCK.INFO", key)
    if out is None:
        return None
    if isinstance(out["mode"], bytes):
        out["mode"] = out["mode"].decode()
    return out


def acq(r, key, holder, mode, ttl=10000, *opts):
    return r.execute_command("RWLOCK.ACQUIRE", key, holder, mode, ttl, *opts)


def rel(r, key, holder, mode):
    return r.execute_command("RWLOCK.RELEASE", key, holder, mode)


def holds(r, key):
    """holder -> (reads, writes, fence)"""
    i = rinfo(r, key)
    return None if i is None else {h: tuple(v[:3]) for h, v in i["holders"].items()}


def test_many_readers_at_once(r):
    fences = [acq(r, "k", f"r{i}", "READ") for i in range(50)]
    assert all(f > 0 for f in fences) and fences == sorted(set(fences)), "one new fence per holder"
    i = rinfo(r, "k")
    assert (i["mode"], len(i["holders"]), i["waiters"]) == ("read", 50, 0)
    assert i["holders"][b"r0"][:3] == [1, 0, fences[0]] and 9000 < i["holders"][b"r0"][3] <= 10000
    assert r.type("k") == b"pdlk-rwlk"
    assert r.pttl("k") > 9000


def test_writer_is_alone(r):
    w = acq(r, "k", "w", "WRITE")
    assert w > 0
    assert acq(r, "k", "r", "READ") is None
    assert acq(r, "k", "w2", "WRITE") is None
    assert acq(r, "k", "w", "WRITE") == w, "the writer reenters with its fence"
    assert rinfo(r, "k")["mode"] == "write"
    assert rel(r, "k", "w", "WRITE") == [0, 1]
    assert rel(r, "k", "w", "WRITE") == [0, 0]
    assert not r.exists("k")
    assert acq(r, "k", "r", "READ") > w


def test_release_and_extend_need_the_hold(r):
    acq(r, "k", "a", "READ", 1000)
    for cmd in (["RWLOCK.RELEASE", "k", "a", "WRITE"], ["RWLOCK.RELEASE", "k", "b", "READ"],
                ["RWLOCK.EXTEND", "k", "b", 1000], ["RWLOCK.RELEASE", "nokey", "a", "READ"]):
        with pytest.raises(redis.ResponseError, match="^NOTHELD"):
            r.execute_command(*cmd)
    assert holds(r, "k") == {b"a": (1, 0, holds(r, "k")[b"a"][2])}
    assert r.execute_command("RWLOCK.EXTEND", "k", "a", 60000) == 1
    assert rinfo(r, "k")["holders"][b"a"][3] > 59000 and r.pttl("k") > 59000


def test_reentrant_read_while_a_writer_waits(r, bg):
    f = acq(r, "k", "a", "READ")
    w = bg("RWLOCK.ACQUIRE", "k", "w", "WRITE", 10000, "BLOCK", 0)
    wait_blocked(r, 1)
    # A newcomer queues behind the writer; the holder may always read more.
    assert acq(r, "k", "b", "READ") is None
    assert acq(r, "k", "a", "READ") == f
    assert acq(r, "k", "a", "READ", 10000, "BLOCK", 0) == f, "no self-deadlock"
    assert holds(r, "k")[b"a"][0] == 3
    for _ in range(3):
        rel(r, "k", "a", "READ")
    assert w.result() > f
    assert rinfo(r, "k")["mode"] == "write"


def test_readers_at_the_head_are_granted_together(r, bg):
    acq(r, "k", "w", "WRITE")
    readers = [bg("RWLOCK.ACQUIRE", "k", f"r{i}", "READ", 10000, "BLOCK", 0) for i in range(3)]
    wait_blocked(r, 3)
    w2 = bg("RWLOCK.ACQUIRE", "k", "w2", "WRITE", 10000, "BLOCK", 0)
    wait_blocked(r, 4)
    late = bg("RWLOCK.ACQUIRE", "k", "late", "READ", 10000, "BLOCK", 0)
    wait_blocked(r, 5)
    rel(r, "k", "w", "WRITE")
    assert all(x.result() > 0 for x in readers)
    assert set(holds(r, "k")) == {b"r0", b"r1", b"r2"}, "the reader behind the writer waits"
    assert rinfo(r, "k")["waiters"] == 2
    for i in range(3):
        rel(r, "k", f"r{i}", "READ")
    assert w2.result() > 0 and not late.done()
    rel(r, "k", "w2", "WRITE")
    assert late.result() > 0


def test_a_reader_stream_cannot_starve_a_writer(server, record_property):
    """Readers keep overlapping; a writer queued among them still gets in,
    after the readers that came before it only."""
    r = server.client()
    acq(r, "k", "seed", "READ", 200)
    import threading
    stop = threading.Event()
    granted = []

    def reader(n):
        c = server.client()
        i = 0
        while not stop.is_set():
            h = f"r{n}-{i}"
            if c.execute_command("RWLOCK.ACQUIRE", "k", h, "READ", 200, "BLOCK", 2000):
                granted.append(time.time())
                time.sleep(0.02)
                c.execute_command("RWLOCK.RELEASE", "k", h, "READ")
            i += 1

    threads = [threading.Thread(target=reader, args=(n,), daemon=True) for n in range(4)]
    for t in threads:
        t.start()
    time.sleep(0.2)
    w = server.client(socket_timeout=10)
    t0 = time.time()
    fence = w.execute_command("RWLOCK.ACQUIRE", "k", "writer", "WRITE", 5000, "BLOCK", 5000)
    waited_ms = (time.time() - t0) * 1000
    assert fence is not None, "the writer was starved"
    assert holds(r, "k") == {b"writer": (0, 1, fence)}, "alone while it writes"
    # The readers come back (each a round trip after its release, later
    # on a loaded machine) and queue behind the writer, not beside it.
    queued = wait_for(lambda: rinfo(r, "k")["waiters"] >= 1, timeout=3)
    assert holds(r, "k") == {b"writer": (0, 1, fence)}, "still alone"
    w.execute_command("RWLOCK.RELEASE", "k", "writer", "WRITE")
    stop.set()
    for t in threads:
        t.join(5)
    record_property("writer_wait_ms", round(waited_ms, 1))
    print(f"writer wait under a reader stream: {waited_ms:.1f} ms")
    assert len(granted) > 10, "readers did run"
    assert queued, "readers queued behind the writer"


def test_upgrade_when_alone(r):
    f = acq(r, "k", "a", "READ")
    acq(r, "k", "b", "READ")
    assert acq(r, "k", "a", "WRITE") is None, "b still reads"
    rel(r, "k", "b", "READ")
    assert acq(r, "k", "a", "WRITE") == f, "upgraded with the same fence"
    assert holds(r, "k") == {b"a": (1, 1, f)}
    assert acq(r, "k", "c", "READ") is None


def test_upgrade_goes_ahead_of_the_queue(r, bg):
    f = acq(r, "k", "a", "READ")
    acq(r, "k", "b", "READ")
    w = bg("RWLOCK.ACQUIRE", "k", "w", "WRITE", 10000, "BLOCK", 0)
    wait_blocked(r, 1)
    up = bg("RWLOCK.ACQUIRE", "k", "a", "WRITE", 10000, "BLOCK", 0)
    wait_blocked(r, 2)
    rel(r, "k", "b", "READ")
    assert up.result() == f, "the upgrader, not the queued writer, is served"
    assert not w.done()
    rel(r, "k", "a", "WRITE")
    rel(r, "k", "a", "READ")
    assert w.result() > f


def test_two_upgraders_deadlock(r, bg):
    acq(r, "k", "a", "READ")
    acq(r, "k", "b", "READ")
    up = bg("RWLOCK.ACQUIRE", "k", "a", "WRITE", 10000, "BLOCK", 0)
    wait_blocked(r, 1)
    t0 = time.time()
    with pytest.raises(redis.ResponseError) as e:
        acq(r, "k", "b", "WRITE", 10000, "BLOCK", 0)
    assert time.time() - t0 < 1
    assert str(e.value) == "DEADLOCK b -> k -> a -> k -> b"
    assert r.info("padlock")["padlock_deadlocks"] == 1
    rel(r, "k", "b", "READ")
    assert up.result() > 0


def test_downgrade(r):
    f = acq(r, "k", "w", "WRITE")
    assert acq(r, "k", "w", "READ") == f
    assert rel(r, "k", "w", "WRITE") == [1, 0]
    assert rinfo(r, "k")["mode"] == "read"
    assert acq(r, "k", "other", "READ") > f


def test_writer_waiting_on_a_reader_that_waits_on_it_is_a_deadlock(r, bg):
    # t1 reads k and waits for lock L; t2 holds L and asks to write k.
    acq(r, "k", "t1", "READ")
    r.execute_command("LOCK.ACQUIRE", "L", "t2", 10000)
    bg("LOCK.ACQUIRE", "L", "t1", 10000, "BLOCK", 0)
    wait_blocked(r, 1)
    with pytest.raises(redis.ResponseError, match=r"^DEADLOCK t2 -> k -> t1 -> L -> t2$"):
        acq(r, "k", "t2", "WRITE", 10000, "BLOCK", 0)
    # A reader would not wait for t1 at all: no cycle, granted.
    assert acq(r, "k", "t2", "READ", 10000, "BLOCK", 0) > 0


def test_queue_order_waits_are_edges(r, bg):
    # t1 holds L; a writer w queues on k (held by reader x); t1 asks to read
    # k: it waits for w (queued ahead), which waits for x only. No cycle.
    # Then x waits for L (held by t1): now w waits for x, x for t1, and t1
    # behind w: a cycle through the queue.
    r.execute_command("LOCK.ACQUIRE", "L", "t1", 10000)
    acq(r, "k", "x", "READ")
    bg("RWLOCK.ACQUIRE", "k", "w", "WRITE", 10000, "BLOCK", 0)
    wait_blocked(r, 1)
    bg("LOCK.ACQUIRE", "L", "x", 10000, "BLOCK", 0)
    wait_blocked(r, 2)
    with pytest.raises(redis.ResponseError, match=r"^DEADLOCK t1 -> k -> "):
        acq(r, "k", "t1", "READ", 10000, "BLOCK", 0)


def test_waitfor_and_graph_on_rwlock_keys(r, bg):
    acq(r, "k", "a", "READ")
    acq(r, "k", "b", "READ")
    assert r.execute_command("LOCK.WAITFOR", "k", "a", 5000) == 0, "a already holds it"
    assert r.execute_command("LOCK.WAITFOR", "k", "c", 5000) == 1
    bg("RWLOCK.ACQUIRE", "k", "w", "WRITE", 10000, "BLOCK", 0)
    wait_blocked(r, 1)
    edges = {(e[0], e[1]): sorted(e[2]) for e in r.execute_command("LOCK.GRAPH")}
    assert edges[(b"w", b"k")] == [b"a", b"b"]
    assert edges[(b"c", b"k")] == [b"a", b"b"]


def test_lease_expiry_of_one_reader_serves_the_writer(r, bg):
    acq(r, "k", "long", "READ", 400)
    acq(r, "k", "short", "READ", 300)
    r.execute_command("RWLOCK.EXTEND", "k", "long", 200)
    deadline = time.time() + 0.3
    w = bg("RWLOCK.ACQUIRE", "k", "w", "WRITE", 10000, "BLOCK", 0)
    assert w.result() > 0
    late_ms = (w.done_at - deadline) * 1000
    assert late_ms < 50, f"handed over {late_ms:.1f} ms after the last lease ended"
    assert list(holds(r, "k")) == [b"w"]
    i = r.info("padlock")
    assert i["padlock_rw_expired_holders"] >= 1 and i["padlock_handoffs"] == 1


def test_other_kinds_are_wrongtype(r):
    acq(r, "rw", "h", "READ")
    r.execute_command("LOCK.ACQUIRE", "l", "h", 5000)
    r.execute_command("SEM.ACQUIRE", "s", "h", 2, 5000)
    r.set("str", "v")
    for key in ("l", "s", "str"):
        for cmd in (["RWLOCK.ACQUIRE", key, "h", "READ", 100], ["RWLOCK.RELEASE", key, "h", "READ"],
                    ["RWLOCK.EXTEND", key, "h", 100], ["RWLOCK.INFO", key]):
            with pytest.raises(redis.ResponseError, match="^WRONGTYPE"):
                r.execute_command(*cmd)
    for cmd in (["LOCK.ACQUIRE", "rw", "h", 100], ["LOCK.INFO", "rw"], ["SEM.ACQUIRE", "rw", "h", 2, 100],
                ["SEM.INFO", "rw"], ["LOCK.MACQUIRE", 2, "l", "rw", "h", 100]):
        with pytest.raises(redis.ResponseError, match="^WRONGTYPE"):
            r.execute_command(*cmd)
    assert holds(r, "rw") == {b"h": (1, 0, holds(r, "rw")[b"h"][2])}
    assert r.scan(0, _type="pdlk-rwlk")[1] == [b"rw"]


@pytest.mark.parametrize("cmd, error", [
    (["RWLOCK.ACQUIRE", "k", "h", "READ"], "wrong number of arguments"),
    (["RWLOCK.ACQUIRE", "k", "", "READ", 100], "holder must be"),
    (["RWLOCK.ACQUIRE", "k", "h", "SHARED", 100], "mode must be READ or WRITE"),
    (["RWLOCK.ACQUIRE", "k", "h", "READ", 0], "ttl-ms must be an integer"),
    (["RWLOCK.ACQUIRE", "k", "h", "READ", "x"], "ttl-ms must be an integer"),
    (["RWLOCK.ACQUIRE", "k", "h", "READ", 100, "BLOCK"], "syntax error"),
    (["RWLOCK.ACQUIRE", "k", "h", "READ", 100, "BLOCK", -1], "timeout-ms must be an integer"),
    (["RWLOCK.ACQUIRE", "k", "h", "READ", 100, "NOPE", 1], "syntax error"),
    (["RWLOCK.RELEASE", "k", "h"], "wrong number of arguments"),
    (["RWLOCK.RELEASE", "k", "h", "BOTH"], "mode must be READ or WRITE"),
    (["RWLOCK.EXTEND", "k", "h", 0], "ttl-ms must be an integer"),
    (["RWLOCK.EXTEND", "k", "h"], "wrong number of arguments"),
    (["RWLOCK.INFO", "k", "x"], "wrong number of arguments"),
    (["PADLOCK.RWSET", "k", "h", 1, 1, 5, 99999999999999], "replication stream and the AOF only|unknown command"),
])
def test_bad_input_changes_nothing(r, cmd, error):
    acq(r, "k", "x", "READ", 60000)
    before, pttl = holds(r, "k"), r.pttl("k")
    with pytest.raises(redis.ResponseError, match=error):
        r.execute_command(*cmd)
    assert holds(r, "k") == before and abs(r.pttl("k") - pttl) < 500
    assert r.dbsize() == 1


def populate(r):
    f = {}
    f["a"] = acq(r, "k", "a", "READ", 60000)
    acq(r, "k", "a", "READ", 60000)
    f["b"] = acq(r, "k", b"b\x00\r\n", "READ", 30000)
    f["w"] = acq(r, "w", "w", "WRITE", 50000)
    acq(r, "w", "w", "READ", 50000)
    return f


def test_debug_reload_and_copies(r):
    populate(r)
    before = {k: holds(r, k) for k in ("k", "w")}
    r.execute_command("DEBUG", "RELOAD")
    assert {k: holds(r, k) for k in ("k", "w")} == before
    assert rinfo(r, "k")["holders"][b"a"][3] <= 60000
    assert r.copy("k", "k2")
    r.restore("k3", r.pttl("k"), r.dump("k"))
    assert holds(r, "k2") == holds(r, "k3") == before["k"]
    rel(r, "k2", "a", "READ")
    assert holds(r, "k") == before["k"], "copies are independent"
    # Valkey frees the dataset DEBUG RELOAD replaced on a background
    # thread: the gauge counts down once that is done.
    assert wait_for(lambda: r.info("padlock")["padlock_rwlocks"] == 4, timeout=3)


def test_rdb_restart(make_server):
    s = make_server()
    r = s.client()
    populate(r)
    before = {k: holds(r, k) for k in ("k", "w")}
    last = r.info("padlock")["padlock_last_fence"]
    s.restart(save=True)
    r = s.client()
    assert {k: holds(r, k) for k in ("k", "w")} == before
    assert acq(r, "k", "new", "READ") > last


@pytest.mark.parametrize("preamble", ["yes", "no"])
def test_aof_restart(make_server, preamble):
    extra = ["--appendonly", "yes", "--appendfsync", "always", "--aof-use-rdb-preamble", preamble]
    s = make_server(extra=extra)
    r = s.client()
    populate(r)
    r.bgrewriteaof()
    assert wait_for(lambda: r.info("persistence")["aof_rewrite_in_progress"] == 0
                    and r.info("persistence")["aof_rewrite_scheduled"] == 0, timeout=10)
    rel(r, "w", "w", "WRITE")
    acq(r, "w", "r2", "READ", 40000)
    before = {k: holds(r, k) for k in ("k", "w")}
    s.kill()
    s.start()
    r = s.client()
    assert {k: holds(r, k) for k in ("k", "w")} == before
    assert rinfo(r, "k")["holders"][b"a"][3] <= 60000


def test_replica_converges_with_the_same_fences(make_server):
    master, replica, m, rep = start_pair(make_server)
    populate(m)
    acq(m, "e", "short", "READ", 100)
    acq(m, "e", "long", "READ", 60000)
    rel(m, "w", "w", "WRITE")
    m.execute_command("RWLOCK.EXTEND", "k", "a", 90000)
    m.wait(1, 2000)
    for k in ("k", "w", "e"):
        assert holds(rep, k) == holds(m, k), k
    time.sleep(0.2)
    assert list(holds(rep, "e")) == [b"long"], "the replica hides the expired holder"
    acq(m, "e", "long", "WRITE", 60000)
    m.wait(1, 2000)
    assert holds(rep, "e") == holds(m, "e") and holds(m, "e")[b"long"][:2] == (1, 1)
    assert abs(rep.pttl("e") - m.pttl("e")) < 100
    with pytest.raises(redis.ReadOnlyError):
        acq(rep, "z", "h", "READ")


def test_block_grants_reach_the_replica(make_server):
    master, replica, m, rep = start_pair(make_server)
    from conftest import Background
    acq(m, "k", "w", "WRITE")
    readers = [Background(master, "RWLOCK.ACQUIRE", "k", f"r{i}", "READ", 10000, "BLOCK", 0) for i in range(2)]
    wait_blocked(m, 2)
    rel(m, "k", "w", "WRITE")
    assert all(x.result() > 0 for x in readers)
    m.wait(1, 2000)
    assert holds(rep, "k") == holds(m, "k") and len(holds(m, "k")) == 2


def test_grace_refuses_newcomers_not_holders(make_server):
    s = make_server(module_args=["restart-grace-ms", "3000"])
    r = s.client()
    with pytest.raises(redis.ResponseError, match="TRYAGAIN"):
        acq(r, "k", "h", "READ")
    with pytest.raises(redis.ResponseError, match="^NOTHELD"):
        r.execute_command("RWLOCK.EXTEND", "k", "h", 1000)
    assert r.dbsize() == 0


def test_counters_and_events(server):
    r = server.client()
    r.config_set("notify-keyspace-events", "Kdx")
    p = server.client().pubsub()
    p.psubscribe("__keyspace@0__:*")
    p.get_message(timeout=1)
    acq(r, "k", "a", "READ")
    acq(r, "k", "w", "WRITE")
    r.execute_command("RWLOCK.EXTEND", "k", "a", 5000)
    rel(r, "k", "a", "READ")
    acq(r, "e", "a", "READ", 30)
    seen = []
    deadline = time.time() + 3
    while time.time() < deadline and ("e", "rwlock.expired") not in seen:
        m = p.get_message(timeout=0.1)
        if m and m["type"] == "pmessage":
            seen.append((m["channel"].decode().split(":", 1)[1], m["data"].decode()))
    assert {("k", "rwlock.acquire"), ("k", "rwlock.release"), ("e", "rwlock.expired")} <= set(seen)
    p.close()
    i = r.info("padlock")
    assert (i["padlock_rw_acquired"], i["padlock_rw_contended"], i["padlock_rw_extended"],
            i["padlock_rw_released"]) == (2, 1, 1, 1)
    assert i["padlock_rwlocks"] == 0


def test_info_resp3(r3):
    acq(r3, "k", "a", "READ")
    raw = r3.execute_command("RWLOCK.INFO", "k")
    assert isinstance(raw, dict) and set(raw) == {b"mode", b"holders", b"waiters", b"keep", b"queue"}
    assert r3.execute_command("RWLOCK.INFO", "nokey") is None


def test_memory_usage_per_reader(r, record_property):
    sizes = {}
    for n in (100, 10000):
        key = f"m{n}"
        pipe = r.pipeline(transaction=False)
        for i in range(n):
            pipe.execute_command("RWLOCK.ACQUIRE", key, f"holder-{i:08d}", "READ", 60000)
        pipe.execute()
        sizes[n] = r.memory_usage(key, samples=0)
        assert len(rinfo(r, key)["holders"]) == n
    per_reader = (sizes[10000] - sizes[100]) / 9900
    record_property("bytes_per_reader", per_reader)
    print(f"MEMORY USAGE per reader (15-byte holders): {per_reader:.0f} bytes")
    assert 20 < per_reader < 400, sizes


def test_commands_declare_keys_and_acl(server):
    r = server.client()
    getkeys = r.execute_command("COMMAND GETKEYS", "RWLOCK.ACQUIRE", "k1", "h", "READ", 100)
    assert [k.decode() if isinstance(k, bytes) else k for k in getkeys] == ["k1"]
    r.execute_command("ACL", "SETUSER", "app", "on", "nopass", "+@all", "~rw:*")
    app = server.client(username="app", password="x")
    assert acq(app, "rw:1", "h", "READ") > 0
    with pytest.raises(redis.exceptions.NoPermissionError):
        acq(app, "other", "h", "READ")
