"""`replicas=`: grants that wait for replicas, against a real replica.

A master with one replica: a grant is reported once the replica has it; a
replica that stops answering (SIGSTOP) makes the grant short of it, which
gives the lock back (`on_shortfall="release"`) or keeps it and logs
("warn"); a grant mailed after a wait is counted from a write after it.
"""

import asyncio
import logging
import os
import signal
import threading
import time

import pytest
import redis

from conftest import wait_for
from harness import Server

import padlock
from padlock import Lock, Replicas, Semaphore
from padlock import aio


@pytest.fixture
def pair():
    master = Server(extra=["--repl-diskless-sync-delay", "0"])
    replica = Server(extra=["--replicaof", "127.0.0.1", str(master.port)])
    m = master.client(single_connection_client=True)
    assert wait_for(lambda: "online" in str(m.info("replication").get("slave0")), 10)
    # Streaming starts at the replica's first ACK (diskless sync): a write
    # seen there first.
    m.set("probe", 1)
    assert m.execute_command("WAIT", 1, 5000) == 1
    m.delete("probe")
    m.close()
    yield master, replica
    try:
        os.kill(replica.proc.pid, signal.SIGCONT)
    except ProcessLookupError:
        pass
    replica.stop()
    master.stop()


def test_a_grant_is_reported_once_the_replica_has_it(pair):
    master, replica = pair
    r, rr = master.client(), replica.client()
    lock = Lock(r, "job", ttl=5, replicas=1)
    assert lock.acquire() is not None
    # Reported only after WAIT: the replica has the key by then.
    assert rr.exists("job") == 1
    assert r.info("commandstats").get("cmdstat_wait", {}).get("calls", 0) >= 1
    lock.release()
    assert wait_for(lambda: rr.exists("job") == 0)


def test_a_replica_that_does_not_answer_makes_the_grant_fail(pair, caplog):
    master, replica = pair
    r = master.client()
    os.kill(replica.proc.pid, signal.SIGSTOP)
    lock = Lock(r, "job", ttl=5, replicas=Replicas(1, timeout=0.2))
    with caplog.at_level(logging.WARNING, logger="padlock"):
        assert lock.acquire(timeout=1) is None
    assert "released" in caplog.text and "0 of 1 replicas" in caplog.text
    assert r.exists("job") == 0, "the grant short of its replica is given back"
    assert not lock.held
    with pytest.raises(padlock.NotAcquiredError):
        with Lock(r, "job", ttl=5, replicas=Replicas(1, timeout=0.2), blocking_timeout=1):
            pass
    assert r.exists("job") == 0


def test_warn_keeps_the_hold_and_logs(pair, caplog):
    master, replica = pair
    r = master.client()
    os.kill(replica.proc.pid, signal.SIGSTOP)
    sem = Semaphore(r, "pool", 2, ttl=5, replicas=Replicas(1, timeout=0.2, on_shortfall="warn"))
    with caplog.at_level(logging.WARNING, logger="padlock"):
        assert sem.acquire()
        assert "0 of 1 replicas" in caplog.text
        assert sem.held and r.exists("pool") == 1
        caplog.clear()
        sem.release()
        assert "release of pool" in caplog.text, "a release short of its replica is logged"
    assert r.exists("pool") == 0


def test_a_mailed_grant_waits_for_the_replica_too(pair):
    master, replica = pair
    r, rr = master.client(), replica.client()
    first = Lock(r, "hot", ttl=5, holder="first")
    first.acquire()
    got = {}

    def waiter():
        lock = Lock(r, "hot", ttl=5, holder="second", replicas=1)
        got["fence"] = lock.acquire(timeout=5)
        got["on_replica"] = rr.execute_command("LOCK.INFO", "hot")
        lock.release()

    t = threading.Thread(target=waiter)
    t.start()
    assert wait_for(lambda: b"waiters" in r.execute_command("LOCK.INFO", "hot")
                    and dict(zip(*[iter(r.execute_command("LOCK.INFO", "hot"))] * 2))[b"waiters"] == 1)
    first.release()
    t.join(10)
    assert got["fence"] is not None
    info = dict(zip(*[iter(got["on_replica"])] * 2))
    assert info[b"holder"] == b"second", "the replica had the mailed grant when it was reported"


def test_asyncio_replicas(pair):
    master, replica = pair

    async def main():
        r = redis.asyncio.Redis(port=master.port)
        lock = aio.Lock(r, "a", ttl=5, replicas=1)
        assert await lock.acquire() is not None
        assert replica.client().exists("a") == 1
        await lock.release()
        os.kill(replica.proc.pid, signal.SIGSTOP)
        short = aio.Lock(r, "a", ttl=5, replicas=Replicas(1, timeout=0.2))
        start = time.monotonic()
        assert await short.acquire(timeout=1) is None
        assert time.monotonic() - start < 5
        assert await r.exists("a") == 0
        await r.aclose()

    asyncio.run(main())


def test_bad_replicas_options_are_refused():
    with pytest.raises(ValueError, match="count"):
        Replicas(0)
    with pytest.raises(ValueError, match="timeout"):
        Replicas(1, timeout=0)
    with pytest.raises(ValueError, match="on_shortfall"):
        Replicas(1, on_shortfall="ignore")
