"""docs/commands.md, Blocking rules — FIFO waits with server-side hand-off, timeouts,
cleanup, lease expiry, DEL/FLUSH, MULTI/Lua, semaphores, multi-key."""

import time

import pytest
import redis

from conftest import blocked, synced, wait_blocked, wait_for
from test_locks import info
from test_semaphores import sinfo


def test_fifo_order_across_releases(r, bg):
    r.execute_command("LOCK.ACQUIRE", "k", "a", 10000)
    waiters = []
    for i, h in enumerate(["b", "c", "d"]):
        waiters.append(bg("LOCK.ACQUIRE", "k", h, 10000, "BLOCK", 0))
        wait_blocked(r, i + 1)
    assert info(r, "k")["waiters"] == 3
    holder = "a"
    fences = []
    for w, h in zip(waiters, ["b", "c", "d"]):
        assert not w.done()
        assert r.execute_command("LOCK.RELEASE", "k", holder) == 0
        fences.append(w.result())
        i = info(r, "k")
        assert i["holder"] == h.encode() and i["fence"] == fences[-1]
        holder = h
    assert fences == sorted(fences)
    assert info(r, "k")["waiters"] == 0


def test_queued_key_is_not_free_for_newcomers(r, bg):
    r.execute_command("LOCK.ACQUIRE", "k2", "x", 10000)
    w = bg("LOCK.MACQUIRE", 2, "k1", "k2", "w", 10000, "BLOCK", 0)
    wait_blocked(r, 1)
    assert not r.exists("k1")
    assert r.execute_command("LOCK.ACQUIRE", "k1", "other", 1000) is None, "k1 is the head's"
    late = bg("LOCK.ACQUIRE", "k1", "late", 1000, "BLOCK", 0)
    wait_blocked(r, 2)
    r.execute_command("LOCK.RELEASE", "k2", "x")
    fences = w.result()
    assert len(fences) == 2
    assert info(r, "k1")["holder"] == b"w" and info(r, "k2")["holder"] == b"w"
    assert not late.done()
    r.execute_command("LOCK.MRELEASE", 2, "k1", "k2", "w")
    assert late.result() > fences[1]


def test_holder_may_reenter_while_others_wait(r, bg):
    f = r.execute_command("LOCK.ACQUIRE", "k", "a", 10000)
    w = bg("LOCK.ACQUIRE", "k", "b", 10000, "BLOCK", 0)
    wait_blocked(r, 1)
    assert r.execute_command("LOCK.ACQUIRE", "k", "a", 10000) == f
    r.execute_command("LOCK.RELEASE", "k", "a")
    assert not w.done()
    r.execute_command("LOCK.RELEASE", "k", "a")
    assert w.result() > f


def test_timeout_replies_nil_and_leaves_the_queue(r, bg):
    r.execute_command("LOCK.ACQUIRE", "k", "a", 10000)
    t0 = time.time()
    w = bg("LOCK.ACQUIRE", "k", "b", 1000, "BLOCK", 200)
    assert w.result() is None
    assert 0.15 < w.done_at - t0 < 2
    assert blocked(r) == 0 and info(r, "k")["waiters"] == 0
    assert r.info("padlock")["padlock_timeouts"] == 1
    assert r.execute_command("LOCK.GRAPH") == []


def test_client_unblock_replies_nil(r, bg):
    r.execute_command("LOCK.ACQUIRE", "k", "a", 10000)
    w = bg("LOCK.ACQUIRE", "k", "b", 1000, "BLOCK", 0)
    wait_blocked(r, 1)
    assert r.client_unblock(w.client_id) == 1
    assert w.result() is None
    assert blocked(r) == 0


def test_disconnect_leaves_queue_and_graph(r, bg):
    r.execute_command("LOCK.ACQUIRE", "k", "a", 10000)
    gone = bg("LOCK.ACQUIRE", "k", "b", 1000, "BLOCK", 0)
    wait_blocked(r, 1)
    nxt = bg("LOCK.ACQUIRE", "k", "c", 1000, "BLOCK", 0)
    wait_blocked(r, 2)
    assert len(r.execute_command("LOCK.GRAPH")) == 2
    r.client_kill_filter(_id=gone.client_id)
    wait_blocked(r, 1)
    assert info(r, "k")["waiters"] == 1
    assert [e[0] for e in r.execute_command("LOCK.GRAPH")] == [b"c"]
    r.execute_command("LOCK.RELEASE", "k", "a")
    assert nxt.result() > 0
    assert info(r, "k")["holder"] == b"c"


def test_disconnect_of_head_serves_the_next(r, bg):
    r.execute_command("LOCK.ACQUIRE", "k2", "x", 10000)
    head = bg("LOCK.MACQUIRE", 2, "k1", "k2", "w", 10000, "BLOCK", 0)
    wait_blocked(r, 1)
    behind = bg("LOCK.ACQUIRE", "k1", "b", 10000, "BLOCK", 0)
    wait_blocked(r, 2)
    r.client_kill_filter(_id=head.client_id)
    assert behind.result() > 0, "k1 was free; its new head is served at once"


def test_lease_expiry_hands_over_promptly(r, bg):
    r.execute_command("LOCK.ACQUIRE", "k", "a", 300)
    deadline = time.time() + r.pttl("k") / 1000
    w = bg("LOCK.ACQUIRE", "k", "b", 10000, "BLOCK", 0)
    assert w.result() > 0
    late_ms = (w.done_at - deadline) * 1000
    assert late_ms < 50, f"handed over {late_ms:.1f} ms after the lease ended"
    assert info(r, "k")["holder"] == b"b"
    assert r.info("padlock")["padlock_handoffs"] == 1


@pytest.mark.parametrize("how", ["DEL", "UNLINK", "FLUSHDB", "FLUSHALL"])
def test_removal_serves_the_first_waiter(r, bg, how):
    r.execute_command("LOCK.ACQUIRE", "k", "a", 10000)
    w = bg("LOCK.ACQUIRE", "k", "b", 10000, "BLOCK", 0)
    wait_blocked(r, 1)
    if how in ("DEL", "UNLINK"):
        r.execute_command(how, "k")
    else:
        r.execute_command(how)
    assert w.result() > 0
    assert info(r, "k")["holder"] == b"b"


def test_multi_and_lua_never_block(r):
    r.execute_command("LOCK.ACQUIRE", "k", "a", 10000)
    p = r.pipeline(transaction=True)
    p.execute_command("LOCK.ACQUIRE", "k", "b", 1000, "BLOCK", 0)
    p.execute_command("SEM.ACQUIRE", "s", "x", 1, 1000)
    p.execute_command("SEM.ACQUIRE", "s", "y", 1, 1000, "BLOCK", 0)
    assert p.execute() == [None, 1, None]
    assert r.eval("return redis.call('LOCK.ACQUIRE', KEYS[1], 'b', 100, 'BLOCK', 0)", 1, "k") is None
    assert blocked(r) == 0


def test_wrongtype_while_waiting(r, bg):
    r.execute_command("LOCK.ACQUIRE", "k", "a", 10000)
    w = bg("LOCK.ACQUIRE", "k", "b", 10000, "BLOCK", 0)
    wait_blocked(r, 1)
    p = r.pipeline(transaction=True)
    p.delete("k")
    p.set("k", "string")
    p.execute()
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        w.result()
    assert r.get("k") == b"string"


def test_semaphore_fifo_no_overtaking(r, bg):
    r.execute_command("SEM.ACQUIRE", "s", "a", 3, 10000, "PERMITS", 2)
    big = bg("SEM.ACQUIRE", "s", "big", 3, 10000, "PERMITS", 2, "BLOCK", 0)
    wait_blocked(r, 1)
    assert r.execute_command("SEM.ACQUIRE", "s", "small", 3, 10000) is None, "1 is free, but big is first"
    small = bg("SEM.ACQUIRE", "s", "small", 3, 10000, "BLOCK", 0)
    wait_blocked(r, 2)
    assert sinfo(r, "s")["waiters"] == 2
    r.execute_command("SEM.RELEASE", "s", "a")
    assert big.result() == 2
    assert small.result() == 1, "served in the same hand-off"
    assert sinfo(r, "s")["used"] == 3


def test_semaphore_holder_lease_expiry_hands_over(r, bg):
    r.execute_command("SEM.ACQUIRE", "s", "short", 1, 200)
    t_end = time.time() + 0.2
    w = bg("SEM.ACQUIRE", "s", "next", 1, 10000, "BLOCK", 0)
    assert w.result() == 1
    assert (w.done_at - t_end) * 1000 < 60
    assert list(sinfo(r, "s")["holders"]) == [b"next"]


def test_macquire_block_waits_for_all(r, bg):
    r.execute_command("LOCK.ACQUIRE", "a", "x", 10000)
    r.execute_command("LOCK.ACQUIRE", "b", "y", 10000)
    w = bg("LOCK.MACQUIRE", 2, "a", "b", "w", 10000, "BLOCK", 0)
    wait_blocked(r, 1)
    r.execute_command("LOCK.RELEASE", "a", "x")
    time.sleep(0.05)
    assert not w.done() and not r.exists("a"), "a waits for b: nothing taken yet"
    r.execute_command("LOCK.RELEASE", "b", "y")
    fences = w.result()
    assert len(fences) == 2 and info(r, "a")["holder"] == b"w"


def test_grants_reach_the_replica(make_server):
    from test_durability import start_pair, lock_state
    from conftest import Background
    master, replica, m, rep = start_pair(make_server)
    m.execute_command("LOCK.ACQUIRE", "k", "a", 200)
    w1 = Background(master, "LOCK.ACQUIRE", "k", "b", 400, "BLOCK", 0)
    # b must queue before c (or already hold): two threads started
    # together reach the server in either order.
    assert wait_for(lambda: w1.done() or blocked(m) == 1, timeout=5)
    w2 = Background(master, "LOCK.ACQUIRE", "k", "c", 30000, "BLOCK", 0)
    f1 = w1.result()
    f2 = w2.result()
    assert f2 > f1
    synced(m, rep)  # (c was granted by a timer, not by m)
    assert lock_state(rep, "k") == lock_state(m, "k") == (b"c", 1, f2)
    assert abs(rep.pttl("k") - m.pttl("k")) < 100


def test_eviction_serves_the_first_waiter(r, bg):
    r.execute_command("LOCK.ACQUIRE", "k", "a", 60000)
    w = bg("LOCK.ACQUIRE", "k", "b", 60000, "BLOCK", 0)
    wait_blocked(r, 1)
    # Only keys with an expiry may be evicted: the lock is the only one.
    r.config_set("maxmemory-policy", "volatile-lru")
    r.config_set("maxmemory", r.info("memory")["used_memory"] + 200_000)
    for i in range(40):
        try:
            r.set(f"filler:{i}", "x" * 20_000)
        except redis.exceptions.OutOfMemoryError:
            break
    assert w.result(timeout=5) > 0, "evicting the lock served the waiter"
    r.config_set("maxmemory", 0)


def test_timeout_racing_a_grant_is_never_a_lost_grant(server):
    """Lease end and BLOCK timeout at the same moment: a waiter told nil
    must not hold the lock, and one told a fence must. (With Redis' own
    client timeout, 7.0 dropped the reply of a client granted in the pass
    its timeout came due, and the client hung: padlock runs timeouts.)"""
    from conftest import Background
    r = server.client()
    for i in range(30):
        key = f"race{i}"
        r.execute_command("LOCK.ACQUIRE", key, "a", 50)
        w = Background(server, "LOCK.ACQUIRE", key, "b", 5000, "BLOCK", 51)
        got = w.result()
        state = info(r, key)
        if got is None:
            assert state is None or state["holder"] != b"b", i
        else:
            assert state is not None and state["holder"] == b"b" and state["fence"] == got, i
        w.client.close()
    assert wait_for(lambda: blocked(r) == 0)


def test_semaphore_keyspace_events(server):
    r = server.client()
    r.config_set("notify-keyspace-events", "Kd")
    p = server.client().pubsub()
    p.psubscribe("__keyspace@0__:s")
    p.get_message(timeout=1)
    r.execute_command("SEM.ACQUIRE", "s", "a", 2, 60)
    r.execute_command("SEM.ACQUIRE", "s", "b", 2, 5000)
    r.execute_command("SEM.RELEASE", "s", "b")
    events = []
    deadline = time.time() + 2
    while time.time() < deadline and len(events) < 4:
        m = p.get_message(timeout=0.1)
        if m and m["type"] == "pmessage":
            events.append(m["data"].decode())
    assert events[:3] == ["sem.acquire", "sem.acquire", "sem.release"]
    p.close()


def test_client_unblock_racing_a_grant_never_hangs(server):
    """CLIENT UNBLOCK landing in the pass a waiter is granted: Redis 7.0
    drops that reply. The waiter must then get nil, a fence it holds, or a
    closed connection with the grant taken back; never a silent hang."""
    import threading
    from conftest import Background
    r = server.client()
    outcomes = set()
    for i in range(40):
        key = f"unb{i}"
        r.execute_command("LOCK.ACQUIRE", key, "a", 30)
        w = Background(server, "LOCK.ACQUIRE", key, "b", 5000, "BLOCK", 0)
        w.client.connection_pool.connection_kwargs["socket_timeout"] = 5
        deadline = time.time() + 0.028 + (i % 5) * 0.001
        while time.time() < deadline:
            pass
        for _ in range(5):
            r.client_unblock(w.client_id)
            time.sleep(0.0005)
        try:
            got = w.result(timeout=8)
        except redis.ConnectionError:
            got = "dropped"
        state = info(r, key)
        if got is None or got == "dropped":
            assert wait_for(lambda: (info(r, key) or {}).get("holder") != b"b"), i
        else:
            assert state["holder"] == b"b" and state["fence"] == got, i
        outcomes.add("nil" if got is None else "dropped" if got == "dropped" else "fence")
    assert wait_for(lambda: blocked(r) == 0)


def test_pexpire_moves_the_handover(r, bg):
    r.execute_command("LOCK.ACQUIRE", "k", "a", 60000)
    w = bg("LOCK.ACQUIRE", "k", "b", 10000, "BLOCK", 0)
    wait_blocked(r, 1)
    r.pexpire("k", 100)
    t_end = time.time() + 0.1
    assert w.result() > 0
    assert (w.done_at - t_end) * 1000 < 50, "handed over when the new lease ended"


def test_semaphore_del_serves_waiters(r, bg):
    r.execute_command("SEM.ACQUIRE", "s", "a", 1, 60000)
    w = bg("SEM.ACQUIRE", "s", "b", 1, 10000, "BLOCK", 0)
    wait_blocked(r, 1)
    r.delete("s")
    assert w.result() == 1
    assert list(sinfo(r, "s")["holders"]) == [b"b"]


def test_block_reenters_at_once(r):
    f = r.execute_command("LOCK.ACQUIRE", "k", "a", 10000)
    assert r.execute_command("LOCK.ACQUIRE", "k", "a", 10000, "BLOCK", 0) == f
    assert info(r, "k")["count"] == 2


def test_macquire_block_timeout_changes_nothing(r):
    r.execute_command("LOCK.ACQUIRE", "b", "x", 10000)
    assert r.execute_command("LOCK.MACQUIRE", 2, "a", "b", "w", 1000, "BLOCK", 100) is None
    assert not r.exists("a") and info(r, "b")["holder"] == b"x"
    assert blocked(r) == 0


def test_block_works_in_resp3(server):
    r3 = server.client(protocol=3)
    r3.execute_command("LOCK.ACQUIRE", "k", "a", 10000)
    from conftest import Background
    w = Background(server, "LOCK.ACQUIRE", "k", "b", 10000, "BLOCK", 0)
    assert wait_for(lambda: blocked(r3) == 1)
    r3.execute_command("LOCK.RELEASE", "k", "a")
    assert w.result() > 0


def test_a_key_deleted_in_one_database_serves_the_waiters_there_only(server, r):
    # A removal is noted by name alone; the key with that name in another
    # database, and its waiter, are left as they are.
    import threading

    r3 = server.client(db=3)
    for c in (r, r3):
        c.execute_command("LOCK.ACQUIRE", "k", "owner", 60000)
    got = {}

    def wait(db):
        c = server.client(db=db, socket_timeout=30)
        got[db] = c.execute_command("LOCK.ACQUIRE", "k", f"w{db}", 60000, "BLOCK", 10000)

    threads = {db: threading.Thread(target=wait, args=(db,), daemon=True) for db in (0, 3)}
    for t in threads.values():
        t.start()
    wait_blocked(r, 2)
    r3.delete("k")
    threads[3].join(5)
    assert isinstance(got.get(3), int) and got[3] > 0
    assert info(r3, "k")["holder"] == b"w3"
    time.sleep(0.3)
    assert 0 not in got and blocked(r) == 1
    r.execute_command("PEXPIRE", "k", 1)
    threads[0].join(5)
    assert isinstance(got.get(0), int) and got[0] > 0
