"""The blocking classes on valkey-glide-sync: every kind, and a cluster
(GlideClusterClient, routing by key). Lost replies, half-open and
replaced connections: test_retries, on both drivers."""

import subprocess
import sys
import textwrap
import threading
import time

import pytest

glide_sync = pytest.importorskip("glide_sync")
# glide's own modules warn about each other's imports.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

from padlock import Lock, MultiLock, NotAcquiredError, NotHeldError, ReadWriteLock, Semaphore  # noqa: E402
from padlock import glide, graph  # noqa: E402


def on(port):
    return glide(glide_sync.GlideClient, glide_sync.GlideClientConfiguration([glide_sync.NodeAddress("127.0.0.1", port)]))


def info(r, key):
    raw = r.execute_command("LOCK.INFO", key)
    return None if raw is None else dict(zip(raw[::2], raw[1::2]))


def test_every_kind_on_glide_sync(r, server):
    g = on(server.port)
    lock = Lock(g, "k", ttl=5)
    f1 = lock.acquire()
    assert f1 is not None and lock.acquire() == f1, "reentry keeps the fence"
    assert info(r, "k")[b"count"] == 2 and lock.owned()
    other = Lock(g, "k", ttl=5, holder="other", blocking_timeout=0.2)
    assert other.acquire(blocking=False) is None
    with pytest.raises(NotAcquiredError):
        with other:
            pass
    # A waiter in another thread is granted at the release.
    got = []
    w = Lock(g, "k", ttl=5, holder="w")
    t = threading.Thread(target=lambda: got.append(w.acquire(timeout=5)))
    t.start()
    time.sleep(0.4)  # longer than glide's own request timeout (250 ms)
    lock.release()
    lock.release()
    t.join(5)
    assert got and got[0] is not None and got[0] > f1
    w.release()
    with pytest.raises(NotHeldError):
        lock.release()
    # A short lease lives while held (KEEP).
    with Lock(g, "short", ttl=0.3) as short:
        time.sleep(1.0)
        assert short.held and int(info(r, "short")[b"keep"]) == 1
    sem = Semaphore(g, "s", 3, permits=2, ttl=5)
    assert sem.acquire() == 2
    assert Semaphore(g, "s", 3, permits=2, ttl=5, holder="other").acquire(blocking=False) is None
    sem.release()
    with MultiLock(g, ["m1", "m2"], ttl=5) as m:
        assert m.fences is not None and len(m.fences) == 2 and r.exists("m1", "m2") == 2
    rw = ReadWriteLock(g, "rw", ttl=5)
    with rw.read():
        with rw.write():
            assert r.exists("rw")
    assert r.exists("k", "short", "m1", "m2", "rw", "s") == 0
    assert graph(g) == []


def test_glide_sync_on_a_cluster_routes_by_key(cluster_server):
    r = cluster_server.client()
    cfg = glide_sync.GlideClusterClientConfiguration([glide_sync.NodeAddress("127.0.0.1", cluster_server.port)])
    g = glide(glide_sync.GlideClusterClient, cfg)
    lock = Lock(g, "c-lock", ttl=5)
    f = lock.acquire()
    assert f is not None and lock.acquire() == f
    lock.release()
    lock.release()
    with MultiLock(g, ["{c}1", "{c}2"], ttl=5) as m:
        assert m.fences is not None and len(m.fences) == 2
    sem = Semaphore(g, "c-sem", 2, ttl=5)
    assert sem.acquire() == 1
    sem.release()
    for k in ("c-lock", "{c}1", "{c}2", "c-sem"):
        assert not r.exists(k)
    r.close()


def test_a_call_stuck_on_the_server_does_not_keep_the_process_alive(server):
    """glide-sync's calls have no limit of their own. One left waiting on
    the server (a BLPOP nothing answers) must not keep the process from
    exiting: it did while each connection's calls ran on a
    ThreadPoolExecutor, whose threads Python joins at exit."""
    script = textwrap.dedent(f"""
        import glide_sync
        from padlock import glide
        g = glide(glide_sync.GlideClient, glide_sync.GlideClientConfiguration(
            [glide_sync.NodeAddress("127.0.0.1", {server.port})]))
        conn = g.connection_pool.connection_class()
        conn.send_command("BLPOP", "nothing-comes", "0")
        assert not conn.can_read(0.2), "BLPOP answered"
    """)
    # A hang is the failure: subprocess.run raises past its timeout.
    done = subprocess.run([sys.executable, "-c", script], timeout=60, capture_output=True)
    assert done.returncode == 0, done.stderr.decode()
