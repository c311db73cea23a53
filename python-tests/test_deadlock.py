"""docs/commands.md, Deadlock detection — cycles through BLOCK waiters and LOCK.WAITFOR
edges, semaphore OR-waits, LOCK.GRAPH, edge expiry."""

import time

import pytest
import redis

from conftest import wait_blocked, wait_for


def test_two_party_deadlock_through_block(r, bg):
    r.execute_command("LOCK.ACQUIRE", "a1", "t1", 10000)
    r.execute_command("LOCK.ACQUIRE", "a2", "t2", 10000)
    w = bg("LOCK.ACQUIRE", "a1", "t2", 10000, "BLOCK", 0)
    wait_blocked(r, 1)
    t0 = time.time()
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("LOCK.ACQUIRE", "a2", "t1", 10000, "BLOCK", 0)
    assert time.time() - t0 < 1, "reported at once, not after a timeout"
    assert str(e.value) == "DEADLOCK t1 -> a2 -> t2 -> a1 -> t1"
    assert r.info("padlock")["padlock_deadlocks"] == 1
    assert r.info("padlock")["padlock_blocked_clients"] == 1
    # t1 gives up and releases: t2 gets a1.
    r.execute_command("LOCK.RELEASE", "a1", "t1")
    assert w.result() > 0


@pytest.mark.parametrize("kind", ["lock", "sem"])
def test_a_cycle_closed_behind_other_waiters_is_found(r, bg, kind):
    # The closing request queues behind a waiter on its key: what its wait
    # reads of that key comes from the refusal behind the queue.
    def take(key, holder, *block):
        if kind == "lock":
            return ["LOCK.ACQUIRE", key, holder, 10000, *block]
        return ["SEM.ACQUIRE", key, holder, 1, 10000, *block]

    r.execute_command(*take("k1", "A"))
    r.execute_command(*take("k2", "B"))
    bg(*take("k2", "W", "BLOCK", 0))
    wait_blocked(r, 1)
    bg(*take("k1", "B", "BLOCK", 0))
    wait_blocked(r, 2)
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command(*take("k2", "A", "BLOCK", 0))
    assert str(e.value) == "DEADLOCK A -> k2 -> B -> k1 -> A"
    assert r.info("padlock")["padlock_blocked_clients"] == 2
    # Behind the same queue with nothing to close: it waits.
    bg(*take("k2", "X", "BLOCK", 0))
    wait_blocked(r, 3)


def test_three_party_deadlock_through_block(r, bg):
    for k, h in (("a", "t1"), ("b", "t2"), ("c", "t3")):
        r.execute_command("LOCK.ACQUIRE", k, h, 10000)
    bg("LOCK.ACQUIRE", "b", "t1", 10000, "BLOCK", 0)
    wait_blocked(r, 1)
    bg("LOCK.ACQUIRE", "c", "t2", 10000, "BLOCK", 0)
    wait_blocked(r, 2)
    with pytest.raises(redis.ResponseError, match=r"^DEADLOCK t3 -> a -> t1 -> b -> t2 -> c -> t3$"):
        r.execute_command("LOCK.ACQUIRE", "a", "t3", 10000, "BLOCK", 0)


def test_multi_key_block_deadlock(r, bg):
    r.execute_command("LOCK.ACQUIRE", "{x}1", "t1", 10000)
    r.execute_command("LOCK.ACQUIRE", "{x}2", "t2", 10000)
    bg("LOCK.ACQUIRE", "{x}1", "t2", 10000, "BLOCK", 0)
    wait_blocked(r, 1)
    with pytest.raises(redis.ResponseError, match="^DEADLOCK t1 -> {x}2 -> t2 -> {x}1 -> t1$"):
        r.execute_command("LOCK.MACQUIRE", 2, "{x}1", "{x}2", "t1", 10000, "BLOCK", 0)


def test_two_party_deadlock_through_waitfor(r):
    r.execute_command("LOCK.ACQUIRE", "acct:1", "t1", 10000)
    r.execute_command("LOCK.ACQUIRE", "acct:2", "t2", 10000)
    assert r.execute_command("LOCK.WAITFOR", "acct:1", "t2", 5000) == 1
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("LOCK.WAITFOR", "acct:2", "t1", 5000)
    assert str(e.value) == "DEADLOCK t1 -> acct:2 -> t2 -> acct:1 -> t1"
    graph = r.execute_command("LOCK.GRAPH")
    assert len(graph) == 1, "the refused edge is not recorded"
    assert graph[0][:3] == [b"t2", b"acct:1", [b"t1"]] and 4000 < graph[0][3] <= 5000


def test_three_party_mixed_waitfor_and_block(r, bg):
    for k, h in (("a", "t1"), ("b", "t2"), ("c", "t3")):
        r.execute_command("LOCK.ACQUIRE", k, h, 10000)
    assert r.execute_command("LOCK.WAITFOR", "b", "t1", 5000) == 1
    bg("LOCK.ACQUIRE", "c", "t2", 10000, "BLOCK", 0)
    wait_blocked(r, 1)
    with pytest.raises(redis.ResponseError, match="^DEADLOCK t3 -> a -> t1 -> b -> t2 -> c -> t3$"):
        r.execute_command("LOCK.WAITFOR", "a", "t3", 5000)
    with pytest.raises(redis.ResponseError, match="^DEADLOCK"):
        r.execute_command("LOCK.ACQUIRE", "a", "t3", 1000, "BLOCK", 100)


def test_waitfor_nothing_to_wait_for(r):
    assert r.execute_command("LOCK.WAITFOR", "free", "t1", 5000) == 0
    r.execute_command("LOCK.ACQUIRE", "mine", "t1", 5000)
    assert r.execute_command("LOCK.WAITFOR", "mine", "t1", 5000) == 0
    assert r.execute_command("LOCK.GRAPH") == []
    r.set("str", "v")
    with pytest.raises(redis.ResponseError, match="^WRONGTYPE"):
        r.execute_command("LOCK.WAITFOR", "str", "t1", 5000)


def test_waitfor_is_replaced_and_removed_on_acquire(r):
    r.execute_command("LOCK.ACQUIRE", "a", "x", 10000)
    r.execute_command("LOCK.ACQUIRE", "b", "y", 10000)
    assert r.execute_command("LOCK.WAITFOR", "a", "t", 5000) == 1
    assert r.execute_command("LOCK.WAITFOR", "b", "t", 5000) == 1
    assert [e[1] for e in r.execute_command("LOCK.GRAPH")] == [b"b"]
    r.execute_command("LOCK.RELEASE", "b", "y")
    r.execute_command("LOCK.ACQUIRE", "b", "t", 1000)
    assert r.execute_command("LOCK.GRAPH") == []


def test_wait_edges_expire(r):
    r.execute_command("LOCK.ACQUIRE", "a", "t1", 10000)
    r.execute_command("LOCK.ACQUIRE", "b", "t2", 10000)
    assert r.execute_command("LOCK.WAITFOR", "a", "t2", 150) == 1
    assert r.info("padlock")["padlock_wait_edges"] == 1
    time.sleep(0.25)
    assert r.info("padlock")["padlock_wait_edges"] == 0
    assert r.execute_command("LOCK.GRAPH") == []
    assert r.execute_command("LOCK.WAITFOR", "b", "t1", 1000) == 1, "no cycle any more"


def test_semaphore_or_wait_is_not_a_deadlock(r, bg):
    r.execute_command("LOCK.ACQUIRE", "L", "t1", 10000)
    r.execute_command("SEM.ACQUIRE", "S", "t2", 2, 10000)
    r.execute_command("SEM.ACQUIRE", "S", "t3", 2, 10000)
    bg("LOCK.ACQUIRE", "L", "t2", 10000, "BLOCK", 0)
    wait_blocked(r, 1)
    # t3 is free to finish and give its permit back: no deadlock.
    assert r.execute_command("SEM.ACQUIRE", "S", "t1", 2, 1000, "BLOCK", 100) is None
    assert r.execute_command("LOCK.WAITFOR", "S", "t1", 1000) == 1
    # Once t3 waits for L too, every permit holder is stuck on t1: t3's
    # own wait closes it (t1's declared wait counts like a blocked one).
    with pytest.raises(redis.ResponseError, match=r"^DEADLOCK t3 -> L -> t1 -> S -> t3$"):
        r.execute_command("LOCK.ACQUIRE", "L", "t3", 10000, "BLOCK", 0)
    # Without the declared edge, t3 waits, and t1 closes the cycle.
    r.execute_command("LOCK.ACQUIRE", "L2", "t9", 10000)
    assert r.execute_command("LOCK.WAITFOR", "L2", "t1", 1000) == 1, "replaces t1's edge"
    bg("LOCK.ACQUIRE", "L", "t3", 10000, "BLOCK", 0)
    wait_blocked(r, 2)
    with pytest.raises(redis.ResponseError, match=r"^DEADLOCK t1 -> S -> t[23] -> L -> t1$"):
        r.execute_command("SEM.ACQUIRE", "S", "t1", 2, 1000, "BLOCK", 0)


def test_graph_lists_blocked_waiters(r, bg):
    r.execute_command("SEM.ACQUIRE", "S", "h1", 1, 10000)
    bg("SEM.ACQUIRE", "S", "w", 1, 10000, "BLOCK", 5000)
    wait_blocked(r, 1)
    bg("LOCK.ACQUIRE", "S2", "z", 100)
    (edge,) = r.execute_command("LOCK.GRAPH")
    assert edge[:3] == [b"w", b"S", [b"h1"]]
    assert 4000 < edge[3] <= 5000
    r.execute_command("SEM.RELEASE", "S", "h1")
    assert wait_for(lambda: r.execute_command("LOCK.GRAPH") == [])


def test_three_party_deadlock_through_waitfor(r):
    for k, h in (("a", "t1"), ("b", "t2"), ("c", "t3")):
        r.execute_command("LOCK.ACQUIRE", k, h, 10000)
    assert r.execute_command("LOCK.WAITFOR", "b", "t1", 5000) == 1
    assert r.execute_command("LOCK.WAITFOR", "c", "t2", 5000) == 1
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("LOCK.WAITFOR", "a", "t3", 5000)
    assert str(e.value) == "DEADLOCK t3 -> a -> t1 -> b -> t2 -> c -> t3"
    assert len(r.execute_command("LOCK.GRAPH")) == 2


def test_deadlock_text_escapes_binary(r):
    r.execute_command("LOCK.ACQUIRE", b"k\n1", b"t\x001", 10000)
    r.execute_command("LOCK.ACQUIRE", "k2", "t2", 10000)
    assert r.execute_command("LOCK.WAITFOR", b"k\n1", "t2", 5000) == 1
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("LOCK.WAITFOR", "k2", b"t\x001", 5000)
    assert str(e.value) == "DEADLOCK t\\x001 -> k2 -> t2 -> k\\x0a1 -> t\\x001"


def test_waiting_on_own_semaphore_permits_is_a_deadlock(r):
    r.execute_command("SEM.ACQUIRE", "S", "me", 2, 10000, "PERMITS", 2)
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("SEM.ACQUIRE", "S", "me", 2, 10000, "BLOCK", 0)
    assert str(e.value) == "DEADLOCK me -> S -> me"
    assert r.info("padlock")["padlock_blocked_clients"] == 0


def test_multi_key_grant_keeps_lease_handover_on_its_other_keys(r, bg):
    """A waiter behind a multi-key grant on its *other* key is still handed
    that key promptly when the multi-key holder's lease runs out."""
    r.execute_command("LOCK.ACQUIRE", "{m}a", "x", 10000)
    multi = bg("LOCK.MACQUIRE", 2, "{m}a", "{m}b", "m", 300, "BLOCK", 0)
    wait_blocked(r, 1)
    behind_b = bg("LOCK.ACQUIRE", "{m}b", "y", 10000, "BLOCK", 0)
    wait_blocked(r, 2)
    r.execute_command("LOCK.RELEASE", "{m}a", "x")
    multi.result()
    t_end = time.time() + r.pttl("{m}b") / 1000
    assert behind_b.result() > 0
    assert (behind_b.done_at - t_end) * 1000 < 50


def test_declared_edges_are_bounded_and_go_with_a_flush(make_server):
    """docs/commands.md, LOCK.WAITFOR — edges bounded by max-wait-edges (-ERR beyond; a
    holder replacing its own edge is not a new one), removed with their
    key's database on FLUSHDB/FLUSHALL."""
    srv = make_server(module_args=["max-wait-edges", "3"])
    r, r1 = srv.client(), srv.client(db=1)
    for i in range(4):
        r.execute_command("LOCK.ACQUIRE", f"k{i}", "owner", 60000)
    for i in range(3):
        assert r.execute_command("LOCK.WAITFOR", f"k{i}", f"w{i}", 60000) == 1
    with pytest.raises(redis.ResponseError, match="too many wait edges.*max-wait-edges"):
        r.execute_command("LOCK.WAITFOR", "k3", "w3", 60000)
    assert r.execute_command("LOCK.WAITFOR", "k3", "w0", 60000) == 1, "w0 replaces its edge"
    assert r.info("padlock")["padlock_wait_edges"] == 3
    r.execute_command("FLUSHDB")
    assert r.info("padlock")["padlock_wait_edges"] == 0, "db 0's edges went with it"
    r1.execute_command("LOCK.ACQUIRE", "other", "owner", 60000)
    assert r1.execute_command("LOCK.WAITFOR", "other", "w9", 60000) == 1
    r.execute_command("LOCK.ACQUIRE", "k", "owner", 60000)
    assert r.execute_command("LOCK.WAITFOR", "k", "w1", 60000) == 1
    r.execute_command("FLUSHDB")
    assert r.info("padlock")["padlock_wait_edges"] == 1, "db 1's edge stays"
    assert r1.execute_command("LOCK.GRAPH")[0][:2] == [b"w9", b"other"]
    r.execute_command("FLUSHALL")
    assert r.info("padlock")["padlock_wait_edges"] == 0
    assert r1.execute_command("LOCK.GRAPH") == []


def test_graph_names_the_holders_of_every_kind_from_the_key_itself(r, bg):
    # LOCK.GRAPH replies each edge's holders straight from its key (a run
    # of edges on one key reads it once): every kind, several waiters on
    # one key, another database, and a key freed since the edge.
    r.execute_command("LOCK.ACQUIRE", "L", "h1", 10000)
    r.execute_command("SEM.ACQUIRE", "S", "a", 3, 10000)
    r.execute_command("SEM.ACQUIRE", "S", "b", 3, 10000)
    r.execute_command("RWLOCK.ACQUIRE", "RW", "r1", "READ", 10000)
    r.execute_command("RWLOCK.ACQUIRE", "RW", "r2", "READ", 10000)
    r.execute_command("LOCK.ACQUIRE", "gone", "g", 10000)
    for w in ("w1", "w2", "w3"):
        bg("LOCK.ACQUIRE", "L", w, 10000, "BLOCK", 5000)
    wait_blocked(r, 3)
    for key, waiter in (("L", "x1"), ("L", "x2"), ("S", "x"), ("RW", "y"), ("gone", "z")):
        assert r.execute_command("LOCK.WAITFOR", key, waiter, 5000) == 1
    r2 = redis.Redis(port=r.connection_pool.connection_kwargs["port"], db=2)
    r2.execute_command("LOCK.ACQUIRE", "L", "other-db", 10000)
    assert r2.execute_command("LOCK.WAITFOR", "L", "v", 5000) == 1
    r.execute_command("LOCK.RELEASE", "gone", "g")
    edges = {(e[0], e[1]): sorted(e[2]) for e in r.execute_command("LOCK.GRAPH")}
    assert edges == {
        (b"w1", b"L"): [b"h1"], (b"w2", b"L"): [b"h1"], (b"w3", b"L"): [b"h1"],
        (b"x1", b"L"): [b"h1"], (b"x2", b"L"): [b"h1"],
        (b"x", b"S"): [b"a", b"b"], (b"y", b"RW"): [b"r1", b"r2"],
        (b"z", b"gone"): [],
        (b"v", b"L"): [b"other-db"],
    }
    assert all(0 < e[3] <= 5000 for e in r.execute_command("LOCK.GRAPH"))
    assert b" db=0 " in r.execute_command("CLIENT", "INFO"), "the caller stays on its database"


@pytest.mark.parametrize("order", [("k1", "k2"), ("k2", "k1")])
def test_a_multi_key_wait_does_not_wait_for_its_own_hold(r, bg, order):
    # A holds k1 alone; its MACQUIRE of k1 and k2 waits for k2's holder
    # only, whichever place k1 has among the keys: no DEADLOCK through k1.
    r.execute_command("LOCK.ACQUIRE", "k1", "A", 10000)
    r.execute_command("LOCK.ACQUIRE", "k2", "C", 10000)
    w = bg("LOCK.MACQUIRE", 2, *order, "A", 10000, "BLOCK", 5000)
    wait_blocked(r, 1)
    assert r.info("padlock")["padlock_deadlocks"] == 0
    assert [b"A", b"k2", [b"C"]] in [e[:3] for e in r.execute_command("LOCK.GRAPH")]
    r.execute_command("LOCK.RELEASE", "k2", "C")
    assert len(w.result()) == 2
    info = r.execute_command("LOCK.INFO", "k1")
    assert dict(zip(info[::2], info[1::2]))[b"count"] == 2, "k1 reentered by A"


SEM_ORDERS = {
    "t2, t1, then t3": ["t2", "t1", "t3"],
    "t3, t1, then t2": ["t3", "t1", "t2"],
}


def sem_cycle_cmd(who, block):
    if who == "t1":
        return ["SEM.ACQUIRE", "S", "t1", 2, 10000, "PERMITS", 2, *block]
    return ["LOCK.ACQUIRE", "A", who, 10000, *block]


@pytest.mark.parametrize("order", list(SEM_ORDERS))
@pytest.mark.parametrize("last", ["BLOCK", "LOCK.WAITFOR"])
def test_a_deadlock_through_a_full_semaphore_is_found_in_any_order(r, bg, order, last):
    """t1 holds A; t2 and t3 fill S (limit 2); t1 waits for both permits.
    Once both permit holders wait for A, the three wait only on one
    another: the third edge is refused with -DEADLOCK (the first two are
    not: one permit holder is still free)."""
    r.execute_command("LOCK.ACQUIRE", "A", "t1", 10000)
    r.execute_command("SEM.ACQUIRE", "S", "t2", 2, 10000)
    r.execute_command("SEM.ACQUIRE", "S", "t3", 2, 10000)
    first, second, third = SEM_ORDERS[order]
    bg(*sem_cycle_cmd(first, ["BLOCK", 5000]))
    wait_blocked(r, 1)
    bg(*sem_cycle_cmd(second, ["BLOCK", 5000]))
    wait_blocked(r, 2)
    t0 = time.time()
    with pytest.raises(redis.ResponseError) as e:
        if last == "BLOCK":
            r.execute_command(*sem_cycle_cmd(third, ["BLOCK", 5000]))
        else:
            assert third != "t1"
            r.execute_command("LOCK.WAITFOR", "A", third, 10000)
    assert time.time() - t0 < 1, "at once, not after the timeout"
    text = str(e.value)
    assert text.startswith(f"DEADLOCK {third} -> ") and text.endswith(f" -> {third}"), text
    assert wait_blocked(r, 2) is None


def test_a_full_semaphore_with_a_free_permit_holder_is_no_deadlock(r, bg):
    """The same, but t3 never waits: t1 gets S once t3 leaves, so t2
    waiting for A closes no deadlock."""
    r.execute_command("LOCK.ACQUIRE", "A", "t1", 10000)
    r.execute_command("SEM.ACQUIRE", "S", "t2", 2, 10000)
    r.execute_command("SEM.ACQUIRE", "S", "t3", 2, 10000)
    bg(*sem_cycle_cmd("t1", ["BLOCK", 5000]))
    wait_blocked(r, 1)
    w = bg(*sem_cycle_cmd("t2", ["BLOCK", 5000]))
    wait_blocked(r, 2)
    assert r.execute_command("LOCK.WAITFOR", "A", "t4", 10000) == 1
    r.execute_command("SEM.RELEASE", "S", "t3")
    assert not w.done()
