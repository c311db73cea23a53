"""A Sentinel failover while a lock is waited on, through a client that
finds its master through Sentinel (redis-py's `Sentinel.master_for`).

The old master, once demoted, answers the wait's mailbox reader
`-UNBLOCKED` and drops the queued request; the client resends the wait,
with its request-id, and redis-py's Sentinel pool takes it to the new
master, where it queues and is granted when the lock frees there."""

import os
import shutil
import subprocess
import tempfile
import threading
import time

import pytest
import redis
import redis.sentinel
from redis.sentinel import Sentinel

from conftest import wait_for
from harness import Server, free_port

from padlock import Lock


def master_port(sentinel):
    """The master's port as Sentinel names it now (None mid-failover)."""
    try:
        return sentinel.discover_master("m")[1]
    except redis.sentinel.MasterNotFoundError:
        return None


def waiters(c):
    info = c.info("padlock")
    return info["padlock_mailbox_waiters"] + info["padlock_blocked_clients"]


@pytest.fixture
def watched_pair():
    """A master, its replica and one Sentinel watching them (quorum 1)."""
    master = Server(extra=["--repl-diskless-sync-delay", "0"])
    replica = Server(extra=["--replicaof", "127.0.0.1", str(master.port)])
    d = tempfile.mkdtemp(prefix="padlock-sentinel-")
    port = free_port()
    conf = os.path.join(d, "sentinel.conf")
    with open(conf, "w") as f:
        f.write(f"port {port}\nbind 127.0.0.1\ndir {d}\n"
                f"sentinel monitor m 127.0.0.1 {master.port} 1\n"
                "sentinel down-after-milliseconds m 1000\n"
                "sentinel failover-timeout m 4000\n")
    sentinel = subprocess.Popen([master.binary, conf, "--sentinel", "--logfile", os.path.join(d, "log")],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        rep = replica.client()
        assert wait_for(lambda: rep.info("replication")["master_link_status"] == "up", 10)
        s = Sentinel([("127.0.0.1", port)], socket_timeout=3)
        # Sentinel has found the master and the replica (it fails over
        # to no other).
        assert wait_for(lambda: master_port(s) == master.port and len(s.discover_slaves("m")) == 1, 10)
        yield master, replica, s, port
    finally:
        sentinel.kill()
        sentinel.wait()
        shutil.rmtree(d, ignore_errors=True)
        replica.stop()
        master.stop()


def test_a_wait_follows_a_sentinel_failover_to_the_new_master(watched_pair):
    master, replica, sentinel, port = watched_pair
    old, new = master.client(), replica.client()
    r = sentinel.master_for("m", socket_timeout=5)
    # (`WAIT` counts what its own connection wrote.)
    before = old.execute_command("LOCK.ACQUIRE", "job", "other", 60000)
    assert old.wait(1, 5000) == 1
    got = {}
    lock = Lock(r, "job", ttl=5, blocking_timeout=20)

    def waiter():
        try:
            got["acquired"] = lock.acquire()
        except Exception as e:  # noqa: BLE001  (the test reads it)
            got["error"] = e

    t = threading.Thread(target=waiter)
    t.start()
    assert wait_for(lambda: waiters(old) == 1)

    def failover():
        # Until Sentinel has seen the replica's link up (its INFO of it).
        try:
            return redis.Redis(port=port).execute_command("SENTINEL", "FAILOVER", "m")
        except redis.ResponseError as e:
            assert "NOGOODSLAVE" in str(e), e
            time.sleep(0.2)
            return False
    assert wait_for(failover, 15)
    assert wait_for(lambda: master_port(sentinel) == replica.port, 15)
    # What Sentinel does to the old master at its next look (up to 10 s
    # later), done now: it becomes a replica of the new one.
    old.execute_command("REPLICAOF", "127.0.0.1", replica.port)
    assert wait_for(lambda: waiters(new) == 1, 10), (
        f"the wait was sent again to the new master: {got}, {waiters(old)} waiting on the old")
    assert got == {}, "still waiting: the lock is held there too"

    assert new.execute_command("LOCK.RELEASE", "job", "other") == 0
    t.join(10)
    assert "acquired" in got and got["acquired"] == lock.fence, got
    assert lock.held and lock.fence > before
    info = new.execute_command("LOCK.INFO", "job")
    assert dict(zip(info[::2], info[1::2]))[b"holder"] == lock.holder.encode()
    lock.release()
    assert new.exists("job") == 0
    time.sleep(0.1)
    assert waiters(new) == 0
