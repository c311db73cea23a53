"""docs/commands.md, Blocking rules — the server's queues against a model.

Five holders, each on a connection of its own with a mailbox of its own,
take turns at random on one key of each kind: acquire (granted at once or
queued with `BLOCK ... MAILBOX`), reenter, release, cancel a queued
request, send a request again (queued: it keeps its place; granted: the
same reply) or close the connection it was queued on (or, with `KEEP`,
the one its hold is bound to). A plain-Python model says what each command answers and what
each release or cancel must mail to whom, in which order: first come,
first served, no newcomer past a queue, consecutive readers together, a
semaphore request never overtaken, the holder's own requests granted in
the pass that grants it. Every reply and every mailbox is compared after
every step, and fences only grow."""

import random

import pytest
import redis

from conftest import synced, wait_for

HOLDERS = ["h0", "h1", "h2", "h3", "h4"]


def replica_of(make_server, server):
    """A replica of `server`, following it."""
    server.client().config_set("repl-diskless-sync-delay", 0)
    rep = make_server(extra=["--replicaof", "127.0.0.1", str(server.port)])
    c = rep.client()
    assert wait_for(lambda: c.info("replication")["master_link_status"] == "up", timeout=30)
    return c


INFO_OF = {b"pdlk-lock": "LOCK.INFO", b"pdlk-sema": "SEM.INFO", b"pdlk-rwlk": "RWLOCK.INFO"}


def same_on_replica(r, rep, keys):
    """What the master's effects made on the replica is the master's
    state: each key's value, and the request-ids remembered. Compared when
    nothing was written meanwhile (a timer may write at any time: a
    lease's end served)."""
    def seen(c):
        return ([c.dump(k) for k in keys], c.info("padlock")["padlock_request_ids"],
                [c.execute_command(INFO_OF.get(c.type(k), "TYPE"), k) for k in keys])

    for _ in range(10):
        at = synced(r, rep)
        on_replica, on_master = seen(rep), seen(r)
        if r.info("replication")["master_repl_offset"] == at:
            break
    assert on_replica[:2] == on_master[:2], (keys, on_replica, on_master)


LIMIT = 3
STEPS = 1500


class Queues:
    """What both models share: `queue` holds requests as (holder, rid,
    ...) in arrival order; `serve` is each model's."""

    queue: list

    def serve(self):
        raise NotImplementedError

    def cancel(self, h, rid):
        """`LOCK.CANCEL`'s reply, and the grants it lets through."""
        for i, q in enumerate(self.queue):
            if q[:2] == (h, rid):
                del self.queue[i]
                return 1, self.serve()
        return 0, []


class Model(Queues):
    """The rules, for one key: `holds[h]` is what h holds (a lock's count,
    a semaphore's permits, a read-write holder's (reads, writes)), `queue`
    the requests in arrival order as (holder, rid, want)."""

    def __init__(self, kind):
        self.kind = kind
        self.holds = {}
        self.queue = []

    def grantable(self, h, want):
        if self.kind == "lock":
            return not self.holds or h in self.holds
        if self.kind == "sem":
            return sum(self.holds.values()) + want <= LIMIT
        others = [x for x in self.holds if x != h]
        if want == "READ":
            return not [x for x in others if self.holds[x][1]]
        return not others

    def take(self, h, want):
        if self.kind == "lock":
            self.holds[h] = self.holds.get(h, 0) + 1
        elif self.kind == "sem":
            self.holds[h] = self.holds.get(h, 0) + want
        else:
            r, w = self.holds.get(h, (0, 0))
            self.holds[h] = (r + 1, w) if want == "READ" else (r, w + 1)

    def acquire(self, h, rid, want):
        """'now' (granted at once) or 'queued'."""
        fresh = h not in self.holds
        if (not self.queue or not fresh) and self.grantable(h, want):
            self.take(h, want)
            return "now"
        self.queue.append((h, rid, want))
        return "queued"

    def release(self, h):
        if self.kind == "lock":
            self.holds[h] -= 1
            if not self.holds[h]:
                del self.holds[h]
        elif self.kind == "sem":
            del self.holds[h]
        else:
            r, w = self.holds[h]
            r, w = (r, w - 1) if w else (r - 1, w)
            if r or w:
                self.holds[h] = (r, w)
            else:
                del self.holds[h]
        return self.serve()

    def gone(self, h):
        """h's lease ran out: all it held is free."""
        del self.holds[h]
        return self.serve()

    def serve(self):
        """The grants a change makes: (holder, rid), in order."""
        out = []
        while self.queue:
            h, rid, want = self.queue[0]
            if not self.grantable(h, want):
                break
            self.take(h, want)
            self.queue.pop(0)
            out.append((h, rid))
        return out


#: The ttl of a `KEEP` hold: kept while its connection lives, then run out.
KEPT_TTL = 400


def command(kind, h, want, rid, keep):
    ttl = KEPT_TTL if keep else 60000
    base = {
        "lock": ["LOCK.ACQUIRE", "m", h, ttl],
        "sem": ["SEM.ACQUIRE", "m", h, LIMIT, ttl, "PERMITS", want],
        "rw": ["RWLOCK.ACQUIRE", "m", h, want, ttl],
    }[kind]
    return [*base, "BLOCK", 60000, "MAILBOX", f"mb:{h}", *(["KEEP"] if keep else []), "ID", rid]


def release(kind, h, holds):
    if kind == "lock":
        return ["LOCK.RELEASE", "m", h]
    if kind == "sem":
        return ["SEM.RELEASE", "m", h]
    return ["RWLOCK.RELEASE", "m", h, "WRITE" if holds[1] else "READ"]


@pytest.mark.parametrize("kind,keep", [("lock", False), ("sem", False), ("rw", False),
                                       ("lock", True), ("sem", True), ("rw", True)])
def test_queues_follow_the_model(make_server, server, r, kind, keep):
    """With `keep`, every hold is bound to its connection (`KEEP`), and
    now and then a holder's connection closes while it holds: its lease
    runs out a ttl later, whoever waits is served, and its mailbox says
    `-LOST`."""
    rng = random.Random(f"serving-{kind}-{keep}")
    rep = replica_of(make_server, server)
    conns = {h: server.client() for h in HOLDERS}
    model = Model(kind)
    queued = {}  # holder -> its queued rid
    sent = {}  # holder -> its latest acquire, as sent
    answered = {}  # holder -> the reply its latest acquire was granted with
    fences = {}  # holder -> the fence of its hold (lock, rw)
    top = 0
    n = 0

    def check_fence(h, value, fresh):
        nonlocal top
        if kind == "sem":
            assert value == model.holds[h], (h, value, model.holds)
        elif fresh:
            assert value > top, f"fence {value} after {top}"
            top = fences[h] = value
        else:
            assert value == fences[h]

    def mailed(grants, lost=None):
        """Each mailbox holds exactly the grants the model made, in order
        (fences are checked in the order of the grants), and `lost`'s a
        `-LOST` too."""
        got = {}
        for h in HOLDERS:
            got[h] = [e.decode().split(" ", 1) for e in r.lrange(f"mb:{h}", 0, -1)]
            r.delete(f"mb:{h}")
            losses = [g for g in got[h] if g[1].startswith("-LOST")]
            assert len(losses) == (h == lost), (h, got[h])
            got[h] = [g for g in got[h] if g not in losses]
            want = [rid for g, rid in grants if g == h]
            assert [g[0] for g in got[h]] == want, (h, got[h], want, model.queue)
        for h, rid in grants:
            _, value = got[h].pop(0)
            del queued[h]
            check_fence(h, int(value), True)
            answered[h] = int(value)

    def holds_now():
        raw = r.execute_command({"lock": "LOCK.INFO", "sem": "SEM.INFO", "rw": "RWLOCK.INFO"}[kind], "m")
        d = {raw[i]: raw[i + 1] for i in range(0, len(raw or []), 2)}
        if kind == "lock":
            seen = {d[b"holder"].decode(): d[b"count"]} if d else {}
        else:
            hs = d.get(b"holders", [])
            seen = {hs[i].decode(): hs[i + 1] for i in range(0, len(hs), 2)}
            seen = {h: v[0] if kind == "sem" else (v[0], v[1]) for h, v in seen.items()}
        return seen

    def same_holds():
        """The server's holders and counts are the model's."""
        assert holds_now() == model.holds, (holds_now(), model.holds, model.queue)

    steps = STEPS // 3 if keep else STEPS  # (each loss waits out a lease)
    for step in range(steps):
        h = rng.choice(HOLDERS)
        c = conns[h]
        n += 1
        rid = f"s{step}"
        if h in queued:
            if rng.random() < 0.15:
                # Sent again on a new connection (a client that reconnected):
                # the request keeps its place and moves there, so the old
                # connection's closing leaves it queued.
                new = server.client()
                assert new.execute_command(*sent[h]) == b"WAITING"
                c.close()
                conns[h] = new
            elif rng.random() < 0.1:
                # Its connection closes: the request leaves the queue with
                # it (the hold stays: no KEEP here), whoever was behind it
                # is served, and the holder goes on on a new connection.
                expect, grants = model.cancel(h, queued[h])
                c.close()
                conns[h] = server.client()
                del queued[h]
                assert wait_for(lambda: r.info("padlock")["padlock_mailbox_waiters"] == len(model.queue))
                mailed(grants)
            elif rng.random() < 0.3:
                expect, grants = model.cancel(h, queued[h])
                assert c.execute_command("LOCK.CANCEL", "m", h, queued[h]) == expect
                del queued[h]
                mailed(grants)
            continue
        held = model.holds.get(h)
        if h in answered and rng.random() < 0.1:
            # Its latest acquire sent again, held or released since: the
            # reply it was granted with, and nothing changes.
            assert c.execute_command(*sent[h]) == answered[h], (h, sent[h])
            continue
        if keep and held is not None and rng.random() < 0.05:
            answered.pop(h, None)  # (its ids' memory is not this test's)
            c.close()
            conns[h] = server.client()
            assert wait_for(lambda: h not in holds_now(), timeout=10), (h, holds_now())
            grants = model.gone(h)
            # The lease's end is served and the loss told by timers, soon.
            assert wait_for(lambda: r.info("padlock")["padlock_mailbox_waiters"] == len(model.queue)
                            and any(b" -LOST " in e for e in r.lrange(f"mb:{h}", 0, -1))), (h, model.queue)
            mailed(grants, lost=h)
            continue
        if held is None or rng.random() < 0.25:
            # An acquire, or a reentry (a reader's READ, a writer's WRITE;
            # no semaphore reentry or upgrade: their rules are their own tests').
            if held is not None and kind == "sem":
                continue
            if kind == "rw":
                want = ("WRITE" if held[1] else "READ") if held else rng.choice(["READ", "WRITE"])
            else:
                want = rng.randint(1, LIMIT) if kind == "sem" else 1
            fresh = held is None
            sent[h] = command(kind, h, want, rid, keep)
            answered.pop(h, None)
            got = c.execute_command(*sent[h])
            if model.acquire(h, rid, want) == "now":
                check_fence(h, got, fresh)
                answered[h] = got
            else:
                assert got == b"WAITING", (kind, h, want, got, model.holds, model.queue)
                queued[h] = rid
        else:
            grants = model.release(h)
            c.execute_command(*release(kind, h, held), "ID", rid)
            mailed(grants)
        if step % 50 == 0:
            assert r.info("padlock")["padlock_mailbox_waiters"] == len(model.queue)
            same_holds()
            same_on_replica(r, rep, ["m"])
    assert n == steps
    # A reload keeps the holds, and the queues with their connections;
    # then everyone lets go, and the queue drains in the model's order.
    # (Not with KEEP: a reload flushes before it loads, which ends the
    # bindings and tells their holds lost, as a FLUSHALL does.)
    if not keep:
        assert r.execute_command("DEBUG", "RELOAD") == b"OK"
    same_holds()
    assert r.info("padlock")["padlock_mailbox_waiters"] == len(model.queue)
    while model.holds:
        h = next(iter(model.holds))
        cmd = release(kind, h, model.holds[h])
        grants = model.release(h)
        conns[h].execute_command(*cmd)
        mailed(grants)
    assert not model.queue and r.info("padlock")["padlock_mailbox_waiters"] == 0
    assert not r.exists("m")
    same_on_replica(r, rep, ["m"])
    for c in conns.values():
        c.close()


class MultiModel(Queues):
    """Locks on three keys, taken one at a time or two at once
    (`LOCK.MACQUIRE`): a request is granted when each of its keys is free
    and no request queued before it wants any of them."""

    KEYS = ["{m}0", "{m}1", "{m}2"]

    def __init__(self):
        self.owner = {}
        self.queue = []

    def first_free(self, i, keys):
        earlier = {k for _, _, ks in self.queue[:i] for k in ks}
        return not any(k in self.owner or k in earlier for k in keys)

    def acquire(self, h, rid, keys):
        if self.first_free(len(self.queue), keys):
            self.owner.update({k: h for k in keys})
            return "now"
        self.queue.append((h, rid, keys))
        return "queued"

    def serve(self):
        out = []
        while True:
            for i, (h, rid, keys) in enumerate(self.queue):
                if self.first_free(i, keys):
                    self.owner.update({k: h for k in keys})
                    del self.queue[i]
                    out.append((h, rid))
                    break
            else:
                return out

    def release(self, h):
        for k in [k for k, o in self.owner.items() if o == h]:
            del self.owner[k]
        return self.serve()


@pytest.mark.parametrize("keep", [False, True])
def test_multi_key_queues_follow_the_model(make_server, server, r, keep):
    """With `keep`, now and then a holder's connection closes while it
    holds: each of its keys runs out a ttl later and is told lost."""
    rng = random.Random(f"serving-multi-{keep}")
    rep = replica_of(make_server, server)
    conns = {h: server.client() for h in HOLDERS}
    model = MultiModel()
    queued, mine = {}, {}  # holder -> its queued rid; holder -> the keys it asked for
    top = 0

    def holder_of(k):
        v = r.execute_command("LOCK.INFO", k)
        return dict(zip(v[::2], v[1::2]))[b"holder"].decode() if v else None

    def fences_of(value, keys):
        fs = [int(f) for f in value.split(",")] if isinstance(value, str) else list(value)
        assert len(fs) == len(keys) and fs == sorted(set(fs)), (keys, fs)
        return fs

    def mailed(grants, lost=(None, 0)):
        nonlocal top
        floor, seen = top, []
        for h in HOLDERS:
            got = [e.decode().split(" ", 1) for e in r.lrange(f"{{m}}mb:{h}", 0, -1)]
            r.delete(f"{{m}}mb:{h}")
            losses = [g for g in got if g[1].startswith("-LOST")]
            assert len(losses) == (lost[1] if h == lost[0] else 0), (h, got)
            got = [g for g in got if g not in losses]
            assert [g[0] for g in got] == [rid for g, rid in grants if g == h], (h, got, model.queue)
            for _, value in got:
                del queued[h]
                seen += fences_of(value, mine[h])
        # Fences are new, whatever order the grants of one pass took.
        assert all(f > floor for f in seen) and len(set(seen)) == len(seen)
        top = max([top, *seen])

    ttl = KEPT_TTL if keep else 60000
    for step in range(STEPS // 3 if keep else STEPS):
        h = rng.choice(HOLDERS)
        c = conns[h]
        rid = f"s{step}"
        if h in queued:
            if rng.random() < 0.3:
                expect, grants = model.cancel(h, queued[h])
                assert c.execute_command("LOCK.CANCEL", mine[h][0], h, queued[h]) == expect
                del queued[h]
                mailed(grants)
            continue
        if keep and h in model.owner.values() and rng.random() < 0.05:
            c.close()
            conns[h] = server.client()
            n = len(mine[h])
            assert wait_for(lambda: not any(r.exists(k) and holder_of(k) == h for k in mine[h]), timeout=10)
            grants = model.release(h)
            assert wait_for(lambda: r.info("padlock")["padlock_mailbox_waiters"] == len(model.queue)
                            and sum(b" -LOST " in e for e in r.lrange(f"{{m}}mb:{h}", 0, -1)) == n)
            mailed(grants, lost=(h, n))
            continue
        if h in model.owner.values():
            keys = mine[h]
            grants = model.release(h)
            if len(keys) == 1:
                assert c.execute_command("LOCK.RELEASE", keys[0], h, "ID", rid) == 0
            else:
                assert c.execute_command("LOCK.MRELEASE", 2, *keys, h, "ID", rid) == [0, 0]
            mailed(grants)
            continue
        keys = sorted(rng.sample(MultiModel.KEYS, rng.choice([1, 2])))
        mine[h] = keys
        wait = ["BLOCK", 60000, "MAILBOX", f"{{m}}mb:{h}", *(["KEEP"] if keep else []), "ID", rid]
        if len(keys) == 1:
            got = c.execute_command("LOCK.ACQUIRE", keys[0], h, ttl, *wait)
        else:
            got = c.execute_command("LOCK.MACQUIRE", 2, *keys, h, ttl, *wait)
        if model.acquire(h, rid, keys) == "now":
            fs = fences_of([got] if len(keys) == 1 else got, keys)
            assert fs[0] > top
            top = fs[-1]
        else:
            assert got == b"WAITING", (h, keys, got, model.owner, model.queue)
            queued[h] = rid
        if step % 50 == 0:
            assert r.info("padlock")["padlock_mailbox_waiters"] == len(model.queue)
            held = {k: r.execute_command("LOCK.INFO", k) for k in MultiModel.KEYS}
            held = {k: dict(zip(v[::2], v[1::2]))[b"holder"].decode() for k, v in held.items() if v}
            assert held == model.owner, (held, model.owner, model.queue)
            same_on_replica(r, rep, MultiModel.KEYS)
    if not keep:
        assert r.execute_command("DEBUG", "RELOAD") == b"OK"
    assert r.info("padlock")["padlock_mailbox_waiters"] == len(model.queue)
    while model.owner:
        h = next(iter(model.owner.values()))
        keys = mine[h]
        grants = model.release(h)
        if len(keys) == 1:
            conns[h].execute_command("LOCK.RELEASE", keys[0], h)
        else:
            conns[h].execute_command("LOCK.MRELEASE", 2, *keys, h)
        mailed(grants)
    assert not model.queue and r.info("padlock")["padlock_mailbox_waiters"] == 0
    assert not any(r.exists(k) for k in MultiModel.KEYS)
    same_on_replica(r, rep, MultiModel.KEYS)
    for c in conns.values():
        c.close()


def test_deadlocks_follow_the_model(make_server, server, r):
    """docs/commands.md, Deadlock detection — four holders, each holding
    some of four locks and waiting (through a mailbox) for at most one
    more: a request is refused with `-DEADLOCK` naming the cycle exactly
    when its wait would close one (waiter -> key -> owner -> key ...), and
    grants, releases, cancels and refusals leave the graph as the model
    has it. With single-key waits on locks every waiter waits for its key's
    owner only, so the model is a chain walk."""
    rng = random.Random("deadlocks")
    rep = replica_of(make_server, server)
    holders, keys = HOLDERS[:4], ["d0", "d1", "d2", "d3"]
    conns = {h: server.client() for h in holders}
    owner, queue, waiting = {}, {k: [] for k in keys}, {}
    refused = 0

    def cycle_from(h, k):
        """The cycle `h` waiting for `k` would close, as the server names it."""
        path, x = [h, k], owner[k]
        while x != h:
            if x not in waiting:
                return None
            path += [x, waiting[x][0]]
            x = owner[waiting[x][0]]
        return " -> ".join(path + [h])

    def mailed(grants):
        for h in holders:
            got = [e.decode().split(" ", 1)[0] for e in r.lrange(f"dmb:{h}", 0, -1)]
            r.delete(f"dmb:{h}")
            assert got == [rid for g, rid in grants if g == h], (h, got, grants)

    for step in range(STEPS):
        h = rng.choice(holders)
        c = conns[h]
        if h in waiting:
            if rng.random() < 0.2:
                k, rid = waiting.pop(h)
                queue[k].remove((h, rid))
                assert c.execute_command("LOCK.CANCEL", k, h, rid) == 1
            continue
        mine = [k for k in keys if owner.get(k) == h]
        if mine and rng.random() < 0.5:
            k = rng.choice(mine)
            del owner[k]
            grants = []
            if queue[k]:
                g, rid = queue[k].pop(0)
                owner[k] = g
                del waiting[g]
                grants.append((g, rid))
            assert c.execute_command("LOCK.RELEASE", k, h) == 0
            mailed(grants)
            continue
        others = [k for k in keys if owner.get(k) != h]
        if not others:
            continue
        k = rng.choice(others)
        rid = f"d{step}"
        cmd = ["LOCK.ACQUIRE", k, h, 60000, "BLOCK", 60000, "MAILBOX", f"dmb:{h}", "ID", rid]
        if k not in owner:
            assert c.execute_command(*cmd) > 0
            owner[k] = h
            continue
        cycle = cycle_from(h, k)
        if cycle:
            refused += 1
            with pytest.raises(redis.ResponseError) as e:
                c.execute_command(*cmd)
            assert str(e.value) == f"DEADLOCK {cycle}"
            continue
        assert c.execute_command(*cmd) == b"WAITING", (h, k, owner, waiting)
        queue[k].append((h, rid))
        waiting[h] = (k, rid)
        if step % 50 == 0:
            assert r.info("padlock")["padlock_mailbox_waiters"] == len(waiting)
            assert r.info("padlock")["padlock_wait_edges"] == len(waiting)
            same_on_replica(r, rep, keys)
    assert refused > 20, refused
    assert r.info("padlock")["padlock_deadlocks"] == refused
    for c in conns.values():
        c.close()
    assert wait_for(lambda: r.info("padlock")["padlock_wait_edges"] == 0)
