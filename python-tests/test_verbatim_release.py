"""`LOCK.RELEASE ... ID` replicates as itself (docs/design.md, "A lock's
release goes as itself"): replicas and the AOF run the release again,
which must end in the master's state and remember its id as the master
did, whatever their own clock says of the lease by then."""

import threading
import time

import redis

from conftest import wait_for
from test_durability import start_pair


def info(r, cmd, key):
    v = r.execute_command(cmd, key)
    return dict(zip(v[::2], v[1::2]))


def state(r, key):
    """A lock's state but the time left on it."""
    return {f: v for f, v in info(r, "LOCK.INFO", key).items() if f in (b"count", b"fence", b"holder")}


def linked_pair(make_server):
    """A master and its replica, past the replica's first acknowledgement
    (the first WAIT otherwise lasts until its periodic one)."""
    master, replica, m, rep = start_pair(make_server)
    m.set("warm", 1)
    assert m.wait(1, 5000) == 1
    return master, replica, m, rep


def test_a_replica_applies_a_release_that_reaches_it_after_the_lease_ran_out(make_server):
    """The replica is asleep while the master releases; when the release
    reaches it the lease has run out by its clock, yet it applies it and
    remembers its id: once promoted it answers the resend with the
    master's reply, not -NOTHELD."""
    master, replica, m, rep = linked_pair(make_server)
    m.execute_command("LOCK.ACQUIRE", "k", "h", 400, "ID", "a")
    m.execute_command("LOCK.ACQUIRE", "k", "h", 400, "ID", "b")
    m.execute_command("LOCK.ACQUIRE", "f", "h", 400, "ID", "c")
    assert m.wait(1, 2000) == 1
    sleeper = redis.Redis(port=replica.port, socket_timeout=10)
    t = threading.Thread(target=lambda: sleeper.execute_command("DEBUG", "SLEEP", "1"))
    t.start()
    time.sleep(0.1)
    assert m.execute_command("LOCK.RELEASE", "k", "h", "ID", "inner") == 1
    assert m.execute_command("LOCK.RELEASE", "f", "h", "ID", "final") == 0
    t.join()
    sleeper.close()
    assert m.wait(1, 2000) == 1
    assert wait_for(lambda: rep.info("replication")["master_repl_offset"]
                    == m.info("replication")["master_repl_offset"], timeout=5)
    master.stop()
    rep.execute_command("REPLICAOF", "NO", "ONE")
    assert rep.execute_command("LOCK.RELEASE", "k", "h", "ID", "inner") == 1
    assert rep.execute_command("LOCK.RELEASE", "f", "h", "ID", "final") == 0
    assert not rep.exists("k") and not rep.exists("f")


def test_the_aof_replays_a_release_of_a_lease_that_ran_out_since(make_server):
    """Loaded from the AOF after the lease ran out, the release still
    applies and its id is remembered."""
    s = make_server(extra=["--appendonly", "yes", "--appendfsync", "always"])
    r = s.client()
    r.execute_command("LOCK.ACQUIRE", "k", "h", 300, "ID", "a")
    r.execute_command("LOCK.ACQUIRE", "k", "h", 300, "ID", "b")
    assert r.execute_command("LOCK.RELEASE", "k", "h", "ID", "inner") == 1
    time.sleep(0.5)
    s.restart()
    r = s.client()
    assert r.execute_command("LOCK.RELEASE", "k", "h", "ID", "inner") == 1
    assert not r.exists("k")


def test_a_replica_and_the_aof_end_in_the_masters_state(make_server):
    """Inner and final releases, a queued holder granted by a release: the
    replica's locks and remembered ids are the
    master's, and so are those loaded from the replica's own AOF."""
    master, replica, m, rep = linked_pair(make_server)
    replica.restart(extra=[*replica.extra, "--appendonly", "yes"])
    rep = replica.client()
    assert wait_for(lambda: rep.info("replication")["master_link_status"] == "up", timeout=10)
    fence = m.execute_command("LOCK.ACQUIRE", "k", "h", 60000, "ID", "a")
    m.execute_command("LOCK.ACQUIRE", "k", "h", 60000, "ID", "b")
    waiter = redis.Redis(port=master.port, socket_timeout=10)
    got = []
    t = threading.Thread(target=lambda: got.append(
        waiter.execute_command("LOCK.ACQUIRE", "k", "w", 60000, "BLOCK", 5000, "ID", "q")))
    t.start()
    assert wait_for(lambda: m.info("clients")["blocked_clients"] == 1)
    assert m.execute_command("LOCK.RELEASE", "k", "h", "ID", "r1") == 1
    assert m.execute_command("LOCK.RELEASE", "k", "h", "ID", "r2") == 0
    t.join()
    assert got and got[0] > fence
    m.execute_command("LOCK.ACQUIRE", "x", "h", 60000, "ID", "c")
    m.execute_command("LOCK.ACQUIRE", "x", "h", 60000, "ID", "c2")
    assert m.execute_command("LOCK.RELEASE", "x", "h", "ID", "r3") == 1
    assert m.wait(1, 2000) == 1
    want = {k: state(m, k) for k in ["k", "x"]}
    assert {k: state(rep, k) for k in ["k", "x"]} == want
    ids = m.info("padlock")["padlock_request_ids"]
    assert rep.info("padlock")["padlock_request_ids"] == ids
    master.stop()
    replica.restart()
    rep = replica.client()
    rep.execute_command("REPLICAOF", "NO", "ONE")
    assert {k: state(rep, k) for k in ["k", "x"]} == want
    assert rep.info("padlock")["padlock_request_ids"] == ids
    assert rep.execute_command("LOCK.RELEASE", "k", "h", "ID", "r1") == 1
    assert rep.execute_command("LOCK.RELEASE", "k", "h", "ID", "r2") == 0
    assert rep.execute_command("LOCK.RELEASE", "x", "h", "ID", "r3") == 1
    assert info(rep, "LOCK.INFO", "x")[b"count"] == 1
    assert info(rep, "LOCK.INFO", "k")[b"holder"] == b"w"
