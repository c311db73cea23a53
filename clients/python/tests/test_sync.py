"""The blocking classes against a real server."""

import threading
import time

import pytest
import redis

from conftest import wait_for
from padlock import (
    DeadlockError,
    Lock,
    LockLostError,
    MultiLock,
    NotHeldError,
    ReadWriteLock,
    Semaphore,
    graph,
    to_dot,
)


def test_acquire_release_and_fences_increase(r):
    lock = Lock(r, "k", ttl=5)
    f1 = lock.acquire()
    assert f1 and lock.owned() and lock.locked() and len(lock.holder) == 32
    lock.release()
    assert not lock.locked()
    f2 = lock.acquire()
    assert f2 > f1, "a new fence on every fresh acquire"
    lock.release()


def test_reentrant_and_context_manager(r):
    lock = Lock(r, "k", ttl=5)
    with lock:
        assert lock.acquire() == lock.fence, "reentry keeps the fence"
        assert int(lock.info()["count"]) == 2
        lock.release()
        assert lock.held
    assert not lock.locked() and not lock.held


def test_other_holder_waits_server_side(r):
    a, b = Lock(r, "k", ttl=5, holder="a"), Lock(r, "k", ttl=5, holder="b")
    a.acquire()
    assert b.acquire(blocking=False) is None
    t0 = time.time()
    assert b.acquire(timeout=0.3) is None
    assert 0.25 < time.time() - t0 < 2
    threading.Timer(0.2, a.release).start()
    assert b.acquire(timeout=5) > a.fence
    b.release()


def test_holder_given_and_release_by_others_refused(r):
    mine = Lock(r, "k", holder="worker-1", ttl=5)
    mine.acquire()
    other = Lock(r, "k", holder="worker-2", ttl=5)
    other._depth = 1  # pretend, as a stale owner would
    with pytest.raises(NotHeldError):
        other.release()
    assert mine.owned()
    mine.release()
    with pytest.raises(NotHeldError):
        mine.release()


@pytest.mark.parametrize("keep", [True, False])
def test_short_lease_lives_while_held(r, keep):
    lock = Lock(r, "k", ttl=0.3, keep=keep)
    lock.acquire()
    time.sleep(1.2)
    assert lock.owned() and not lock.lost.is_set()
    assert (int(lock.info()["keep"]) == 1) == keep
    lock.release()


def test_loss_is_noticed_within_one_interval(r):
    seen = []
    lock = Lock(r, "k", ttl=0.6, on_lost=seen.append)
    lock.acquire()
    r.delete("k")
    t0 = time.time()
    assert wait_for(lock.lost.is_set, timeout=2)
    assert time.time() - t0 <= 0.2 + 0.15, "within ttl/3 and a little"
    # `on_lost` runs on a thread of its own, right after `lost` is set.
    assert wait_for(lambda: seen == [lock], timeout=2)
    with pytest.raises(LockLostError):
        lock.check()
    with pytest.raises(LockLostError):
        with Lock(r, "k2", ttl=0.3) as l2:
            r.delete("k2")
            time.sleep(0.5)
    assert l2.lost.is_set()


def test_killed_connection_rebinds(r):
    lock = Lock(r, "k", ttl=0.6)
    lock.acquire()
    for line in r.execute_command("CLIENT", "LIST").decode().splitlines():
        fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
        if fields.get("cmd") in ("lock.acquire", "lock.extend") and fields["id"] != str(r.client_id()):
            r.execute_command("CLIENT", "KILL", "ID", fields["id"])
    time.sleep(1.0)
    assert lock.owned() and not lock.lost.is_set(), "the watcher reconnected and bound again"
    assert int(lock.info()["keep"]) == 1
    lock.release()


def test_semaphore(r):
    a = Semaphore(r, "s", 3, permits=2, ttl=5, holder="a")
    b = Semaphore(r, "s", 3, permits=2, ttl=5, holder="b")
    assert a.acquire() == 2
    assert b.acquire(blocking=False) is None
    with Semaphore(r, "s", 3, ttl=5, holder="c") as c:
        assert int(c.info()["used"]) == 3
    a.release()
    assert b.acquire(timeout=1) == 2
    b.release()


def test_multilock(r):
    with MultiLock(r, ["a", "b"], ttl=5) as m:
        assert len(m.fences or []) == 2
        assert Lock(r, "b", ttl=5, holder="other").acquire(blocking=False) is None
    assert not r.exists("a", "b")


def test_read_write_lock(r):
    reader = ReadWriteLock(r, "rw", ttl=5, holder="reader")
    other = ReadWriteLock(r, "rw", ttl=5, holder="other")
    with reader.read(), other.read():
        assert len(reader.info()["holders"]) in (2, 4)
        writer = ReadWriteLock(r, "rw", ttl=5, holder="writer")
        assert writer.write().acquire(blocking=False) is None
    with reader.read():
        # Upgrade: the only reader may write.
        assert reader.write().acquire(timeout=1) == reader.read().fence
        reader.write().release()
    assert not r.exists("rw")


def test_deadlock_error_carries_the_cycle(r):
    t1, t2 = Lock(r, "a1", holder="t1", ttl=5), Lock(r, "a2", holder="t2", ttl=5)
    t1.acquire()
    t2.acquire()
    waiter = Lock(r, "a1", holder="t2", ttl=5)
    th = threading.Thread(target=waiter.acquire, daemon=True)
    th.start()
    assert wait_for(lambda: r.info("padlock")["padlock_mailbox_waiters"] == 1)
    with pytest.raises(DeadlockError) as e:
        Lock(r, "a2", holder="t1", ttl=5).acquire()
    assert e.value.cycle == ["t1", "a2", "t2", "a1", "t1"]
    edges = graph(r)
    assert [(e.waiter, e.key, e.holders) for e in edges] == [("t2", "a1", ("t1",))]
    assert '"t2" -> "key:a1"' in to_dot(edges)
    t1.release()
    th.join(5)
    waiter.release()
    t2.release()


def test_restart_grace_is_retried_up_to_the_timeout(grace_server):
    r = grace_server.client()
    assert Lock(r, "k", ttl=5).acquire(timeout=0.1) is None
    t0 = time.time()
    assert Lock(r, "k", ttl=5).acquire(timeout=5) > 0
    assert time.time() - t0 < 3
    r.close()


def test_cluster_client(cluster_server):
    rc = redis.RedisCluster(host="127.0.0.1", port=cluster_server.port)
    with Lock(rc, "{job}:1", ttl=5) as lock:
        assert lock.fence and lock.owned()
    with MultiLock(rc, ["{job}:1", "{job}:2"], ttl=5) as m:
        assert len(m.fences or []) == 2
    rc.close()


def test_a_thousand_holds_share_one_thread_and_one_connection(server, r):
    """Issues 24 and 39: 1,000 concurrent holds in one process use one
    watcher thread, one mailman thread and two connections; once each is
    bound with its mailbox (`KEEP MAILBOX`, one EXTEND each), watching them
    all costs one PING per interval: no EXTEND, no LOCK.INFO per hold."""
    import threading

    from padlock import _thread_runtime as _shared

    before_threads = threading.active_count()
    client = redis.Redis(port=server.port)
    locks = [Lock(client, f"many:{i}", ttl=0.9) for i in range(1000)]
    for lock in locks:
        assert lock.acquire(blocking=False) is not None
    # One watcher thread for all (and the mailman's, should the first
    # rounds have begun on a slow machine).
    assert threading.active_count() - before_threads <= 2, "one watcher thread for all"
    assert _shared.SCHEDULER.threads() == 1
    time.sleep(1.5)  # every hold's first round: bound with the mailbox
    assert threading.active_count() - before_threads <= 2, "and one mailman"
    conns = r.client_list()
    assert len(conns) <= 3, f"{len(conns)} connections: keeper, mailman and the test's own"
    r.config_resetstat()
    time.sleep(1.5)  # five rounds of every hold
    stats = r.info("commandstats")
    # (A hold whose round came late, on a loaded machine, may bind once more.)
    assert stats.get("cmdstat_lock.extend", {"calls": 0})["calls"] < 50, "kept leases are not renewed by the client"
    assert "cmdstat_lock.info" not in stats, "nor read one by one"
    assert stats["cmdstat_ping"]["calls"] <= 12, stats["cmdstat_ping"]  # twice per interval
    assert all(lock.held for lock in locks)
    assert r.dbsize() == 1000
    for lock in locks:
        lock.release()
    assert r.dbsize() == 0
    client.close()


def test_a_wait_is_bound_on_the_shared_connection_once_granted(server, r):
    """A blocking acquire waits on a connection of its own (closed after the
    wait); its grant is bound with KEEP on the shared one, so it outlives
    the wait's connection."""
    r.execute_command("LOCK.ACQUIRE", "w", "other", 300)
    lock = Lock(redis.Redis(port=server.port), "w", ttl=0.6, holder="waiter")
    assert lock.acquire(timeout=5) is not None
    assert int(lock.info()["keep"]) == 1
    time.sleep(1.5)
    assert lock.held and r.execute_command("LOCK.INFO", "w")[5] == b"waiter"
    lock.release()


def test_watching_costs_no_wakeup_per_acquire(server, monkeypatch):
    """Issue 39's uncontended path: an acquire adds its hold's first round
    to the watcher's heap without waking the watcher (unless it is the
    earliest), and the rounds of released holds are dropped in bulk, not
    one wake-up each when they come due."""
    from padlock import _thread_runtime as _shared

    # A watcher of its own: earlier tests' holds may still be watched.
    monkeypatch.setattr(_shared, "SCHEDULER", _shared.Scheduler())
    client = redis.Redis(port=server.port)
    anchor = Lock(client, "wake:anchor", ttl=30)  # an earlier round: the watcher sleeps on it
    assert anchor.acquire() is not None
    time.sleep(0.2)
    lock = Lock(client, "wake:k", ttl=60)
    wakes, before = _shared.SCHEDULER.wakes, _shared.SCHEDULER.rounds()
    for _ in range(3000):
        assert lock.acquire() is not None
        lock.release()
    assert _shared.SCHEDULER.wakes - wakes < 20
    assert _shared.SCHEDULER.rounds() <= 2 * before + 130, "released holds' rounds are purged"
    anchor.release()
