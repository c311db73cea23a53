"""Lost replies, dead and half-open connections, keys replaced by another
type, errors during renewal: the client never doubles a hold, never frees
a nested one, never says `held` once the lease may have run out, and
always reports a loss (docs/commands.md, "Retries")."""

import threading
import time

import pytest
import redis

from faultproxy import FaultProxy  # scripts/, on the path (conftest)
from padlock import sync
from padlock import NotHeldError


# glide's own modules warn about each other's imports (the glide driver).
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture
def proxy(server):
    p = FaultProxy(server.port)
    yield p
    p.close()


@pytest.fixture(params=["redis-py", "glide"])
def via(request, proxy):
    """A client whose connections pass through the proxy: redis-py's, or
    valkey-glide-sync's (padlock's own glide clients)."""
    if request.param == "glide":
        glide_sync = pytest.importorskip("glide_sync")
        cfg = glide_sync.GlideClientConfiguration([glide_sync.NodeAddress("127.0.0.1", proxy.port)])
        yield sync.glide(glide_sync.GlideClient, cfg)
        return
    c = redis.Redis(port=proxy.port)
    yield c
    c.close()


def count(r, key):
    raw = r.execute_command("LOCK.INFO", key)
    return 0 if raw is None else dict(zip(raw[::2], raw[1::2]))[b"count"]


def test_a_lost_acquire_reply_is_resent_with_its_id(r, via, proxy):
    lock = sync.Lock(via, "k", ttl=5)
    proxy.drop("LOCK.ACQUIRE")
    fence = lock.acquire(blocking=False)
    assert proxy.dropped == 1
    assert fence == dict(zip(*[iter(r.execute_command("LOCK.INFO", "k"))] * 2))[b"fence"]
    assert count(r, "k") == 1
    lock.release()
    assert not r.exists("k")


def test_a_lost_inner_release_reply_does_not_free_the_outer_hold(r, via, proxy):
    lock = sync.Lock(via, "k", ttl=5)
    with lock:
        with lock:
            assert count(r, "k") == 2
            proxy.drop("LOCK.RELEASE")
        assert proxy.dropped == 1
        # The outer level still holds: nobody else gets in.
        assert count(r, "k") == 1
        assert sync.Lock(r, "k", ttl=5, holder="other").acquire(blocking=False) is None
        assert lock.held
    assert not r.exists("k")


def test_a_lost_blocking_acquire_reply_is_answered_by_the_resend(r, via, proxy):
    r.execute_command("LOCK.ACQUIRE", "k", "owner", 5000)
    lock = sync.Lock(via, "k", ttl=5)
    proxy.drop("LOCK.ACQUIRE")
    got = {}
    t = threading.Thread(target=lambda: got.setdefault("fence", lock.acquire(timeout=10)))
    t.start()
    time.sleep(0.3)
    r.execute_command("LOCK.RELEASE", "k", "owner")
    t.join(10)
    assert got["fence"] and count(r, "k") == 1
    lock.release()
    assert not r.exists("k")


@pytest.mark.parametrize("lost", ["LOCK.ACQUIRE", "LOCK.EXTEND"])
def test_a_kept_lease_answered_to_a_resend_is_bound_again(r, via, proxy, lost):
    """A `KEEP` acquire or renewal whose reply was lost (the server applied
    it, the connection closed) is resent with its id and answered from the
    server's memory of the first sending, which bound the lease to the
    connection that closed. The client binds it again on the new one: the
    hold outlives its ttl, kept, and is never told lost."""
    lock = sync.Lock(via, "k", ttl=0.6)
    if lost == "LOCK.EXTEND":
        lock.acquire()
    proxy.drop(lost)
    if lost == "LOCK.ACQUIRE":
        assert lock.acquire(timeout=5)  # a wait, through the mailbox, granted at once
    else:
        assert lock.renew()
    assert proxy.dropped == 1
    time.sleep(1.5)  # the first connection's binding would have run out
    info = dict(zip(*[iter(r.execute_command("LOCK.INFO", "k") or [])] * 2))
    assert info.get(b"keep") == 1, info
    assert lock.held and not lock.lost.is_set()
    lock.release()
    assert not r.exists("k")


def test_semaphore_permits_are_not_doubled(r, via, proxy):
    sem = sync.Semaphore(via, "s", 3, permits=1, ttl=5)
    proxy.drop("SEM.ACQUIRE")
    assert sem.acquire(blocking=False) == 1
    info = dict(zip(*[iter(r.execute_command("SEM.INFO", "s"))] * 2))
    assert info[b"used"] == 1
    sem.release()
    assert not r.exists("s")


def test_a_read_hold_is_not_leaked_into_the_pool(r, via, proxy):
    rw = sync.ReadWriteLock(via, "rw", ttl=2)
    proxy.drop("RWLOCK.ACQUIRE")
    with rw.read():
        pass
    assert not r.exists("rw")
    # A writer gets in at once: nothing is kept on a pooled connection.
    assert r.execute_command("RWLOCK.ACQUIRE", "rw", "w", "WRITE", 1000) > 0


def test_multilock_and_its_release(r, via, proxy):
    m = sync.MultiLock(via, ["a", "b"], ttl=5)
    proxy.drop("LOCK.MACQUIRE")
    assert len(m.acquire(blocking=False)) == 2
    assert count(r, "a") == 1 and count(r, "b") == 1
    proxy.drop("LOCK.MRELEASE")
    m.release()
    assert not r.exists("a") and not r.exists("b")


def test_a_key_replaced_by_a_string_is_noticed(r):
    lost = threading.Event()
    lock = sync.Lock(r, "k", ttl=0.6, on_lost=lambda h: lost.set())
    lock.acquire()
    r.delete("k")
    r.set("k", "x")
    assert lost.wait(2)
    assert not lock.held
    with pytest.raises(NotHeldError):
        lock.release()
    assert not lock.renew()


def test_errors_while_renewing_end_in_a_loss_once_the_lease_may_be_over(r, server):
    # The hold's user may no longer renew: every renewal fails with NOPERM.
    r.execute_command("ACL", "SETUSER", "app", "on", "nopass", "+@all", "~*")
    app = redis.Redis(port=server.port, username="app", password="x")
    lost = threading.Event()
    lock = sync.Lock(app, "k", ttl=0.9, keep=False, on_lost=lambda h: lost.set())
    start = time.monotonic()
    lock.acquire()
    r.execute_command("ACL", "SETUSER", "app", "-lock.extend")
    assert lost.wait(3)
    took = time.monotonic() - start
    # Not before the lease could have run out, and within one interval of it.
    assert 0.8 <= took <= 0.9 + 0.6, took
    assert not lock.held


def test_held_never_outlives_the_lease_through_a_half_open_connection(r, via, proxy):
    lost = threading.Event()
    lock = sync.Lock(via, "k", ttl=0.9, keep=False, on_lost=lambda h: lost.set())
    lock.acquire()
    proxy.blackhole()
    time.sleep(0.95)
    assert not lock.held
    assert lost.wait(2)


def test_a_hold_lost_unanswered_is_released_before_its_holder_takes_again(r, via, proxy):
    # Its renewals get no answer (a half-open connection): reported lost
    # while the server may still count it. The holder's next take is a
    # fresh hold (a new fence), not a reentry of the lost one.
    lock = sync.Lock(via, "k", ttl=2)
    old = lock.acquire()
    proxy.blackhole()
    assert lock.lost.wait(5)
    assert count(r, "k") == 1
    again = sync.Lock(r, "k", ttl=5)  # this thread's holder too
    fence = again.acquire(blocking=False)
    assert fence is not None and fence > old, (old, fence)
    assert count(r, "k") == 1
    again.release()
    assert not r.exists("k")


def test_a_killed_hold_connection_is_renewed_on_a_new_one(r, via):
    lock = sync.Lock(via, "k", ttl=0.9)
    lock.acquire()
    for c in r.client_list():
        if c["cmd"].startswith("lock."):
            r.client_kill_filter(_id=c["id"])
    time.sleep(1.5)
    assert lock.held and count(r, "k") == 1
    lock.release()
    assert not r.exists("k")


def test_renew_and_release_of_a_lock_not_held(r, server):
    lock = sync.Lock(r, "k", ttl=1)
    calls = r.info("commandstats").get("cmdstat_lock.extend", {}).get("calls", 0)
    assert lock.renew() is False
    assert r.info("commandstats").get("cmdstat_lock.extend", {}).get("calls", 0) == calls
    with pytest.raises(NotHeldError):
        lock.release()


def test_a_lost_hold_gives_its_connection_back_at_once(r):
    c = redis.Redis(port=r.connection_pool.connection_kwargs["port"], max_connections=1)
    lock = sync.Lock(c, "k", ttl=0.6)
    lock.acquire()
    r.delete("k")
    r.set("k", "x")
    assert lock.lost.wait(2)
    # The pool's only connection is free again.
    assert c.ping()
