"""docs/commands.md, Waiting without a connection (MAILBOX) — a queued request answers
WAITING at once and its outcome is appended to a list that BLPOP waits on;
the same queue, order, deadlock check and timeouts as BLOCK; LOCK.CANCEL;
requests belong to their connection; resends; what it costs (no blocked
client)."""

import time

import pytest
import redis

from conftest import blocked, wait_blocked, wait_for
from test_locks import info


def acquire(r, key, holder, rid, block=5000, mailbox="mb", *extra, ttl=10000):
    return r.execute_command("LOCK.ACQUIRE", key, holder, ttl, "BLOCK", block,
                             "MAILBOX", mailbox, *extra, "ID", rid)


def mailed(server, n=1, mailbox="mb", timeout=5):
    """The next n outcomes, read the way a client reads them (BLPOP on a
    connection of its own)."""
    c = server.client(socket_timeout=timeout + 5)
    out = []
    for _ in range(n):
        got = c.blpop(mailbox, timeout)
        assert got is not None, f"nothing mailed after {out}"
        out.append(got[1].decode())
    return out


def mailbox_waiters(r):
    return r.info("padlock")["padlock_mailbox_waiters"]


def test_granted_at_once_replies_the_fence_and_mails_nothing(r):
    f = acquire(r, "k", "a", "r1")
    assert isinstance(f, int) and f > 0
    assert not r.exists("mb")
    assert r.execute_command("SEM.ACQUIRE", "s", "a", 3, 1000, "PERMITS", 2, "BLOCK", 100,
                             "MAILBOX", "mb", "ID", "r2") == 2
    assert r.execute_command("LOCK.MACQUIRE", 2, "x", "y", "a", 1000, "BLOCK", 100,
                             "MAILBOX", "mb", "ID", "r3")[0] > f
    assert not r.exists("mb")


def test_queued_requests_answer_waiting_and_are_served_in_order(server, r):
    first = r.execute_command("LOCK.ACQUIRE", "k", "a", 10000)
    for h in ("b", "c", "d"):
        assert acquire(r, "k", h, f"id-{h}") == b"WAITING"
    assert blocked(r) == 0 and mailbox_waiters(r) == 3
    assert [q[0] for q in info(r, "k")["queue"]] == [b"b", b"c", b"d"]
    holder, fences = "a", []
    for h in ("b", "c", "d"):
        assert r.execute_command("LOCK.RELEASE", "k", holder) == 0
        rid, fence = mailed(server)[0].split(" ")
        assert rid == f"id-{h}" and info(r, "k")["holder"] == h.encode()
        assert int(fence) == info(r, "k")["fence"]
        fences.append(int(fence))
        holder = h
    assert first < fences[0] < fences[1] < fences[2]
    assert mailbox_waiters(r) == 0


def test_blocked_and_mailbox_waiters_share_one_queue(server, r, bg):
    r.execute_command("LOCK.ACQUIRE", "k", "a", 10000)
    assert acquire(r, "k", "m1", "r1") == b"WAITING"
    w = bg("LOCK.ACQUIRE", "k", "b1", 10000, "BLOCK", 0)
    wait_blocked(r, 1)
    assert acquire(r, "k", "m2", "r2") == b"WAITING"
    assert info(r, "k")["waiters"] == 3
    r.execute_command("LOCK.RELEASE", "k", "a")
    assert mailed(server)[0].startswith("r1 ")
    r.execute_command("LOCK.RELEASE", "k", "m1")
    assert w.result() > 0 and not r.exists("mb")
    r.execute_command("LOCK.RELEASE", "k", "b1")
    assert mailed(server)[0].startswith("r2 ")


def test_a_timeout_is_mailed_as_nil(server, r):
    r.execute_command("LOCK.ACQUIRE", "k", "a", 10000)
    assert acquire(r, "k", "b", "late", 100) == b"WAITING"
    assert mailed(server) == ["late nil"]
    assert info(r, "k")["waiters"] == 0
    assert r.info("padlock")["padlock_timeouts"] >= 1


def test_the_mailbox_expires_and_each_post_renews_it(make_server):
    s = make_server(module_args=["mailbox-ttl-ms", "5000"])
    r = s.client()
    r.execute_command("LOCK.ACQUIRE", "k", "a", 10000)
    acquire(r, "k", "b", "r1", 50)
    assert wait_for(lambda: r.exists("mb"))
    assert 4000 < r.pttl("mb") <= 5000
    r.execute_command("CONFIG", "SET", "padlock.mailbox-ttl-ms", 60000)
    acquire(r, "k", "c", "r2", 50)
    assert wait_for(lambda: r.llen("mb") == 2)
    assert r.pttl("mb") > 50000
    assert r.lrange("mb", 0, -1) == [b"r1 nil", b"r2 nil"]


def test_a_wait_that_would_deadlock_is_refused_at_enqueue(r):
    r.execute_command("LOCK.ACQUIRE", "k1", "t1", 10000)
    r.execute_command("LOCK.ACQUIRE", "k2", "t2", 10000)
    assert acquire(r, "k2", "t1", "a") == b"WAITING"
    with pytest.raises(redis.ResponseError, match="DEADLOCK t2 -> k1 -> t1 -> k2 -> t2"):
        acquire(r, "k1", "t2", "b")
    assert info(r, "k1")["waiters"] == 0 and mailbox_waiters(r) == 1


def test_multi_key_semaphore_and_rwlock_forms(server, r):
    r.execute_command("LOCK.ACQUIRE", "{a}2", "x", 10000)
    assert r.execute_command("LOCK.MACQUIRE", 2, "{a}1", "{a}2", "h", 10000, "BLOCK", 5000,
                             "MAILBOX", "{a}mb", "ID", "m") == b"WAITING"
    r.execute_command("SEM.ACQUIRE", "s", "x", 2, 10000, "PERMITS", 2)
    assert r.execute_command("SEM.ACQUIRE", "s", "h", 2, 10000, "PERMITS", 2, "BLOCK", 5000,
                             "MAILBOX", "mb", "ID", "s") == b"WAITING"
    r.execute_command("RWLOCK.ACQUIRE", "rw", "x", "WRITE", 10000)
    assert r.execute_command("RWLOCK.ACQUIRE", "rw", "h", "READ", 10000, "BLOCK", 5000,
                             "MAILBOX", "mb", "ID", "w") == b"WAITING"
    r.execute_command("LOCK.RELEASE", "{a}2", "x")
    rid, fences = mailed(server, mailbox="{a}mb")[0].split(" ")
    f1, f2 = (int(f) for f in fences.split(","))
    assert rid == "m" and f1 < f2
    r.execute_command("SEM.RELEASE", "s", "x")
    assert mailed(server) == ["s 2"]
    r.execute_command("RWLOCK.RELEASE", "rw", "x", "WRITE")
    rid, fence = mailed(server)[0].split(" ")
    assert rid == "w" and int(fence) > f2


def test_cancel_before_and_after_the_grant(server, r):
    r.execute_command("LOCK.ACQUIRE", "k", "a", 10000)
    acquire(r, "k", "b", "rb")
    acquire(r, "k", "c", "rc")
    assert r.execute_command("LOCK.CANCEL", "k", "b", "rb") == 1
    assert r.execute_command("LOCK.CANCEL", "k", "b", "rb") == 0
    assert r.execute_command("LOCK.CANCEL", "k", "c", "other-id") == 0
    assert [q[0] for q in info(r, "k")["queue"]] == [b"c"]
    r.execute_command("LOCK.RELEASE", "k", "a")
    assert mailed(server)[0].startswith("rc ")
    # Granted: a cancel comes too late, and the grant stands.
    assert r.execute_command("LOCK.CANCEL", "k", "c", "rc") == 0
    assert info(r, "k")["holder"] == b"c"
    assert not r.exists("mb"), "a cancelled request mails nothing"


def test_cancel_after_max_holder_len_was_lowered(server, r):
    h = "b" * 300
    r.execute_command("LOCK.ACQUIRE", "k", "a", 10000)
    acquire(r, "k", h, "rb")
    r.config_set("padlock.max-holder-len", 100)
    assert r.execute_command("LOCK.CANCEL", "k", h, "rb") == 1
    assert info(r, "k")["waiters"] == 0
    with pytest.raises(redis.ResponseError, match="^holder must be 1 to 100 bytes long$"):
        r.execute_command("LOCK.CANCEL", "k", h, "rb")


def test_cancel_serves_whoever_was_behind(server, r):
    r.execute_command("SEM.ACQUIRE", "s", "x", 3, 10000, "PERMITS", 2)
    r.execute_command("SEM.ACQUIRE", "s", "big", 3, 10000, "PERMITS", 2, "BLOCK", 5000,
                      "MAILBOX", "mb", "ID", "big")
    r.execute_command("SEM.ACQUIRE", "s", "small", 3, 10000, "BLOCK", 5000,
                      "MAILBOX", "mb", "ID", "small")
    assert r.execute_command("LOCK.CANCEL", "s", "big", "big") == 1
    assert mailed(server) == ["small 1"]


def test_cancel_wakes_a_blocked_request_with_nil(r, bg):
    r.execute_command("LOCK.ACQUIRE", "k", "a", 10000)
    w = bg("LOCK.ACQUIRE", "k", "b", 10000, "BLOCK", 0, "ID", "rb")
    wait_blocked(r, 1)
    assert r.execute_command("LOCK.CANCEL", "k", "b", "rb") == 1
    assert w.result() is None and blocked(r) == 0


def test_closing_the_connection_drops_its_requests(server, r):
    r.execute_command("LOCK.ACQUIRE", "k", "a", 10000)
    c = server.client()
    acquire(c, "k", "b", "rb")
    acquire(r, "k", "c", "rc")
    c.execute_command("LOCK.ACQUIRE", "k2", "b", 10000)
    acquire(r, "k2", "c", "rc2")
    acquire(c, "k", "d", "rd")
    assert mailbox_waiters(r) == 4
    c.close()
    assert wait_for(lambda: mailbox_waiters(r) == 2)
    assert [q[0] for q in info(r, "k")["queue"]] == [b"c"]
    assert r.execute_command("LOCK.GRAPH") and all(e[0] == b"c" for e in r.execute_command("LOCK.GRAPH"))
    r.execute_command("LOCK.RELEASE", "k", "a")
    assert mailed(server)[0].startswith("rc ")


def test_a_resend_on_a_new_connection_moves_the_request(server, r):
    r.execute_command("LOCK.ACQUIRE", "k", "a", 10000)
    old = server.client()
    assert acquire(old, "k", "b", "rb") == b"WAITING"
    new = server.client()
    assert acquire(new, "k", "b", "rb") == b"WAITING"
    assert info(r, "k")["waiters"] == 1
    old.close()
    time.sleep(0.1)
    assert info(r, "k")["waiters"] == 1, "it belongs to the new connection now"
    r.execute_command("LOCK.RELEASE", "k", "a")
    rid, fence = mailed(server)[0].split(" ")
    # After the grant a resend answers the grant itself.
    assert acquire(new, "k", "b", "rb") == int(fence)
    assert info(r, "k")["count"] == 1
    new.close()
    assert wait_for(lambda: mailbox_waiters(r) == 0)
    assert info(r, "k")["holder"] == b"b", "a grant outlives the connection"


def test_a_plain_block_resend_takes_the_mailbox_requests_place(r, bg):
    r.execute_command("LOCK.ACQUIRE", "k", "a", 10000)
    acquire(r, "k", "b", "rb")
    w = bg("LOCK.ACQUIRE", "k", "b", 10000, "BLOCK", 0, "MAILBOX", "mb", "ID", "rb")
    assert w.result() == b"WAITING"
    w = bg("LOCK.ACQUIRE", "k", "b", 10000, "BLOCK", 0, "ID", "rb")
    wait_blocked(r, 1)
    assert info(r, "k")["waiters"] == 1
    r.execute_command("LOCK.RELEASE", "k", "a")
    assert w.result() == info(r, "k")["fence"]
    assert not r.exists("mb")


def test_bad_mailbox_requests_are_refused_and_change_nothing(r):
    r.execute_command("LOCK.ACQUIRE", "k", "a", 10000)
    cases = [
        (["LOCK.ACQUIRE", "k", "b", 1000, "BLOCK", 100, "MAILBOX", "mb"], "MAILBOX needs ID"),
        (["LOCK.ACQUIRE", "k", "b", 1000, "BLOCK", 100, "MAILBOX", "mb", "ID", "a b"], "space"),
        (["LOCK.ACQUIRE", "k", "b", 1000, "MAILBOX", "mb", "ID", "x"], "MAILBOX needs BLOCK"),
        (["LOCK.EXTEND", "k", "a", 1000, "MAILBOX", "mb", "ID", "x"], "MAILBOX needs KEEP"),
        (["LOCK.ACQUIRE", "k", "b", 1000, "BLOCK", 100, "MAILBOX"], "syntax"),
        (["LOCK.REENTER", "k", "a", 1000, "KEEP", "MAILBOX", "mb"], "syntax"),
    ]
    for cmd, why in cases:
        with pytest.raises(redis.ResponseError, match=why):
            r.execute_command(*cmd)
    r.set("str", "x")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        acquire(r, "free", "b", "x", 100, "str")
    assert not r.exists("free"), "refused before anything was tried"
    with pytest.raises(redis.ResponseError, match="wrong number"):
        r.execute_command("LOCK.CANCEL", "k", "b")
    assert info(r, "k")["waiters"] == 0 and info(r, "k")["count"] == 1


def test_inside_multi_mailbox_acts_as_without_block(r):
    r.execute_command("LOCK.ACQUIRE", "k", "a", 10000)
    p = r.pipeline(transaction=True)
    p.execute_command("LOCK.ACQUIRE", "k", "b", 1000, "BLOCK", 100, "MAILBOX", "mb", "ID", "x")
    assert p.execute() == [None]
    assert info(r, "k")["waiters"] == 0


def test_a_mailbox_post_wakes_blpop_and_watch_sees_it(server, r):
    """A post is an RPUSH as every client sees one: BLPOP wakes at once,
    a transaction WATCHing the mailbox fails, keyspace events fire."""
    r.execute_command("LOCK.ACQUIRE", "k", "a", 10000)
    acquire(r, "k", "b", "rb")
    waiter = server.client(socket_timeout=10)
    r.config_set("notify-keyspace-events", "Kl")
    sub = server.client().pubsub()
    sub.subscribe("__keyspace@0__:mb")
    assert wait_for(lambda: sub.get_message(timeout=0.1) is not None)
    import threading
    got = []
    t = threading.Thread(target=lambda: got.append(waiter.blpop("mb", 5)))
    t.start()
    assert wait_for(lambda: r.info("clients")["blocked_clients"] == 1)
    w = server.client()
    pipe = w.pipeline(transaction=True)
    pipe.watch("mb")
    r.execute_command("LOCK.RELEASE", "k", "a")
    t.join(5)
    assert got and got[0][1].startswith(b"rb ")
    pipe.multi()
    pipe.set("other", 1)
    with pytest.raises(redis.WatchError):
        pipe.execute()
    msgs = []
    assert wait_for(lambda: (m := sub.get_message(timeout=0.1)) is not None and msgs.append(m) is None
                    and any(x["data"] == b"rpush" for x in msgs))


def test_five_thousand_waiters_from_one_pipeline_block_no_client(server, r):
    r.execute_command("LOCK.ACQUIRE", "k", "owner", 60000)
    c = server.client()
    p = c.pipeline(transaction=False)
    for i in range(5000):
        p.execute_command("LOCK.ACQUIRE", "k", f"h{i}", 60000, "BLOCK", 60000,
                          "MAILBOX", "mb", "ID", f"r{i}")
    assert set(p.execute()) == {b"WAITING"}
    assert blocked(r) == 0 and r.info("clients")["blocked_clients"] == 0
    assert mailbox_waiters(r) == 5000 and info(r, "k")["waiters"] == 5000
    # One grant each, in order, each a post.
    holder = "owner"
    for i in range(3):
        r.execute_command("LOCK.RELEASE", "k", holder)
        assert mailed(server)[0].startswith(f"r{i} ")
        holder = f"h{i}"
    c.close()
    assert wait_for(lambda: mailbox_waiters(r) == 0)


def test_a_grant_serves_its_own_holders_next_requests_and_no_one_else(server, r):
    """Served in one pass: after a lock's grant only the same holder's
    requests can be granted (a reentry); the first other holder's request
    ends the pass, and whoever is behind it waits in order."""
    r.execute_command("LOCK.ACQUIRE", "k", "owner", 10000)
    assert [acquire(r, "k", h, rid) for h, rid in
            (("w", "w1"), ("w", "w2"), ("x", "x1"), ("y", "y1"))] == [b"WAITING"] * 4
    r.execute_command("LOCK.RELEASE", "k", "owner")
    got = mailed(server, 2)
    assert [g.split(" ")[0] for g in got] == ["w1", "w2"]
    assert got[0].split(" ")[1] == got[1].split(" ")[1], "a reentry keeps the fence"
    assert info(r, "k")["count"] == 2
    assert [q[0] for q in info(r, "k")["queue"]] == [b"x", b"y"]
    assert r.llen("mb") == 0
    r.execute_command("LOCK.RELEASE", "k", "w")
    r.execute_command("LOCK.RELEASE", "k", "w")
    assert mailed(server)[0].startswith("x1 ")
    r.execute_command("LOCK.RELEASE", "k", "x")
    assert mailed(server)[0].startswith("y1 ")


def test_a_waiter_is_served_when_the_grant_before_it_runs_out(server, r):
    """A grant made while serving sets the timer on its own lease end: the
    next waiter gets the lock when that lease runs out, unreleased."""
    r.execute_command("LOCK.ACQUIRE", "k", "owner", 10000)
    assert acquire(r, "k", "a", "a1", ttl=300) == b"WAITING"
    assert acquire(r, "k", "b", "b1") == b"WAITING"
    r.execute_command("LOCK.RELEASE", "k", "owner")
    started = time.monotonic()
    assert mailed(server)[0].startswith("a1 ")
    assert mailed(server)[0].startswith("b1 ")
    assert 0.2 < time.monotonic() - started < 3
    assert info(r, "k")["holder"] == b"b"
