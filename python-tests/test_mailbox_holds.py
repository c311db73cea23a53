"""docs/commands.md, Waiting without a connection (MAILBOX) — KEEP grants bind to the
queuing connection, lost holds are told to the mailbox (`-LOST`), the
mailbox is a key of the command (ACL, type, cluster slot), and posts are
list writes that replicas and the AOF see."""

import time

import pytest
import redis

from conftest import wait_for
from test_cluster import node  # noqa: F401  (fixture)
from test_docs import raw
from test_locks import info
from test_mailbox import acquire, mailed


def bound(r, key):
    return info(r, key)["keep"]


def test_a_keep_grant_binds_to_the_queuing_connection(server, r):
    r.execute_command("LOCK.ACQUIRE", "k", "a", 10000)
    c = server.client()
    assert acquire(c, "k", "b", "rb", 5000, "mb", "KEEP", ttl=1000) == b"WAITING"
    r.execute_command("LOCK.RELEASE", "k", "a")
    assert mailed(server)[0].startswith("rb ")
    assert bound(r, "k") == 1 and r.pttl("k") > 1000, "kept while its connection lives"
    c.close()
    assert wait_for(lambda: bound(r, "k") == 0 and 0 < r.pttl("k") <= 1000)


def test_a_resend_moves_the_keep_binding_with_the_request(server, r):
    r.execute_command("LOCK.ACQUIRE", "k", "a", 10000)
    old, new = server.client(), server.client()
    acquire(old, "k", "b", "rb", 5000, "mb", "KEEP", ttl=1000)
    acquire(new, "k", "b", "rb", 5000, "mb", "KEEP", ttl=1000)
    old.close()
    r.execute_command("LOCK.RELEASE", "k", "a")
    assert mailed(server)[0].startswith("rb ")
    time.sleep(0.2)
    assert bound(r, "k") == 1, "bound to the connection that resent it"
    new.close()
    assert wait_for(lambda: bound(r, "k") == 0)


@pytest.mark.parametrize("how", ["del", "set", "flushdb", "flushall", "swapdb", "restore", "unlink"])
def test_a_bound_hold_removed_by_another_hand_is_told_lost(server, r, how):
    f = r.execute_command("LOCK.ACQUIRE", "k", "a", 10000, "BLOCK", 100, "MAILBOX", "mb",
                          "KEEP", "ID", "held")
    assert f > 0 and bound(r, "k") == 1
    # The mailbox lives in another database for the flush and swap cases.
    r2 = server.client(db=0)
    dump = r.dump("k")
    {"del": lambda: r.delete("k"),
     "unlink": lambda: r.unlink("k"),
     "set": lambda: r.set("k", "v"),
     "flushdb": lambda: r.execute_command("FLUSHDB"),
     "flushall": lambda: r.execute_command("FLUSHALL"),
     "swapdb": lambda: r.execute_command("SWAPDB", 0, 1),
     "restore": lambda: r.restore("k", 0, dump, replace=True)}[how]()
    if how in ("flushdb", "flushall"):
        # The flush took the mailbox with it; the post comes after.
        pass
    if how == "swapdb":
        r2 = server.client(db=0)
    got = r2.blpop("mb", 5)
    assert got is not None, how
    rid, why = got[1].decode().split(" ", 1)
    assert rid == "held" and why.startswith("-LOST"), got
    assert r2.llen("mb") == 0, "told once"


@pytest.mark.parametrize("kind", ["macquire", "sem", "rwlock"])
def test_every_kind_granted_at_once_tells_its_loss(server, r, kind):
    """A `KEEP` grant made at once binds with its mailbox on every kind
    (the multi-key lock binds from its reply, the others from the grant's
    own write)."""
    cmd = {"macquire": ["LOCK.MACQUIRE", 2, "{m}1", "{m}2", "a", 10000],
           "sem": ["SEM.ACQUIRE", "{m}1", "a", 2, 10000],
           "rwlock": ["RWLOCK.ACQUIRE", "{m}1", "a", "WRITE", 10000]}[kind]
    assert r.execute_command(*cmd, "BLOCK", 100, "MAILBOX", "{m}box", "KEEP", "ID", "g1")
    r.delete("{m}1")
    got = r.blpop("{m}box", 5)
    assert got is not None and got[1] == b"g1 -LOST removed", (kind, got)


@pytest.mark.parametrize("how", ["del", "flushall", "swapdb", "each"])
def test_a_multi_key_hold_is_told_lost_once_per_key(server, r, how):
    """A multi-key hold tells the loss of each of its keys, with the same
    request-id, whether they go in one step (one `DEL` of both, a flush, a
    swap) or one by one: a client can count them (it knows at the first)."""
    c = server.client()
    assert c.execute_command("LOCK.MACQUIRE", 2, "{m}1", "{m}2", "a", 10000, "BLOCK", 100,
                             "MAILBOX", "{m}box", "KEEP", "ID", "g1")
    {"del": lambda: r.delete("{m}1", "{m}2"),
     "flushall": lambda: r.execute_command("FLUSHALL"),
     "swapdb": lambda: r.execute_command("SWAPDB", 0, 1),
     "each": lambda: (r.delete("{m}1"), time.sleep(0.1), r.delete("{m}2"))}[how]()
    r0 = server.client(db=0)
    want = {"del": "removed", "flushall": "flushed", "swapdb": "swapped", "each": "removed"}[how]
    got = [r0.blpop("{m}box", 5) for _ in range(2)]
    assert [g and g[1].decode() for g in got] == [f"g1 -LOST {want}"] * 2, got
    time.sleep(0.2)
    assert r0.llen("{m}box") == 0, "told once per key"


def test_an_extend_with_keep_mailbox_binds_and_tells_losses(server, r):
    c = server.client()
    c.execute_command("LOCK.ACQUIRE", "k", "a", 10000)
    assert c.execute_command("LOCK.EXTEND", "k", "a", 10000, "KEEP", "MAILBOX", "mb", "ID", "x1") == 1
    assert bound(r, "k") == 1
    r.delete("k")
    assert mailed(server) == ["x1 -LOST removed"]
    c.execute_command("SEM.ACQUIRE", "s", "a", 2, 10000)
    assert c.execute_command("SEM.EXTEND", "s", "a", 10000, "KEEP", "MAILBOX", "mb", "ID", "x2") == 1
    c.execute_command("RWLOCK.ACQUIRE", "rw", "a", "READ", 10000)
    assert c.execute_command("RWLOCK.EXTEND", "rw", "a", 10000, "KEEP", "MAILBOX", "mb", "ID", "x3") == 1
    r.delete("s", "rw")
    assert sorted(mailed(server, 2)) == ["x2 -LOST removed", "x3 -LOST removed"]


def test_a_hold_whose_binding_ended_is_told_lost_when_its_lease_runs_out(server, r):
    c = server.client()
    c.execute_command("LOCK.ACQUIRE", "k", "a", 400, "BLOCK", 100, "MAILBOX", "mb", "KEEP", "ID", "h")
    c.close()
    assert mailed(server, timeout=5) == ["h -LOST removed"]
    assert not r.exists("k")


@pytest.mark.parametrize("kind", ["sem", "rw"])
def test_a_holders_lease_that_runs_out_in_a_key_that_stays_is_told_lost(server, r, kind):
    """A semaphore's or read-write lock's other holders keep the key: the
    lease of a holder whose binding ended runs out without the key going,
    and its loss is told then (not when the key goes, later). A plain
    extend before that moves the moment; a release tells nothing."""
    take = {"sem": ["SEM.ACQUIRE", "k", "{h}", 5, "{ttl}", "PERMITS", 1],
            "rw": ["RWLOCK.ACQUIRE", "k", "{h}", "READ", "{ttl}"]}[kind]
    name = {"sem": "SEM", "rw": "RWLOCK"}[kind]

    def cmd(h, ttl):
        return [h if a == "{h}" else ttl if a == "{ttl}" else a for a in take]

    r.execute_command(*cmd("other", 60000))
    for h in ("a", "b", "c"):
        c = server.client()
        c.execute_command(*cmd(h, 400), "BLOCK", 100, "MAILBOX", "mb", "KEEP", "ID", f"id-{h}")
        c.close()
    # b extends without KEEP before its lease ends (another 1.5 s); c releases.
    time.sleep(0.1)
    r.execute_command(f"{name}.EXTEND", "k", "b", 1500)
    r.execute_command(f"{name}.RELEASE", "k", "c", *(["READ"] if kind == "rw" else []))
    start = time.time()
    assert mailed(server, timeout=5) == ["id-a -LOST removed"]
    assert time.time() - start < 1.0
    assert mailed(server, timeout=5) == ["id-b -LOST removed"]
    assert time.time() - start > 0.8, "told when its extended lease ran out"
    assert r.exists("k") and not r.exists("mb")
    r.delete("k")
    time.sleep(0.2)
    assert not r.exists("mb"), "nothing told twice"


def test_a_hold_bound_again_and_again_is_told_lost_once(server, r):
    """A client that reconnects and binds its hold again, and again loses
    the connection: one loss, told when the last lease runs out."""
    r.execute_command("SEM.ACQUIRE", "k", "other", 5, 60000)
    c = server.client()
    c.execute_command("SEM.ACQUIRE", "k", "a", 5, 400, "BLOCK", 100, "MAILBOX", "mb", "KEEP", "ID", "id-0")
    for i in range(1, 6):
        c.close()
        time.sleep(0.05)
        c = server.client()
        assert c.execute_command("SEM.EXTEND", "k", "a", 400, "KEEP", "MAILBOX", "mb", "ID", f"id-{i}") == 1
    c.close()
    assert mailed(server, timeout=5) == ["id-5 -LOST removed"]
    time.sleep(0.6)
    assert not r.exists("mb"), "told once"


def test_an_unbound_hold_a_client_made_persistent_is_not_lost(server, r):
    """A lock whose binding ended and whose key a client then made
    persistent does not run out: nothing is told, and nothing spins
    looking at it."""
    c = server.client()
    c.execute_command("LOCK.ACQUIRE", "k", "a", 400, "BLOCK", 100, "MAILBOX", "mb", "KEEP", "ID", "h")
    c.close()
    assert wait_for(lambda: 0 < r.pttl("k") <= 400)
    assert r.persist("k")
    cpu = lambda: sum(r.info("cpu")[f] for f in ("used_cpu_sys", "used_cpu_user"))  # noqa: E731
    before = cpu()
    time.sleep(1.0)
    assert cpu() - before < 0.5, "a timer spinning on a lease without an end"
    assert r.exists("k") and not r.exists("mb")


def test_releases_rebinds_and_plain_holds_tell_nothing(server, r):
    c = server.client()
    c.execute_command("LOCK.ACQUIRE", "k", "a", 10000, "BLOCK", 100, "MAILBOX", "mb", "KEEP", "ID", "1")
    assert c.execute_command("LOCK.RELEASE", "k", "a") == 0
    c.execute_command("LOCK.ACQUIRE", "k", "a", 500, "BLOCK", 100, "MAILBOX", "mb", "KEEP", "ID", "2")
    c.close()
    c = server.client()
    # Bound again (without a mailbox) before it ran out: not lost.
    assert c.execute_command("LOCK.EXTEND", "k", "a", 500, "KEEP") == 1
    assert c.execute_command("LOCK.RELEASE", "k", "a") == 0
    r.execute_command("LOCK.ACQUIRE", "k", "b", 10000)
    r.delete("k")
    time.sleep(0.8)
    assert not r.exists("mb"), r.lrange("mb", 0, -1)


def test_the_mailbox_is_a_key_of_the_command(server, r):
    for cmd in (["LOCK.ACQUIRE", "k", "h", 1000, "BLOCK", 5, "MAILBOX", "mb", "ID", "i"],
                ["SEM.ACQUIRE", "k", "h", 2, 1000, "BLOCK", 5, "MAILBOX", "mb", "ID", "i"],
                ["RWLOCK.ACQUIRE", "k", "h", "READ", 1000, "BLOCK", 5, "MAILBOX", "mb", "ID", "i"],
                ["LOCK.EXTEND", "k", "h", 1000, "KEEP", "MAILBOX", "mb", "ID", "i"],
                ["SEM.EXTEND", "k", "h", 1000, "PERMITS", 1, "KEEP", "MAILBOX", "mb"],
                ["RWLOCK.EXTEND", "k", "h", 1000, "KEEP", "MAILBOX", "mb"]):
        assert raw(r, "COMMAND", "GETKEYS", *cmd) == [b"k", b"mb"], cmd
    assert raw(r, "COMMAND", "GETKEYS", "LOCK.MACQUIRE", 2, "a", "b", "h", 1000,
                             "KEEP", "BLOCK", 5, "MAILBOX", "mb", "ID", "i") == [b"a", b"b", b"mb"]
    # ACL: writing the mailbox needs write permission on its key.
    r.execute_command("ACL", "SETUSER", "locker", "on", "nopass", "~lock:*", "+@all")
    u = server.client(username="locker", password="x")
    with pytest.raises(redis.exceptions.NoPermissionError):
        acquire(u, "lock:1", "h", "i", 100, "other")
    assert acquire(u, "lock:1", "h", "i", 100, "lock:mb") > 0
    r.execute_command("ACL", "SETUSER", "reader", "on", "nopass", "~lock:*", "%R~mb", "+@all")
    u = server.client(username="reader", password="x")
    with pytest.raises(redis.exceptions.NoPermissionError):
        acquire(u, "lock:2", "h", "i", 100, "mb")


def test_in_a_cluster_the_mailbox_shares_the_requests_slot(node):  # noqa: F811
    r = node.client()
    with pytest.raises(redis.ResponseError, match="CROSSSLOT"):
        acquire(r, "{a}k", "h", "i", 100, "{b}mb")
    assert acquire(r, "{a}k", "h", "i", 100, "{a}mb") > 0
    r.execute_command("LOCK.ACQUIRE", "{a}k2", "x", 10000)
    assert acquire(r, "{a}k2", "h", "j", 50, "{a}mb") == b"WAITING"
    got = r.blpop("{a}mb", 5)
    assert got[1] == b"j nil"


def test_replicas_and_the_aof_see_the_mailbox(make_server):
    m = make_server(extra=["--appendonly", "yes", "--appendfsync", "always"])
    rep = make_server(extra=["--replicaof", "127.0.0.1", str(m.port)])
    r, rr = m.client(), rep.client()
    assert wait_for(lambda: rr.info("replication")["master_link_status"] == "up", timeout=30)
    r.execute_command("LOCK.ACQUIRE", "k", "a", 10000)
    acquire(r, "k", "b", "rb")
    acquire(r, "k", "c", "rc", 50)
    assert wait_for(lambda: r.llen("mb") == 1)
    r.execute_command("LOCK.RELEASE", "k", "a")
    posts = r.lrange("mb", 0, -1)
    assert posts[0] == b"rc nil" and posts[1].startswith(b"rb ")
    r.execute_command("WAIT", 1, 2000)
    assert rr.lrange("mb", 0, -1) == posts
    assert abs(rr.pttl("mb") - r.pttl("mb")) < 500 and rr.pttl("mb") > 50000
    assert info(rr, "k")["holder"] == b"b"
    m.kill()
    m.start()
    r = m.client()
    assert r.lrange("mb", 0, -1) == posts and r.pttl("mb") > 50000
    assert info(r, "k")["holder"] == b"b"
