"""`LOCK.RELEASE ... ID` replicates as itself (docs/design.md, "A lock's
release goes as itself"): replicas and the AOF run the release again,
which must end in the master's state and remember its id as the master
did, whatever their own clock says of the lease by then."""

import threading
import time

import pytest
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
    assert wait_for(lambda: rep.info("replication")["master_link_status"] == "up", timeout=30)
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


def expired_holders(r):
    return sum(v for k, v in r.info("padlock").items() if k.endswith("expired_holders"))


SHARED = [
    # (a's short hold, b's long one, b's release, its reply, what is left
    # once a's lease ran out too)
    (["SEM.ACQUIRE", "s", "a", 3, 300], ["SEM.ACQUIRE", "s", "b", 3, 60000, "PERMITS", 2],
     ["SEM.RELEASE", "s", "b", "PERMITS", 1], 1, lambda r: info(r, "SEM.INFO", "s")[b"used"] == 1),
    (["RWLOCK.ACQUIRE", "s", "a", "READ", 300], ["RWLOCK.ACQUIRE", "s", "b", "READ", 60000],
     ["RWLOCK.RELEASE", "s", "b", "READ"], [0, 0], lambda r: r.execute_command("RWLOCK.INFO", "s") is None),
]


@pytest.mark.parametrize("a,b,release,reply,left", SHARED, ids=["sem", "rwlock"])
def test_a_replica_runs_a_shared_release_on_the_masters_holders(make_server, a, b, release, reply, left):
    """A semaphore's (read-write lock's) release reaches an asleep replica
    after another holder's lease ran out there: the replica drops no
    holder by its own clock (the master decides that, and says so with an
    effect), and remembers the release's id."""
    master, replica, m, rep = linked_pair(make_server)
    m.execute_command(*a, "ID", "a1")
    m.execute_command(*b, "ID", "b1")
    assert m.wait(1, 2000) == 1
    sleeper = redis.Redis(port=replica.port, socket_timeout=10)
    t = threading.Thread(target=lambda: sleeper.execute_command("DEBUG", "SLEEP", "1"))
    t.start()
    time.sleep(0.1)
    assert m.execute_command(*release, "ID", "r") == reply
    t.join()
    sleeper.close()
    assert m.wait(1, 2000) == 1
    assert expired_holders(rep) == 0
    master.stop()
    rep.execute_command("REPLICAOF", "NO", "ONE")
    assert rep.execute_command(*release, "ID", "r") == reply
    assert left(rep)


def test_kept_holds_released_in_part_stay_the_masters_to_the_byte(make_server):
    """`KEEP` holds (far deadlines, bindings only the master has) released
    in part: the replica's values are the master's, byte for byte."""
    master, replica, m, rep = linked_pair(make_server)
    m.execute_command("LOCK.ACQUIRE", "k", "h", 5000, "KEEP", "ID", "a")
    m.execute_command("LOCK.ACQUIRE", "k", "h", 5000, "KEEP", "ID", "b")
    m.execute_command("SEM.ACQUIRE", "s", "h", 3, 5000, "PERMITS", 2, "KEEP", "ID", "c")
    m.execute_command("RWLOCK.ACQUIRE", "rw", "h", "READ", 5000, "KEEP", "ID", "f")
    m.execute_command("RWLOCK.ACQUIRE", "rw", "h", "READ", 5000, "KEEP", "ID", "g")
    assert m.execute_command("LOCK.RELEASE", "k", "h", "ID", "d") == 1
    assert m.execute_command("SEM.RELEASE", "s", "h", "PERMITS", 1, "ID", "e") == 1
    assert m.execute_command("RWLOCK.RELEASE", "rw", "h", "READ", "ID", "i") == [1, 0]
    assert m.wait(1, 2000) == 1
    for key in ["k", "s", "rw"]:
        assert m.pttl(key) > 1 << 51  # held far away while the connection lives
        assert rep.dump(key) == m.dump(key), key


@pytest.mark.parametrize("kind", ["sem", "rwlock"])
def test_a_release_refused_for_a_lease_that_ran_out_sends_only_the_removal(make_server, kind):
    """The master drops a holder whose lease ran out before its release
    is decided (-NOTHELD): that removal goes as its effect, never as the
    refused release itself, which a replica would apply (one hold of two
    taken off, the holder kept)."""
    master, replica, m, rep = linked_pair(make_server)
    if kind == "sem":
        m.execute_command("SEM.ACQUIRE", "s", "a", 3, 60000)
        m.execute_command("SEM.ACQUIRE", "s", "b", 3, 300, "PERMITS", 2, "ID", "b1")
        release = ["SEM.RELEASE", "s", "b", "PERMITS", 1, "ID", "r"]
    else:
        m.execute_command("RWLOCK.ACQUIRE", "s", "a", "READ", 60000)
        m.execute_command("RWLOCK.ACQUIRE", "s", "b", "READ", 300, "ID", "b1")
        m.execute_command("RWLOCK.ACQUIRE", "s", "b", "READ", 300, "ID", "b2")
        release = ["RWLOCK.RELEASE", "s", "b", "READ", "ID", "r"]
    time.sleep(0.5)
    with pytest.raises(redis.ResponseError, match="NOTHELD"):
        m.execute_command(*release)
    assert m.wait(1, 2000) == 1
    assert rep.dump("s") == m.dump("s")
