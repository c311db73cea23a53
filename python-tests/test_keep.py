"""docs/commands.md, Keep-alive leases (KEEP) — the server renews a lease while the
holder's connection lives; when it closes, the lease runs out at most
ttl-ms later and waiters are served. Bindings are not persisted or
replicated: replicas and the AOF hold a bound lease far away (a deadline
that carries its ttl, written once), and whoever serves it next gives it
its ttl from then."""

import time

import pytest
import redis

from conftest import Background, synced, wait_blocked, wait_for
from test_durability import start_pair
from test_rwlocks import rinfo
from test_semaphores import sinfo


# A bound lease's deadline on replicas and in the AOF is 2^52 ms + its ttl;
FAR = 1 << 51  # PTTL of such a lease: far above this


def linfo(r, key):
    raw = r.execute_command("LOCK.INFO", key)
    if raw is None:
        return None
    if isinstance(raw, list):
        raw = {raw[i]: raw[i + 1] for i in range(0, len(raw), 2)}
    return {k.decode() if isinstance(k, bytes) else k: v for k, v in raw.items()}


def test_idle_connection_keeps_its_lock(make_server):
    """A bound lock is written once, far away (its deadline carries its
    ttl): on the master and the replica alike, with no renewal while it
    stays bound; `LOCK.INFO` shows its ttl."""
    master, replica, m, rep = start_pair(make_server)
    holder = master.client()
    fence = holder.execute_command("LOCK.ACQUIRE", "k", "me", 300, "KEEP")
    assert linfo(m, "k")["keep"] == 1
    writes = m.info("padlock")["padlock_keep_renewals"]
    deadline = time.time() + 2
    while time.time() < deadline:
        assert m.pttl("k") > FAR and linfo(m, "k")["ttl"] == 300
        time.sleep(0.05)
    assert linfo(m, "k")["holder"] == b"me" and linfo(m, "k")["fence"] == fence
    assert m.info("padlock")["padlock_keep_renewals"] == writes, "nothing written while bound"
    synced(m, rep)
    assert linfo(rep, "k")["holder"] == b"me" and rep.pttl("k") > FAR, "the replica holds it far away"
    assert linfo(rep, "k")["ttl"] == 300, "with its ttl"
    assert linfo(rep, "k")["keep"] == 0, "bindings are not replicated"
    assert m.info("padlock")["padlock_keep_bound"] == 1


@pytest.mark.parametrize("how", ["close", "CLIENT KILL"])
def test_closed_connection_stops_renewal_and_hands_over(server, how):
    r = server.client()
    holder = server.client()
    holder.execute_command("LOCK.ACQUIRE", "k", "me", 300, "KEEP")
    time.sleep(0.5)
    assert linfo(r, "k")["holder"] == b"me"
    w = Background(server, "LOCK.ACQUIRE", "k", "next", 10000, "BLOCK", 0)
    wait_blocked(r, 1)
    t0 = time.time()
    if how == "close":
        holder.close()
    else:
        r.client_kill_filter(_id=holder.client_id())
    assert wait_for(lambda: r.info("padlock")["padlock_keep_bound"] == 0)
    assert w.result() > 0
    handoff_ms = (w.done_at - t0) * 1000
    print(f"hand-off after the holder's connection closed ({how}): {handoff_ms:.0f} ms")
    assert handoff_ms < 300 + 100, "within ttl-ms plus the hand-off bound"
    assert linfo(r, "k")["holder"] == b"next"


def test_a_connection_closed_with_many_bindings_gives_each_its_ttl(server):
    """Written again in bounded batches (a thousand per timer pass), so a
    close with thousands of bound leases stalls nobody; each gets its ttl."""
    r = server.client()
    holder = server.client()
    n = 3500
    p = holder.pipeline(transaction=False)
    for i in range(n):
        p.execute_command("LOCK.ACQUIRE", f"k:{i}", "me", 60000, "KEEP")
    assert all(f > 0 for f in p.execute())
    assert r.info("padlock")["padlock_keep_bound"] == n
    assert r.pttl("k:7") > 10**12  # far away while bound
    holder.close()
    assert wait_for(lambda: r.info("padlock")["padlock_keep_bound"] == 0)

    def all_real():
        p = r.pipeline(transaction=False)
        for i in range(n):
            p.pttl(f"k:{i}")
        return all(0 < t <= 60000 for t in p.execute())

    assert wait_for(all_real, timeout=10)
    assert r.execute_command("LOCK.ACQUIRE", "k:0", "other", 1000) is None


def test_rebind_after_reconnect_and_latest_binding_wins(server):
    r = server.client()
    first = server.client()
    first.execute_command("LOCK.ACQUIRE", "k", "me", 300, "KEEP")
    first.close()
    assert wait_for(lambda: r.info("padlock")["padlock_keep_bound"] == 0)
    second = server.client()
    assert second.execute_command("LOCK.EXTEND", "k", "me", 300, "KEEP") == 1
    assert linfo(r, "k")["keep"] == 1
    # A third connection binds the same lease: it takes the binding over,
    # so the second closing does not stop the renewals.
    third = server.client()
    third.execute_command("LOCK.EXTEND", "k", "me", 300, "KEEP")
    assert r.info("padlock")["padlock_keep_bound"] == 1
    second.close()
    time.sleep(0.8)
    assert linfo(r, "k")["holder"] == b"me"
    third.close()
    assert wait_for(lambda: not r.exists("k"), timeout=2)
    # Too late: the hold is lost.
    with pytest.raises(redis.ResponseError, match="^NOTHELD"):
        server.client().execute_command("LOCK.EXTEND", "k", "me", 300, "KEEP")


def test_release_ends_the_binding(server):
    r = server.client()
    c = server.client()
    c.execute_command("LOCK.ACQUIRE", "k", "me", 300, "KEEP")
    c.execute_command("LOCK.REENTER", "k", "me", 300, "KEEP")
    assert c.execute_command("LOCK.RELEASE", "k", "me") == 1
    assert r.info("padlock")["padlock_keep_bound"] == 1, "still held once"
    assert c.execute_command("LOCK.RELEASE", "k", "me") == 0
    assert r.info("padlock")["padlock_keep_bound"] == 0
    # Taken again without KEEP: nothing renews it.
    c.execute_command("LOCK.ACQUIRE", "k", "me", 200)
    assert wait_for(lambda: not r.exists("k"), timeout=2)


def test_semaphore_and_rwlock_holders(server):
    r = server.client()
    c = server.client()
    c.execute_command("SEM.ACQUIRE", "s", "kept", 3, 300, "KEEP", "PERMITS", 2)
    c.execute_command("SEM.ACQUIRE", "s", "plain", 3, 300)
    c.execute_command("RWLOCK.ACQUIRE", "rw", "kept", "READ", 300, "KEEP")
    c.execute_command("RWLOCK.ACQUIRE", "rw", "plain", "READ", 300)
    assert sinfo(r, "s")["keep"] == 1 and rinfo(r, "rw")["keep"] == 1
    time.sleep(0.8)
    assert list(sinfo(r, "s")["holders"]) == [b"kept"]
    assert sinfo(r, "s")["holders"][b"kept"][0] == 2
    assert list(rinfo(r, "rw")["holders"]) == [b"kept"]
    assert c.execute_command("SEM.EXTEND", "s", "kept", 300) == 1, "a plain extend keeps the binding"
    assert c.execute_command("RWLOCK.RELEASE", "rw", "kept", "READ") == [0, 0]
    assert c.execute_command("SEM.RELEASE", "s", "kept") == 0
    assert r.info("padlock")["padlock_keep_bound"] == 0


def test_multi_key_and_blocked_grants_are_bound_when_granted(server):
    r = server.client()
    c = server.client()
    assert len(c.execute_command("LOCK.MACQUIRE", 2, "{m}a", "{m}b", "me", 300, "KEEP")) == 2
    assert r.info("padlock")["padlock_keep_bound"] == 2
    r.execute_command("LOCK.ACQUIRE", "k", "other", 10000)
    w = Background(server, "LOCK.ACQUIRE", "k", "waiter", 300, "BLOCK", 0, "KEEP")
    wait_blocked(r, 1)
    assert r.info("padlock")["padlock_keep_bound"] == 2, "not bound while waiting"
    r.execute_command("LOCK.RELEASE", "k", "other")
    assert w.result() > 0
    assert r.info("padlock")["padlock_keep_bound"] == 3
    time.sleep(0.8)
    assert all(linfo(r, k) for k in ("{m}a", "{m}b", "k"))
    w.client.close()
    assert wait_for(lambda: not r.exists("k"), timeout=2)
    assert r.exists("{m}a", "{m}b") == 2


def test_restart_drops_bindings(make_server):
    s = make_server()
    c = s.client()
    c.execute_command("LOCK.ACQUIRE", "k", "me", 400, "KEEP")
    s.restart(save=True)
    r = s.client()
    assert r.info("padlock")["padlock_keep_bound"] == 0
    assert wait_for(lambda: not r.exists("k"), timeout=2), "the lease runs out"


def test_failover_drops_bindings(make_server):
    master, replica, m, rep = start_pair(make_server)
    holder = master.client()
    holder.execute_command("LOCK.ACQUIRE", "k", "me", 400, "KEEP")
    synced(m, rep)
    rep.execute_command("REPLICAOF", "NO", "ONE")
    m.execute_command("REPLICAOF", "127.0.0.1", replica.port)
    assert wait_for(lambda: m.info("padlock")["padlock_keep_bound"] == 0)
    assert wait_for(lambda: not rep.exists("k"), timeout=3), "nobody renews it on the new master"


@pytest.mark.parametrize("cmd, error", [
    (["LOCK.ACQUIRE", "k", "h", 100, "KEEP", "KEEP"], "KEEP given twice"),
    (["LOCK.ACQUIRE", "k", "h", 100, "KEEPS"], "syntax error"),
    (["LOCK.INFO", "k", "KEEP"], "wrong number of arguments"),
    (["LOCK.WAITFOR", "k", "h", 100, "KEEP"], "wrong number of arguments"),
    (["LOCK.RELEASE", "k", "h", "KEEP"], "wrong number of arguments"),
    (["SEM.RELEASE", "s", "h", "KEEP"], "syntax error"),
    (["RWLOCK.RELEASE", "rw", "h", "READ", "KEEP"], "wrong number of arguments"),
    (["EVAL", "return redis.call('LOCK.ACQUIRE', 'k2', 'h', 100, 'KEEP')", 0], "not a script"),
])
def test_bad_keep_is_refused(r, cmd, error):
    with pytest.raises(redis.ResponseError, match=error):
        r.execute_command(*cmd)
    assert r.info("padlock")["padlock_keep_bound"] == 0
    assert not r.exists("k2")


def test_keep_in_any_option_order(r):
    assert r.execute_command("SEM.ACQUIRE", "s", "h", 2, 300, "KEEP", "BLOCK", 10, "PERMITS", 2) == 2
    assert r.execute_command("LOCK.ACQUIRE", "k", "h", 300, "keep", "BLOCK", 10) > 0
    assert r.execute_command("SEM.EXTEND", "s", "h", 300, "PERMITS", 2, "KEEP") == 1
    assert r.info("padlock")["padlock_keep_bound"] == 2


@pytest.mark.heavy
def test_renewal_cost_and_memory_per_binding(server, record_property):
    """10,000 bound leases of 3 s cost the server nothing while bound: no
    renewals, no CPU above the idle baseline to speak of. Reports the CPU
    and used_memory per binding."""
    r = server.client()
    n = 10000
    pipe = r.pipeline(transaction=False)
    for i in range(n):
        pipe.execute_command("LOCK.ACQUIRE", f"k{i}", "me", 3000)
    pipe.execute()

    def cpu():
        i = r.info("cpu")
        return i["used_cpu_sys"] + i["used_cpu_user"]

    c0, t0 = cpu(), time.time()
    time.sleep(2)
    idle = (cpu() - c0) / (time.time() - t0)
    before = r.info("memory")["used_memory"]
    c = server.client()
    pipe = c.pipeline(transaction=False)
    for i in range(n):
        pipe.execute_command("LOCK.EXTEND", f"k{i}", "me", 3000, "KEEP")
    pipe.execute()
    per_binding = (r.info("memory")["used_memory"] - before) / n
    w0, c0, t0 = r.info("padlock")["padlock_keep_renewals"], cpu(), time.time()
    time.sleep(4)
    writes = r.info("padlock")["padlock_keep_renewals"] - w0
    busy = (cpu() - c0) / (time.time() - t0)
    record_property("bound_cpu_share", busy - idle)
    record_property("bytes_per_binding", per_binding)
    print(f"KEEP: {writes} writes in 4 s for {n} bound leases, CPU {busy:.4f} vs idle {idle:.4f} "
          f"CPU-s/s, {per_binding:.0f} bytes per binding")
    assert writes == 0, "nothing is written while bound"
    assert r.dbsize() == n, "every lease still held, past its ttl"
    assert busy - idle < 0.02, (busy, idle)
    assert 0 < per_binding < 1000


def test_a_ttl_too_short_to_keep_is_refused(make_server):
    """docs/commands.md, a KEEP ttl below 3 x keep-min-interval-ms is refused with -ERR,
    never silently lost."""
    r = make_server(module_args=["keep-min-interval-ms", "200"]).client()
    for cmd in (["LOCK.ACQUIRE", "k", "h", 599, "KEEP"], ["SEM.ACQUIRE", "s", "h", 3, 100, "KEEP"],
                ["RWLOCK.ACQUIRE", "rw", "h", "READ", 3, "KEEP"]):
        with pytest.raises(redis.ResponseError, match="at least 600"):
            r.execute_command(*cmd)
    assert r.dbsize() == 0, "nothing was taken"
    assert r.execute_command("LOCK.ACQUIRE", "k", "h", 599) > 0, "without KEEP any ttl goes"
    assert r.execute_command("LOCK.EXTEND", "k", "h", 600, "KEEP") == 1
    r.config_set("padlock.keep-min-interval-ms", 100)
    assert r.execute_command("LOCK.ACQUIRE", "k2", "h", 300, "KEEP") > 0


def test_keep_max_idle_ends_a_silent_binding(make_server):
    """docs/commands.md, with keep-max-idle-ms, a bound lease whose connection sent
    nothing for that long is no longer kept and runs out ttl-ms later (a
    half-open connection after a network cut looks exactly like this)."""
    srv = make_server(module_args=["keep-max-idle-ms", "1000"])
    r = srv.client()
    silent = srv.client()
    chatty = srv.client()
    silent.execute_command("LOCK.ACQUIRE", "quiet", "me", 600, "KEEP")
    chatty.execute_command("LOCK.ACQUIRE", "busy", "me", 600, "KEEP")
    deadline = time.time() + 5
    while time.time() < deadline:
        chatty.ping()  # this connection keeps talking
        time.sleep(0.2)
    assert r.exists("quiet") == 0, "the silent connection's lease ran out"
    assert r.exists("busy") == 1, "the talking one is still kept"
    assert r.info("padlock")["padlock_keep_lost"] >= 1


def aof_bytes(s):
    return b"".join(p.read_bytes() for p in s.dir.rglob("*.aof*") if p.is_file())


def take_all_three(c, ttl):
    fence = c.execute_command("LOCK.ACQUIRE", "k", "me", ttl, "KEEP")
    c.execute_command("LOCK.ACQUIRE", "k", "me", ttl)
    c.execute_command("SEM.ACQUIRE", "s", "me", 3, ttl, "PERMITS", 2, "KEEP")
    c.execute_command("RWLOCK.ACQUIRE", "rw", "me", "READ", ttl, "KEEP")
    return fence


def test_a_bound_lease_costs_no_write_to_the_aof_and_thaws_after_a_restart(make_server):
    """While bound, nothing is written to the AOF (it holds each bound lease
    once, far away); a restart from it (the master killed while the
    leases were bound) gives each its ttl from the restart, with the same
    holder, count, permits and fence, and they run out unless bound again."""
    extra = ["--appendonly", "yes", "--appendfsync", "always", "--aof-use-rdb-preamble", "no"]
    s = make_server(extra=extra)
    fence = take_all_three(s.client(), 600)
    r = s.client()
    size = len(aof_bytes(s))
    time.sleep(2)
    assert len(aof_bytes(s)) == size, "bound leases write nothing"
    assert str((1 << 52) + 600).encode() in aof_bytes(s), "the far deadline, written once"
    assert all(r.pttl(k) > FAR for k in ("k", "s", "rw")), "still held, past their ttl"
    s.kill()
    s.extra = extra
    s.start()
    r = s.client()
    after = linfo(r, "k")
    assert (after["holder"], after["count"], after["fence"]) == (b"me", 2, fence)
    assert list(sinfo(r, "s")["holders"]) == [b"me"] and sinfo(r, "s")["holders"][b"me"][0] == 2
    for key in ("k", "s", "rw"):
        assert wait_for(lambda: 0 < r.pttl(key) <= 600), f"{key} has its ttl from the restart"
    assert wait_for(lambda: r.exists("k", "s", "rw") == 0, timeout=3), "nobody binds them again"


def test_replicas_hold_bound_leases_far_away_until_the_binding_ends(make_server):
    """The replica holds each bound lease at its far deadline while the
    master renews locally; when the holder's connection closes, the real
    deadline (a full ttl) reaches it, and both run the lease out."""
    master, replica, m, rep = start_pair(make_server)
    holder = master.client()
    take_all_three(holder, 600)
    time.sleep(1.5)
    synced(m, rep)
    for key in ("k", "s", "rw"):
        assert rep.pttl(key) > FAR, key
    assert sinfo(rep, "s")["holders"][b"me"] == [2, 600]
    assert rinfo(rep, "rw")["holders"][b"me"][3] == 600
    holder.close()
    assert wait_for(lambda: all(0 < rep.pttl(k) <= 600 for k in ("k", "s", "rw"))), \
        "the real deadline reached the replica"
    assert wait_for(lambda: rep.exists("k", "s", "rw") == 0, timeout=3)
    assert m.exists("k", "s", "rw") == 0


def test_a_promoted_replica_gives_bound_leases_their_ttl(make_server):
    """docs/commands.md, after a failover, a lease that was bound runs out at most ttl-ms
    after the new master starts serving — and not before (the grace for
    the holder to bind it again there)."""
    master, replica, m, rep = start_pair(make_server)
    take_all_three(master.client(), 900)
    time.sleep(1.2)
    synced(m, rep)
    master.kill()
    rep.execute_command("REPLICAOF", "NO", "ONE")
    promoted = time.time()
    assert wait_for(lambda: all(0 < rep.pttl(k) <= 900 for k in ("k", "s", "rw")))
    assert linfo(rep, "k")["holder"] == b"me"
    c = replica.client()
    assert c.execute_command("LOCK.EXTEND", "k", "me", 900, "KEEP") == 1, "bound again in time"
    assert wait_for(lambda: rep.exists("s", "rw") == 0, timeout=3), "the others run out"
    assert time.time() - promoted > 0.7, "not before their ttl"
    time.sleep(1)
    assert rep.exists("k") == 1, "the one bound again is kept"


@pytest.mark.parametrize("how", ["replica attached later", "AOF rewrite"])
def test_a_copy_made_after_the_binding_holds_it_far_away(make_server, how):
    """The far deadline is the lease's own, so every copy has it: a replica
    that syncs after the binding (from an RDB file) and an AOF whose base
    was rewritten hold it, and a failover or a restart long after the copy
    still finds the leases held, with their ttl from then."""
    extra = ["--appendonly", "yes", "--repl-diskless-sync-delay", "0"]
    master = make_server(extra=extra)
    m = master.client()
    take_all_three(master.client(), 600)
    if how == "AOF rewrite":
        m.execute_command("BGREWRITEAOF")
        assert wait_for(lambda: m.info("persistence")["aof_rewrite_in_progress"] == 0, timeout=10)
        time.sleep(1.5)
        master.kill()
        master.start()
        r = master.client()
        assert wait_for(lambda: all(0 < r.pttl(k) <= 600 for k in ("k", "s", "rw"))), \
            "held after the restart, with their ttl"
        return
    replica = make_server(extra=["--replicaof", "127.0.0.1", str(master.port)])
    rep = replica.client()
    assert wait_for(lambda: rep.info("replication")["master_link_status"] == "up", timeout=30)
    assert wait_for(lambda: all(rep.pttl(k) > FAR for k in ("k", "s", "rw"))), "sent again"
    time.sleep(1)
    assert rep.exists("k", "s", "rw") == 3


@pytest.mark.parametrize("how", ["RENAME", "COPY", "MOVE", "SWAPDB"])
def test_a_bound_lease_taken_away_from_its_binding_runs_out(make_server, how):
    """A bound lease is held far away; a key that reaches a new name, copy
    or database has no binding there, so it gets its ttl from then (it is
    never held for good), while the binding on its old name, if the key
    is still there, keeps it."""
    s = make_server()
    r = s.client()
    holder = s.client()
    holder.execute_command("LOCK.ACQUIRE", "k", "me", 600, "KEEP")
    holder.execute_command("SEM.ACQUIRE", "s", "me", 2, 600, "KEEP")
    if how == "RENAME":
        r.rename("k", "k2")
        r.rename("s", "s2")
        moved, kept = (0, ["k2", "s2"]), []
    elif how == "COPY":
        r.copy("k", "k2")
        r.copy("s", "s2")
        moved, kept = (0, ["k2", "s2"]), ["k", "s"]
    elif how == "MOVE":
        r.move("k", 3)
        r.move("s", 3)
        moved, kept = (3, ["k", "s"]), []
    else:
        r.swapdb(0, 3)
        moved, kept = (3, ["k", "s"]), []
    db, keys = moved
    other = s.client(db=db)
    assert wait_for(lambda: all(0 < other.pttl(k) <= 600 for k in keys)), \
        [other.pttl(k) for k in keys]
    assert wait_for(lambda: other.exists(*keys) == 0, timeout=3), "nobody keeps them there"
    for k in kept:
        assert r.pttl(k) > FAR, "the original is still bound"


def test_move_and_copy_leave_the_caller_on_its_database(make_server):
    """padlock listens to `move_to`/`copy_to`; Valkey 8.1 runs such
    listeners on the calling client and left it on the destination
    database (valkey-io/valkey#4024). After `MOVE` the caller is where it
    was, whatever the server."""
    r = make_server().client()
    r.set("plain", 1)
    r.execute_command("LOCK.ACQUIRE", "k", "me", 60000)
    assert r.move("plain", 3) and r.move("k", 3)
    assert r.client_info()["db"] == 0, "MOVE left the caller on the destination"
    assert r.copy("plain", "copy") is False and r.set("here", 1)
    assert r.exists("here") == 1 and r.client_info()["db"] == 0
