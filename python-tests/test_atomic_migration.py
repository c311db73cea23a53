"""docs/commands.md, Durability, replication, cluster — atomic slot migration (Redis
8.4+ `CLUSTER MIGRATION IMPORT`, Valkey 9+ `CLUSTER MIGRATESLOTS`): holder,
count, fence and lease move with the keys; waiters on the source are
answered `-MOVED` when ownership moves (at once, not at their timeout); the
source keeps nothing and serves no one; the destination's next fence is
larger than the source's last."""

import time

import pytest
import redis

from conftest import Background, wait_blocked, wait_for
from test_resharding import make_cluster, node_id, tag_for_slot, text


def atomic_migration(r):
    """("redis" | "valkey" | None, why not)."""
    info = r.info("server")
    if "valkey_version" in info:
        major = int(info["valkey_version"].split(".")[0])
        if major < 9:
            return None, f"Valkey {info['valkey_version']} has no atomic slot migration (9.0+)"
        return "valkey", ""
    major, minor = (int(x) for x in info["redis_version"].split(".")[:2])
    if (major, minor) < (8, 4):
        return None, f"Redis {info['redis_version']} has no atomic slot migration (8.4+)"
    return "redis", ""


def migration_cluster(make_server):
    """(kind, three masters), or the test skips with the reason printed."""
    nodes = make_cluster(make_server, [(0, 5460), (5461, 10922), (10923, 16383)])
    kind, why = atomic_migration(nodes[0].client())
    if kind is None:
        print(f"skipped: {why}")
        pytest.skip(why)
    return kind, nodes


def slot_on_source(make_server, slot, keys=50_000):
    """(kind, source, destination, the slot's hash tag, a source client),
    with `keys` plain keys in the slot so that its move takes a while."""
    kind, nodes = migration_cluster(make_server)
    tag = tag_for_slot(slot)
    r = nodes[0].client()
    fill(r, tag, keys)
    return kind, nodes[0], nodes[1], tag, r


def migrate(kind, src, dst, slot):
    if kind == "redis":
        dst.client().execute_command("CLUSTER", "MIGRATION", "IMPORT", slot, slot)
    else:
        src.client().execute_command("CLUSTER", "MIGRATESLOTS", "SLOTSRANGE", slot, slot,
                                     "NODE", node_id(dst))


def fill(r, tag, n):
    """n plain keys in the tag's slot: its snapshot takes a while to send."""
    pipe = r.pipeline(transaction=False)
    for i in range(n):
        pipe.set(f"{tag}fill:{i}", "x" * 20)
    pipe.execute()


def moved(r, d, key, left=0):
    """Whether `key` is on the destination `d` and the source `r` keeps
    `left` keys (`-MOVED` back to the source until ownership moves)."""
    try:
        return d.exists(key) == 1 and r.dbsize() == left
    except redis.ResponseError:
        return False


def lock_info(c, key):
    raw = c.execute_command("LOCK.INFO", key)
    return None if raw is None else dict(zip(raw[::2], raw[1::2]))


def test_atomic_migration_moves_state_and_redirects_waiters(make_server):
    kind, nodes = migration_cluster(make_server)
    src, dst = nodes[0], nodes[1]
    slot = 100
    tag = tag_for_slot(slot)
    k, s, w = f"{tag}lock", f"{tag}sem", f"{tag}rw"
    r = src.client()
    fence = r.execute_command("LOCK.ACQUIRE", k, "alice", 60000)
    assert r.execute_command("LOCK.ACQUIRE", k, "alice", 60000) == fence
    r.execute_command("SEM.ACQUIRE", s, "a", 3, 60000, "PERMITS", 2)
    r.execute_command("RWLOCK.ACQUIRE", w, "reader", "READ", 60000)
    last_src = r.info("padlock")["padlock_last_fence"]
    waiters = [Background(src, "LOCK.ACQUIRE", k, "bob", 60000, "BLOCK", 15000),
               Background(src, "SEM.ACQUIRE", s, "b", 3, 60000, "PERMITS", 2, "BLOCK", 15000),
               Background(src, "RWLOCK.ACQUIRE", w, "writer", "WRITE", 60000, "BLOCK", 15000)]
    wait_blocked(r, 3)
    d = dst.client()
    started = time.time()
    migrate(kind, src, dst, slot)
    assert wait_for(lambda: all(w.done() for w in waiters), timeout=10), "waiters redirected"
    assert time.time() - started < 8, "answered when ownership moved, not at their timeout"
    for b in waiters:
        with pytest.raises(redis.ResponseError, match=f"MOVED {slot} 127.0.0.1:{dst.port}"):
            b.result()
    info = lock_info(d, k)
    assert (info[b"holder"], info[b"count"], info[b"fence"]) == (b"alice", 2, fence)
    assert d.pttl(k) > 50000
    assert wait_for(lambda: r.dbsize() == 0, timeout=10), "the source keeps nothing"
    assert wait_for(lambda: r.info("padlock")["padlock_blocked_clients"] == 0)
    assert d.execute_command("LOCK.ACQUIRE", f"{tag}new", "h", 1000) > last_src


def test_writes_during_the_migration_reach_the_destination(make_server):
    """Acquires and releases on the source while the slot's snapshot is
    still being sent go to the destination through the migration's own
    stream (the state commands, `internal` on Redis 8, applied there)."""
    slot = 200
    kind, src, dst, tag, r = slot_on_source(make_server, slot)
    r.execute_command("LOCK.ACQUIRE", f"{tag}released", "h", 60000)
    for rid in ["a", "b"]:
        r.execute_command("LOCK.ACQUIRE", f"{tag}inner", "h", 60000, "ID", rid)
    migrate(kind, src, dst, slot)
    accepted = {}
    released = False
    for i in range(200):
        key = f"{tag}late:{i}"
        try:
            accepted[key] = r.execute_command("LOCK.ACQUIRE", key, "late", 60000, "ID", key)
            if i == 0:
                r.execute_command("LOCK.RELEASE", f"{tag}released", "h")
                # A release with an id goes as itself (docs/design.md).
                assert r.execute_command("LOCK.RELEASE", f"{tag}inner", "h", "ID", "c") == 1
                released = True
        except redis.ResponseError as e:
            assert "MOVED" in str(e) or "ASK" in str(e) or "TRYAGAIN" in str(e), str(e)
            break
    d = dst.client()
    assert wait_for(lambda: text(d.execute_command("CLUSTER", "COUNTKEYSINSLOT", slot)) != "0"
                    and r.dbsize() == 0, timeout=30)
    for key, fence in accepted.items():
        info = lock_info(d, key)
        assert info is not None and (info[b"holder"], info[b"fence"]) == (b"late", fence), key
    if accepted:
        assert d.exists(f"{tag}released") == 0, "the release reached the destination too"
    if released:
        assert lock_info(d, f"{tag}inner")[b"count"] == 1
        assert d.execute_command("LOCK.RELEASE", f"{tag}inner", "h", "ID", "c") == 1
        assert lock_info(d, f"{tag}inner")[b"count"] == 1, "the resend changed nothing"
    # Ids from before the move (in Redis 8.x sent ahead of the snapshot,
    # which carries values alone) and from during it are answered there.
    for rid in ["a", "b"]:
        d.execute_command("LOCK.ACQUIRE", f"{tag}inner", "h", 60000, "ID", rid)
    for key, fence in accepted.items():
        assert d.execute_command("LOCK.ACQUIRE", key, "late", 60000, "ID", key) == fence
        assert lock_info(d, key)[b"count"] == 1, f"the resend of {key} changed nothing"
    want = 1 if released else 2
    assert lock_info(d, f"{tag}inner")[b"count"] == want, "the resends changed nothing"
    print(f"{len(accepted)} acquires during the migration")


def test_the_destination_fences_stay_above_the_sources(make_server):
    """docs/commands.md, every fence the destination hands out for the moved keys is
    larger than every fence the source handed out (the source's counter,
    raised far above the destination's clock seed, travels with the slot)."""
    kind, nodes = migration_cluster(make_server)
    from test_poison import Payloads
    src, dst = nodes[0], nodes[1]
    r, d = src.client(), dst.client()
    p = Payloads(r, tag_for_slot(300))
    # A key of another slot of the source with a fence far above any clock
    # seed: the source's counter follows it.
    other = tag_for_slot(300) + "high"
    assert r.restore(other, 60000, p.lock(1, 2**52)) == b"OK"
    assert r.info("padlock")["padlock_last_fence"] == 2**52
    slot = 400
    tag = tag_for_slot(slot)
    r.execute_command("LOCK.ACQUIRE", f"{tag}k", "h", 60000)
    migrate(kind, src, dst, slot)

    assert wait_for(lambda: moved(r, d, f"{tag}k", left=1), timeout=10)
    assert d.info("padlock")["padlock_last_fence"] >= 2**52
    assert d.execute_command("LOCK.ACQUIRE", f"{tag}next", "h", 1000) > 2**52


def test_a_cancelled_migration_leaves_the_source_serving(make_server):
    """A migration cancelled before ownership moves changes nothing for the
    source's waiters: they stay queued and are granted there."""
    kind, nodes = migration_cluster(make_server)
    src, dst = nodes[0], nodes[1]
    slot = 500
    tag = tag_for_slot(slot)
    r = src.client()
    pipe = r.pipeline(transaction=False)
    for i in range(200_000):
        pipe.set(f"{tag}fill:{i}", "x" * 50)
    pipe.execute()
    k = f"{tag}k"
    r.execute_command("LOCK.ACQUIRE", k, "alice", 60000)
    waiter = Background(src, "LOCK.ACQUIRE", k, "bob", 60000, "BLOCK", 20000)
    wait_blocked(r, 1)
    migrate(kind, src, dst, slot)
    if kind == "redis":
        dst.client().execute_command("CLUSTER", "MIGRATION", "CANCEL", "ALL")
    else:
        try:
            r.execute_command("CLUSTER", "CANCELSLOTMIGRATIONS", "ALL")
        except redis.ResponseError:
            r.execute_command("CLUSTER", "CANCELSLOTMIGRATIONS")
    time.sleep(0.5)
    owner = text(r.execute_command("CLUSTER", "COUNTKEYSINSLOT", slot))
    if owner == "0":
        pytest.skip("the migration finished before it could be cancelled")
    assert not waiter.done(), "the waiter still waits on the source"
    # Mailbox waits, refused while the slot was moving, queue again.
    mail = ["LOCK.ACQUIRE", k, "carol", 60000, "BLOCK", 20000, "MAILBOX", f"{tag}mb", "ID", "c1"]

    def queues():
        try:
            return r.execute_command(*mail) == b"WAITING"
        except redis.ResponseError as e:
            assert str(e).startswith("TRYAGAIN"), str(e)
            return False

    assert wait_for(queues, timeout=10)
    assert r.execute_command("LOCK.RELEASE", k, "alice") == 0
    fence = waiter.result()
    assert isinstance(fence, int) and fence > 0
    assert lock_info(r, k)[b"holder"] == b"bob"


def test_bound_leases_that_moved_run_out_on_the_destination(make_server):
    """A bound lease travels far away (its deadline carries its ttl, see
    test_keep); the destination of an atomic migration binds nothing, so
    it gives each such lease its ttl from then (never holds it for good),
    and a lease the holder binds again there is kept."""
    kind, nodes = migration_cluster(make_server)
    src, dst = nodes[0], nodes[1]
    slot = 300
    tag = tag_for_slot(slot)
    r = src.client()
    fill(r, tag, 20_000)
    holder = src.client()
    keys = [f"{tag}lock", f"{tag}sem", f"{tag}rw"]
    holder.execute_command("LOCK.ACQUIRE", keys[0], "me", 900, "KEEP")
    holder.execute_command("SEM.ACQUIRE", keys[1], "me", 3, 900, "KEEP")
    migrate(kind, src, dst, slot)
    try:  # bound again while the slot's snapshot is being sent, if still in time
        holder.execute_command("RWLOCK.ACQUIRE", keys[2], "me", "READ", 900, "KEEP")
    except redis.ResponseError as e:
        assert "MOVED" in str(e) or "ASK" in str(e) or "TRYAGAIN" in str(e), str(e)
        keys.pop()
    d = dst.client()
    assert wait_for(lambda: r.dbsize() == 0, timeout=30)
    assert wait_for(lambda: all(0 < d.pttl(k) <= 900 for k in keys), timeout=5), \
        [d.pttl(k) for k in keys]
    assert wait_for(lambda: d.exists(*keys) == 0, timeout=5), "nobody keeps them there"


def test_request_ids_of_every_kind_move_with_the_slot(make_server):
    """A resend to the new owner answers what the source answered and
    changes nothing: a lock, a multi-lock (an array reply), a semaphore, a
    read-write lock, and a final release whose key is gone (on Redis 8.x
    the ids go ahead of a snapshot of values alone; on Valkey after each
    key's value)."""
    kind, nodes = migration_cluster(make_server)
    src, dst = nodes[0], nodes[1]
    slot = 600
    tag = tag_for_slot(slot)
    r = src.client()
    sent = [
        ["LOCK.ACQUIRE", f"{tag}l", "h", 60000, "ID", "r1"],
        ["LOCK.MACQUIRE", 2, f"{tag}m1", f"{tag}m2", "h", 60000, "ID", "r2"],
        ["SEM.ACQUIRE", f"{tag}s", "h", 3, 60000, "PERMITS", 2, "ID", "r3"],
        ["RWLOCK.ACQUIRE", f"{tag}w", "h", "READ", 60000, "ID", "r4"],
        ["LOCK.ACQUIRE", f"{tag}gone", "h", 60000, "ID", "r5"],
        ["LOCK.RELEASE", f"{tag}gone", "h", "ID", "r6"],
    ]
    answers = [r.execute_command(*c) for c in sent]
    assert answers[5] == 0 and r.exists(f"{tag}gone") == 0
    before = {k: r.dump(k) for k in (f"{tag}l", f"{tag}m1", f"{tag}m2", f"{tag}s", f"{tag}w")}
    migrate(kind, src, dst, slot)
    d = dst.client()

    assert wait_for(lambda: moved(r, d, f"{tag}l"), timeout=30)
    # Valkey's snapshot holds what its keys' values write, so the ids of a
    # key no longer there stay behind (docs/operations.md).
    carried = len(sent) if kind == "redis" else 4
    replies = [d.execute_command(*c) for c in sent[:carried]]
    assert replies == answers[:carried], "resends answer from memory on the new owner"
    for k, v in before.items():
        # The lease's deadline is absolute: the value is the same bytes.
        assert d.dump(k) == v, f"the resend changed {k}"
    assert d.exists(f"{tag}gone") == 0, "the resent final release freed nothing new"
    assert d.execute_command("LOCK.ACQUIRE", f"{tag}l", "h", 60000, "ID", "new") == answers[0]
    assert lock_info(d, f"{tag}l")[b"count"] == 2, "a new id still applies"


def test_mailbox_waits_are_told_to_wait_again_and_their_posts_move(make_server):
    """A mailbox moves with its slot, so the source cannot post `-MOVED` to
    it once ownership moved: a queued mailbox wait is told `-TRYAGAIN`
    when the move begins (a post of the moving slot: it reaches the new
    owner), a new one is refused meanwhile, and the source keeps no stray
    mailbox. Waiting again on the new owner queues there."""
    slot = 800
    kind, src, dst, tag, r = slot_on_source(make_server, slot)
    k, mb = f"{tag}k", f"{tag}mb"
    r.execute_command("LOCK.ACQUIRE", k, "a", 60000)
    wait = ["LOCK.ACQUIRE", k, "b", 60000, "BLOCK", 30000, "MAILBOX", mb, "ID", "q1"]
    assert r.execute_command(*wait) == b"WAITING"
    migrate(kind, src, dst, slot)
    told = {b"q1"}
    try:  # Redis starts the move on the source a moment later: queued then
        if r.execute_command(*wait[:-1], "q2") == b"WAITING":
            told.add(b"q2")
    except redis.ResponseError as e:
        assert str(e).startswith("TRYAGAIN") or "MOVED" in str(e), str(e)
    d = dst.client()

    assert wait_for(lambda: moved(r, d, k), timeout=30), "the source keeps no stray mailbox"
    posts = {e.split(b" ", 1)[0]: e.split(b" ", 1)[1] for e in d.lrange(mb, 0, -1)}
    assert set(posts) == told, posts
    assert all(p.startswith(b"-TRYAGAIN") for p in posts.values()), posts
    assert r.info("padlock")["padlock_blocked_clients"] == 0
    d.delete(mb)
    assert d.execute_command(*wait) == b"WAITING", "waiting again queues on the new owner"
    assert d.execute_command("LOCK.RELEASE", k, "a") == 0
    assert wait_for(lambda: d.llen(mb) == 1)
    rid, fence = d.lpop(mb).split(b" ")
    assert rid == b"q1" and lock_info(d, k)[b"holder"] == b"b" and int(fence) > 0


def test_every_kind_of_mailbox_wait_is_told_to_wait_again(make_server):
    """Semaphore, read-write and multi-key mailbox waits are told as a
    lock's are (the engine is kind-blind), and a semaphore holder whose
    losses go to the mailbox is told `-LOST migrating`."""
    slot = 820
    kind, src, dst, tag, r = slot_on_source(make_server, slot)
    s, w, m1, m2, mb = (f"{tag}{n}" for n in ("s", "w", "m1", "m2", "mb"))
    h = src.client()
    assert h.execute_command("SEM.ACQUIRE", s, "a", 1, 60000, "BLOCK", 1000, "MAILBOX", mb, "KEEP",
                             "ID", "held") == 1
    r.execute_command("RWLOCK.ACQUIRE", w, "a", "READ", 60000)
    r.execute_command("LOCK.MACQUIRE", 2, m1, m2, "a", 60000)
    waits = {b"qs": ["SEM.ACQUIRE", s, "b", 1, 60000],
             b"qw": ["RWLOCK.ACQUIRE", w, "b", "WRITE", 60000],
             b"qm": ["LOCK.MACQUIRE", 2, m1, m2, "b", 60000]}
    for rid, cmd in waits.items():
        assert r.execute_command(*cmd, "BLOCK", 30000, "MAILBOX", mb, "ID", rid.decode()) == b"WAITING"
    migrate(kind, src, dst, slot)
    d = dst.client()
    assert wait_for(lambda: moved(r, d, s), timeout=30), "the source keeps no stray mailbox"
    posts = {e.split(b" ", 1)[0]: e.split(b" ", 1)[1] for e in d.lrange(mb, 0, -1)}
    assert set(posts) == set(waits) | {b"held"}, posts
    assert all(posts[rid].startswith(b"-TRYAGAIN") for rid in waits), posts
    assert posts[b"held"] == b"-LOST migrating"


@pytest.mark.parametrize("flavour", ["threads", "asyncio"])
def test_a_client_waiting_through_a_migration_gets_the_lock_on_the_new_owner(make_server, flavour):
    """End to end with the Python client (`RedisCluster`, mailbox waits):
    a caller waiting when the slot starts to move is told to wait again,
    follows the slot to its new owner (`-MOVED`), queues there and is
    granted when the holder releases there, within its own timeout."""
    import asyncio
    import threading

    import redis.asyncio.cluster

    from padlock import Lock, aio

    slot = 900
    kind, src, dst, tag, r = slot_on_source(make_server, slot)
    k = f"{tag}k"
    assert r.execute_command("LOCK.ACQUIRE", k, "a", 60000) > 0
    rc = redis.RedisCluster(host="127.0.0.1", port=src.port)
    got = {}

    def wait():
        if flavour == "threads":
            lock = Lock(rc, k, ttl=30, holder="b")
            got["fence"] = lock.acquire(timeout=25)
            lock.release()
            return

        async def main():
            arc = redis.asyncio.cluster.RedisCluster(host="127.0.0.1", port=src.port)
            try:
                lock = aio.Lock(arc, k, ttl=30, holder="b")
                got["fence"] = await lock.acquire(timeout=25)
                await lock.release()
            finally:
                await arc.aclose()

        asyncio.run(main())

    t = threading.Thread(target=wait)
    t.start()
    try:
        assert wait_for(lambda: lock_info(r, k)[b"waiters"] == 1, timeout=10)
        migrate(kind, src, dst, slot)
        d = dst.client()

        assert wait_for(lambda: moved(r, d, k), timeout=30)
        assert wait_for(lambda: lock_info(d, k)[b"waiters"] == 1, timeout=10), \
            "the caller queued again on the new owner"
        assert d.execute_command("LOCK.RELEASE", k, "a") == 0
        t.join(20)
        assert not t.is_alive()
        assert got["fence"] is not None and got["fence"] > 0
        assert d.exists(k) == 0, "granted there, and released there"
    finally:
        t.join(30)
        rc.close()


def test_a_hold_that_reports_losses_to_a_mailbox_is_told_when_its_slot_starts_to_move(make_server):
    """A `KEEP` binding ends with the move (the new owner binds nothing),
    and a post after the move could reach no one: so a hold whose losses
    go to a mailbox is told `-LOST migrating` when the move begins (a post
    of the moving slot, read on either node), its lease gets its ttl, and
    the source keeps no stray mailbox. Meanwhile a request naming a
    mailbox of the slot is refused with `-TRYAGAIN`."""
    slot = 960
    kind, src, dst, tag, r = slot_on_source(make_server, slot)
    k, mb = f"{tag}k", f"{tag}mb"
    h = src.client()
    fence = h.execute_command("LOCK.ACQUIRE", k, "a", 20000, "BLOCK", 1000, "MAILBOX", mb, "KEEP", "ID", "g1")
    assert lock_info(r, k)[b"keep"] == 1
    migrate(kind, src, dst, slot)
    d = dst.client()
    try:  # a move the source has begun refuses it; one not begun yet binds
        h.execute_command("LOCK.EXTEND", k, "a", 20000, "KEEP", "MAILBOX", mb, "ID", "g2")
    except redis.ResponseError as e:
        assert str(e).startswith("TRYAGAIN") or "MOVED" in str(e), str(e)
    assert wait_for(lambda: moved(r, d, k), timeout=30), "the source keeps no stray mailbox"
    posts = d.lrange(mb, 0, -1)
    assert b"g1 -LOST migrating" in posts or b"g2 -LOST migrating" in posts, posts
    info = lock_info(d, k)
    assert (info[b"holder"], info[b"fence"], info[b"keep"]) == (b"a", fence, 0)
    assert 0 < d.pttl(k) <= 20000, "the lease runs out there unless bound again"


def test_a_client_holding_through_a_migration_hears_its_loss(make_server):
    """The Python client's hold (`KEEP`, losses reported to its slot's
    mailbox) hears `-LOST migrating` when its slot starts to move, and
    never says held after: the new owner binds nothing."""
    from padlock import Lock

    slot = 970
    kind, src, dst, tag, r = slot_on_source(make_server, slot)
    k = f"{tag}k"
    rc = redis.RedisCluster(host="127.0.0.1", port=src.port)
    try:
        lock = Lock(rc, k, ttl=10)
        assert lock.acquire(timeout=5) is not None
        assert wait_for(lambda: lock_info(r, k)[b"keep"] == 1, timeout=5)
        migrate(kind, src, dst, slot)
        assert lock.lost.wait(10), "the loss was heard"
        assert not lock.held
        d = dst.client()
        assert wait_for(lambda: moved(r, d, k), timeout=30)
        assert 0 < d.pttl(k) <= 10000, "its lease runs out on the new owner"
    finally:
        rc.close()
