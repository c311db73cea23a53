"""docs/commands.md, Keep-alive leases (KEEP) — a binding belongs to one hold, not to a
name. Whatever ends the hold (a release, any command that removes or
replaces its key) ends the binding at once; a later hold is kept only by
its own `KEEP`. The invariant: a lease is held far away only while a live
connection's binding keeps exactly that hold. And waiters follow the key:
none waits on a key that is free for it."""

import time

import pytest
import redis

from conftest import Background, wait_blocked, wait_for

TTL = 300  # the shortest ttl KEEP takes (3 x keep-min-interval-ms)
FAR = 1 << 51  # PTTL of a lease held far away (bound) is above this

KINDS = ("lock", "sem", "rw")


def acquire(c, kind, key, holder, ttl=TTL, keep=True):
    extra = ["KEEP"] if keep else []
    if kind == "lock":
        return c.execute_command("LOCK.ACQUIRE", key, holder, ttl, *extra)
    if kind == "sem":
        return c.execute_command("SEM.ACQUIRE", key, holder, 1, ttl, *extra)
    return c.execute_command("RWLOCK.ACQUIRE", key, holder, "WRITE", ttl, *extra)


def keep_of(r, kind, key):
    cmd = {"lock": "LOCK.INFO", "sem": "SEM.INFO", "rw": "RWLOCK.INFO"}[kind]
    raw = r.execute_command(cmd, key)
    if raw is None:
        return None
    return {raw[i].decode(): raw[i + 1] for i in range(0, len(raw), 2)}["keep"]


def bound(r):
    return r.info("padlock")["padlock_keep_bound"]


def remove(r, how, key):
    if how == "DEL":
        r.delete(key)
    elif how == "UNLINK":
        r.unlink(key)
    elif how == "RENAME":
        r.rename(key, key + ":away")
    elif how == "MOVE":
        assert r.move(key, 1)
    elif how == "SET then DEL":
        r.set(key, "v")
        r.delete(key)
    elif how == "RESTORE REPLACE then DEL":
        r.set("plain", "v")
        r.restore(key, 0, r.dump("plain"), replace=True)
        r.delete(key)


REMOVALS = ["DEL", "UNLINK", "FLUSHALL", "FLUSHDB", "RENAME", "MOVE", "SWAPDB",
            "SET then DEL", "RESTORE REPLACE then DEL"]


@pytest.mark.parametrize("how", REMOVALS)
def test_a_removal_ends_the_binding_and_a_new_keep_is_kept(server, how):
    """The two-holders reproduction: alice's KEEP hold is removed by
    another hand, alice takes the key again with KEEP (on the same
    connection, and on another one), and that new hold is kept past its
    ttl while the connection lives: nobody else can take it."""
    r, alice, other, bob = (server.client() for _ in range(4))
    keys = [(kind, f"{kind}:{conn}") for kind in KINDS for conn in ("same", "other")]
    for kind, key in keys:
        assert acquire(alice, kind, key, "alice")
    assert bound(r) == len(keys)
    if how == "FLUSHALL":
        r.flushall()
    elif how == "FLUSHDB":
        r.flushdb()
    elif how == "SWAPDB":
        r.swapdb(0, 1)
    else:
        for _, key in keys:
            remove(r, how, key)
    assert bound(r) == 0, "the bindings ended with their holds"
    for kind, key in keys:
        c = alice if key.endswith("same") else other
        assert acquire(c, kind, key, "alice")
    assert bound(r) == len(keys)
    time.sleep(TTL * 2 / 1000)
    for kind, key in keys:
        assert r.pttl(key) > FAR, (key, r.pttl(key))
        assert keep_of(r, kind, key) == 1, key
        assert not acquire(bob, kind, key, "bob", keep=False), f"{key}: two holders"


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("how", ["RENAME", "COPY", "MOVE", "SWAPDB", "RESTORE"])
def test_a_key_brought_onto_a_stale_name_runs_out_once_nobody_is_connected(server, kind, how):
    """The held-forever reproduction: a binding on a name ended with DEL,
    a bound key is brought onto that name (RENAME, COPY, MOVE, SWAPDB,
    RESTORE with its far deadline), its holder quits: the key runs out
    within its ttl (nothing keeps it far away)."""
    r = server.client()
    alice = server.client()
    db, dst = 0, "dst"
    if how in ("MOVE", "SWAPDB"):
        db, dst = 1, "src"
        there = server.client(db=1)
        assert acquire(server.client(db=1), kind, "src", "alice")
        there.delete("src")
    else:
        assert acquire(alice, kind, "dst", "alice")
        r.delete("dst")
    assert acquire(alice, kind, "src", "alice")
    if how == "RENAME":
        r.rename("src", "dst")
    elif how == "COPY":
        assert r.copy("src", "dst")
    elif how == "MOVE":
        assert r.move("src", 1)
    elif how == "SWAPDB":
        r.swapdb(0, 1)
    else:
        at = int(time.time() * 1000) + r.pttl("src")
        r.restore("dst", at, r.dump("src"), absttl=True)
    alice.close()
    target = server.client(db=db)
    assert wait_for(lambda: target.exists(dst) == 0, timeout=3), target.pttl(dst)
    assert bound(r) == 0


@pytest.mark.parametrize("kind", KINDS)
def test_a_plain_hold_after_a_flush_is_never_kept_by_an_older_binding(server, kind):
    """A semaphore has no fence to tell two holds apart: after FLUSHALL, a
    plain SEM.ACQUIRE of the same holder gets a real lease that runs out
    although the first binding's connection is still open."""
    r, alice, other = server.client(), server.client(), server.client()
    assert acquire(alice, kind, "s", "w1")
    r.flushall()
    assert acquire(other, kind, "s", "w1", keep=False)
    assert 0 < r.pttl("s") <= TTL
    assert keep_of(r, kind, "s") == 0
    assert wait_for(lambda: r.exists("s") == 0, timeout=2), "runs out with alice connected"
    assert alice.ping()


@pytest.mark.parametrize("kind", KINDS)
def test_a_clients_own_expiry_stands(server, kind):
    """PEXPIRE on a bound key is the client's: the binding ends, the key
    keeps that expiry, and nothing replaces it when the connection
    closes. Each holder's own lease (semaphores, read-write locks) gets
    its ttl and runs out normally."""
    r, alice = server.client(), server.client()
    assert acquire(alice, kind, "k", "alice", ttl=1000)
    assert r.pexpire("k", 100_000)
    assert wait_for(lambda: keep_of(r, kind, "k") == 0), "the binding ended"
    assert 90_000 < r.pttl("k") <= 100_000
    alice.close()
    time.sleep(0.3)
    if kind == "lock":
        assert 90_000 < r.pttl("k") <= 100_000, "the client's expiry is kept"
    else:
        assert wait_for(lambda: r.exists("k") == 0 or not acquire(r, kind, "k", "x") is None,
                        timeout=3), "the holder's own lease ran out"


@pytest.mark.parametrize("kind", ["sem", "rw"])
def test_persist_then_restart_does_not_keep_a_hold_forever(make_server, kind):
    """PERSIST + SAVE + restart: the holder's own lease was held far away;
    after the restart nobody keeps it, so it runs out (once) and another
    holder gets the key."""
    s = make_server(extra=["--appendonly", "no"])
    r, alice = s.client(), s.client()
    assert acquire(alice, kind, "sq", "alice", ttl=1000)
    assert r.persist("sq")
    r.save()
    s.restart()
    r = s.client()
    assert wait_for(lambda: acquire(r, kind, "sq", "bob", keep=False) is not None, timeout=4), \
        "alice's hold ran out after the restart"


def test_persist_on_a_bound_lock_leaves_it_to_the_client(server):
    r, alice = server.client(), server.client()
    alice.execute_command("LOCK.ACQUIRE", "k", "alice", 1000, "KEEP")
    assert r.persist("k")
    assert wait_for(lambda: keep_of(r, "lock", "k") == 0)
    alice.close()
    time.sleep(0.3)
    assert r.pttl("k") == -1, "the client's PERSIST stands"


@pytest.mark.parametrize("how", ["SWAPDB", "RENAME", "MOVE", "PEXPIRE", "COPY REPLACE"])
def test_waiters_follow_the_key(server, how):
    """A waiter on a key that moved away (SWAPDB, RENAME, MOVE) sees a
    free key in its database and is served at once, not after the old
    lease (never, with KEEP)."""
    r, alice = server.client(), server.client()
    alice.execute_command("LOCK.ACQUIRE", "sw", "alice", 3000, "KEEP")
    w = Background(server, "LOCK.ACQUIRE", "sw", "bob", 10000, "BLOCK", 0)
    wait_blocked(r, 1)
    if how == "SWAPDB":
        r.swapdb(0, 1)
    elif how == "RENAME":
        r.rename("sw", "elsewhere")
    elif how == "PEXPIRE":
        r.pexpire("sw", 50)
    elif how == "COPY REPLACE":
        # A lock of bob's own copied over it: the key is free for him.
        r.execute_command("LOCK.ACQUIRE", "bobs", "bob", 100000)
        assert r.copy("bobs", "sw", replace=True)
    else:
        r.move("sw", 1)
    assert wait_for(w.done, timeout=1), "the waiter is served"
    assert w.result() > 0
    info = r.execute_command("LOCK.INFO", "sw")
    assert info[info.index(b"holder") + 1] == b"bob"


def test_the_invariant_after_a_storm_of_removals(server):
    """Random acquires with and without KEEP, removals, renames, swaps and
    closes; at the end, and once the closed connections' bindings ended,
    every lease held far away belongs to a live binding (keep >= 1)."""
    import random
    rnd = random.Random(7)
    r = server.client()
    conns = [server.client() for _ in range(4)]
    keys = [f"{k}{i}" for k in KINDS for i in range(3)]
    for _ in range(600):
        c = rnd.choice(conns)
        key = rnd.choice(keys)
        kind = key[:-1]
        op = rnd.random()
        try:
            if op < 0.45:
                acquire(c, kind, key, rnd.choice(["a", "b"]), keep=rnd.random() < 0.7)
            elif op < 0.6:
                r.delete(key)
            elif op < 0.7:
                other = rnd.choice([k for k in keys if k[:-1] == kind])
                if r.exists(key):
                    r.rename(key, other)
            elif op < 0.75:
                r.swapdb(0, 1)
            elif op < 0.8:
                r.flushdb()
            elif op < 0.85 and r.exists(key):
                r.copy(key, rnd.choice([k for k in keys if k[:-1] == kind]), replace=True)
            else:
                i = conns.index(c)
                c.close()
                conns[i] = server.client()
        except redis.ResponseError:
            pass
    for c in conns:
        c.close()
    check = server.client()

    def settled():
        for db in (0, 1):
            d = server.client(db=db)
            for key in keys:
                if d.pttl(key) > FAR:
                    return False
        return True
    assert wait_for(settled, timeout=3), "a lease held far away with nobody connected"
    assert bound(check) == 0
