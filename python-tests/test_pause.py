"""Leases that run out while writes are paused (CLIENT PAUSE, a coordinated
FAILOVER): padlock writes nothing during the pause (Redis keeps expired keys
in place then, and a write to one or an effect propagated aborts it), and
serves the waiter when the pause ends."""

import threading
import time

import pytest
import redis

from conftest import Background, wait_blocked, wait_for

HOLD = {
    "lock": [("LOCK.ACQUIRE", "p", "a", 300)],
    "sem": [("SEM.ACQUIRE", "p", "a", 1, 300)],
    "multi": [("LOCK.ACQUIRE", "{m}1", "a", 300), ("LOCK.ACQUIRE", "{m}2", "a", 60000)],
}
WAIT = {
    "lock": ("LOCK.ACQUIRE", "p", "b", 10000, "BLOCK", 5000),
    "sem": ("SEM.ACQUIRE", "p", "b", 1, 10000, "BLOCK", 5000),
    "multi": ("LOCK.MACQUIRE", 1, "{m}1", "b", 10000, "BLOCK", 5000),
}


def stable(raw):
    """An INFO reply without what differs between master and replica."""
    d = dict(zip(raw[::2], raw[1::2]))
    if b"holders" in d:
        d[b"holders"] = d[b"holders"][::2]
    return {k: v for k, v in d.items() if k not in (b"ttl", b"waiters")}


def offset(r):
    return r.info("replication")["master_repl_offset"]


@pytest.mark.parametrize("mode", ["WRITE", "ALL"])
@pytest.mark.parametrize("kind", ["lock", "sem", "multi"])
def test_lease_runs_out_during_pause(make_server, kind, mode):
    server = make_server(extra=["--repl-diskless-sync-delay", "0"])
    replica = make_server(extra=["--replicaof", "127.0.0.1", str(server.port)])
    r, rep = server.client(), replica.client()
    assert wait_for(lambda: rep.info("replication")["master_link_status"] == "up")
    for cmd in HOLD[kind]:
        r.execute_command(*cmd)
    w = Background(server, *WAIT[kind])
    wait_blocked(r, 1)
    before = offset(r)
    r.execute_command("CLIENT", "PAUSE", 1200, mode)
    paused_at = time.time()
    if mode == "WRITE":
        time.sleep(0.8)  # the lease ran out 500 ms ago
        assert offset(r) == before, "nothing was propagated during the pause"
        assert r.info("padlock")["padlock_blocked_clients"] == 1, "still waiting"
    got = w.result(timeout=10)
    assert server.alive() and replica.alive()
    assert got is not None, "served after the pause"
    assert w.done_at - paused_at >= 1.1, "not served during the pause"
    assert w.done_at - paused_at < 2.5
    assert offset(r) > before
    key = "{m}1" if kind == "multi" else "p"
    info = "SEM.INFO" if kind == "sem" else "LOCK.INFO"
    state = lambda c: stable(c.execute_command(info, key))  # noqa: E731
    assert wait_for(lambda: state(rep) == state(r)), "the replica followed"
    if kind != "sem":
        assert state(r)[b"holder"] == b"b"


def test_lost_grant_take_back_waits_for_the_pause(server, r):
    """A client disconnecting while blocked, during a pause, is forgotten at
    once; the queue behind it is served after the pause."""
    r.execute_command("LOCK.ACQUIRE", "p", "a", 300)
    w1 = Background(server, "LOCK.ACQUIRE", "p", "b", 10000, "BLOCK", 0)
    wait_blocked(r, 1)
    w2 = Background(server, "LOCK.ACQUIRE", "p", "c", 10000, "BLOCK", 5000)
    wait_blocked(r, 2)
    r.execute_command("CLIENT", "PAUSE", 1000, "WRITE")
    r.execute_command("CLIENT", "KILL", "ID", w1.client_id)
    assert wait_for(lambda: r.info("padlock")["padlock_blocked_clients"] == 1)
    assert w2.result(timeout=10) is not None
    raw = r.execute_command("LOCK.INFO", "p")
    assert dict(zip(raw[::2], raw[1::2]))[b"holder"] == b"c"
    assert server.alive()


def test_lease_runs_out_during_coordinated_failover(make_server):
    master = make_server(extra=["--repl-diskless-sync-delay", "0"])
    replica = make_server(extra=["--replicaof", "127.0.0.1", str(master.port)])
    m, rep = master.client(), replica.client()
    assert wait_for(lambda: rep.info("replication")["master_link_status"] == "up")
    assert wait_for(lambda: m.info("replication").get("slave0", {}).get("state") == "online")
    m.execute_command("LOCK.ACQUIRE", "p", "a", 300)
    w = Background(master, "LOCK.ACQUIRE", "p", "b", 10000, "BLOCK", 5000)
    wait_blocked(m, 1)
    # The replica sleeps, so the failover keeps the master's writes paused
    # while it waits for the replica to catch up: the lease runs out then.
    sleeper = threading.Thread(
        target=lambda: replica.client(socket_timeout=10).execute_command("DEBUG", "SLEEP", 1.2))
    sleeper.start()
    time.sleep(0.05)
    m.execute_command("FAILOVER", "TO", "127.0.0.1", replica.port, "TIMEOUT", 5000)
    sleeper.join()
    try:
        got = w.result(timeout=10)
    except redis.RedisError as e:  # unblocked by the role change
        got = e
    assert master.alive() and replica.alive()
    assert wait_for(lambda: rep.info("replication")["role"] == "master", timeout=10)
    assert wait_for(lambda: m.info("replication")["role"] == "slave", timeout=10)
    # The waiter got an answer (a grant before the switch, or the
    # "instance state changed" error); none is left blocked anywhere.
    assert got is not None
    assert m.info("padlock")["padlock_blocked_clients"] == 0
    fence = rep.execute_command("LOCK.ACQUIRE", "q", "z", 1000)
    assert fence > 0

