"""Fuzz against a replica: random requests (with and without ids, `KEEP`,
`MAILBOX` waits, multi-key locks, semaphores with permits, read-write locks,
cancels, resends) mixed with plain commands that remove, rename, copy or
re-expire keys, swap databases or flush one, on a master. After each batch
the master waits for its replica, which must then hold exactly the
master's state: the same keys, each value byte for byte (`DUMP`), the same
absolute expiry (`PEXPIRETIME`: effects carry deadlines, never
durations), the same mailboxes and as many remembered request-ids. At the end the replica is
promoted, or the master restarted from its AOF or RDB (and must load
exactly what it had), and the recent applied requests of every key and
holder, resent there, answer what the master answered and change
nothing.

Runs on a fixed seed for a few seconds in `make test`
(`PADLOCK_FUZZ_SEED`, `PADLOCK_FUZZ_SECONDS` as in test_fuzz.py)."""

import os
import random
import time

import pytest
import redis

from conftest import wait_for
from test_durability import start_pair

SECONDS = float(os.environ.get("PADLOCK_FUZZ_SECONDS", "3"))
SEED = int(os.environ.get("PADLOCK_FUZZ_SEED", "2026"))

LOCKS = [b"l0", b"l1", b"l2"]
SEMS = [b"s0", b"s1"]
RWS = [b"w0", b"w1"]
HOLDERS = [b"h1", b"h2", b"h3"]
MAILBOX = b"mb"
# Long leases and waits: nothing runs out while a batch is compared, so
# the two servers are only ever apart by what replication has not sent.
# (A longer run sees them run out: a comparison then waits for the replica
# to catch up with the master's timer.)
TTLS = [30000, 60000, 120000]
# A run that ends in a restart compares the state before and after it, so
# nothing may run out in between, whatever the run's length: its leases,
# waits, mailboxes and freed keys' ids last hours.
HOURS = [3_600_000, 7_200_000]
LASTING = ["mailbox-ttl-ms", "86400000", "id-memory-ms", "86400000"]
# A bound lease's deadline is 2^52 ms and more (docs/design.md, KEEP).
FAR = 1 << 52
BATCH = 40
RECENT = 12


class Gen:
    def __init__(self, rng, keep, ttls):
        self.rng = rng
        self.keep = keep
        self.ttls = [str(t).encode() for t in ttls]
        self.n = 0
        self.queued = []  # (key, command, id) of MAILBOX requests, for LOCK.CANCEL

    def rid(self):
        self.n += 1
        return b"r%d" % self.n

    def tail(self, cmd, block=True, keep=True, with_id=True):
        """Options as the clients send them: a wait through the mailbox now
        and then, `KEEP` often, and the id last (or none, now and then)."""
        rng = self.rng
        wait = block and rng.random() < 0.2
        if wait:
            cmd += [b"BLOCK", rng.choice(self.ttls), b"MAILBOX", MAILBOX]
        if keep and self.keep and rng.random() < 0.4:
            cmd.append(b"KEEP")
        if wait or (with_id and rng.random() < 0.9):
            rid = self.rid()
            cmd += [b"ID", rid]
            if wait:
                self.queued.append((cmd[1] if cmd[0] != b"LOCK.MACQUIRE" else cmd[2], cmd, rid))
        return cmd

    def command(self):
        rng = self.rng
        h = rng.choice(HOLDERS)
        ttl = rng.choice(self.ttls)
        pick = rng.random()
        lk, sk, wk = rng.choice(LOCKS), rng.choice(SEMS), rng.choice(RWS)
        if pick < 0.16:
            return self.tail([b"LOCK.ACQUIRE", lk, h, ttl])
        if pick < 0.20:
            return self.tail([b"LOCK.REENTER", lk, h, ttl], block=False)
        if pick < 0.32:
            return self.tail([b"LOCK.RELEASE", lk, h], block=False, keep=False)
        if pick < 0.36:
            return self.tail([b"LOCK.EXTEND", lk, h, ttl], block=False)
        if pick < 0.41:
            ks = rng.sample(LOCKS, 2)
            return self.tail([b"LOCK.MACQUIRE", b"2", *ks, h, ttl])
        if pick < 0.45:
            ks = rng.sample(LOCKS, 2)
            return self.tail([b"LOCK.MRELEASE", b"2", *ks, h], block=False, keep=False)
        if pick < 0.55:
            cmd = [b"SEM.ACQUIRE", sk, h, b"3", ttl]
            if rng.random() < 0.4:
                cmd += [b"PERMITS", str(rng.randrange(1, 3)).encode()]
            return self.tail(cmd)
        if pick < 0.62:
            cmd = [b"SEM.RELEASE", sk, h]
            if rng.random() < 0.4:
                cmd += [b"PERMITS", b"1"]
            return self.tail(cmd, block=False, keep=False)
        if pick < 0.64:
            return self.tail([b"SEM.EXTEND", sk, h, ttl], block=False)
        if pick < 0.73:
            return self.tail([b"RWLOCK.ACQUIRE", wk, h, rng.choice([b"READ", b"WRITE"]), ttl])
        if pick < 0.80:
            return self.tail([b"RWLOCK.RELEASE", wk, h, rng.choice([b"READ", b"WRITE"])],
                             block=False, keep=False)
        if pick < 0.82:
            return self.tail([b"RWLOCK.EXTEND", wk, h, ttl], block=False)
        if pick < 0.86 and self.queued:
            key, cmd, rid = rng.choice(self.queued)
            holder = cmd[2] if cmd[0] != b"LOCK.MACQUIRE" else cmd[4]
            return [b"LOCK.CANCEL", key, holder, rid]
        # Another hand: the keys change under padlock's requests.
        k = rng.choice(LOCKS + SEMS + RWS)
        other = rng.random()
        if other < 0.35:
            return [b"DEL", k]
        if other < 0.55:
            return [b"RENAME", k, rng.choice(LOCKS + SEMS + RWS)]
        if other < 0.75:
            return [b"COPY", k, rng.choice(LOCKS + SEMS + RWS), b"REPLACE"]
        if other < 0.9:
            return [b"PEXPIRE", k, rng.choice(self.ttls)]
        if other < 0.97:
            return [b"LPOP", MAILBOX]
        if other < 0.995:
            return [b"SWAPDB", b"0", b"1"]
        return [b"FLUSHDB"]


def applied(reply):
    """What a changing request answers when it applied (and so what is
    remembered of it): an integer, or integers."""
    if isinstance(reply, int):
        return True
    return isinstance(reply, list) and bool(reply) and all(isinstance(v, int) for v in reply)


def group(cmd):
    """The key and holder a request's id is remembered under."""
    if cmd[0] in (b"LOCK.MACQUIRE", b"LOCK.MRELEASE"):
        return cmd[2], cmd[2 + int(cmd[1])]
    return cmd[1], cmd[2]


def snapshot(dbs):
    """Every key of databases 0 and 1 (`SWAPDB` moves them), and how many
    request-ids are remembered."""
    out = {}
    for db, r in enumerate(dbs):
        for k in sorted(r.keys(b"*")):
            t = r.type(k)
            if t == b"list":
                value = r.lrange(k, 0, -1)
            elif t == b"string":
                value = r.get(k)
            else:
                value = r.dump(k)
            out[db, k] = (t, value, r.execute_command("PEXPIRETIME", k))
    return out, dbs[0].info("padlock")["padlock_request_ids"]


def send(r, cmd):
    try:
        return r.execute_command(*cmd)
    except redis.ResponseError as e:
        return e


# How a run ends: its replica promoted, or its master restarted from its
# AOF or its RDB. A restart gives a bound lease its ttl from then, so those
# runs send no `KEEP`: every key then loads as it was, to the byte.
ENDINGS = ["promoted", "aof", "rdb"]


@pytest.mark.parametrize("ending", ENDINGS)
def test_a_replica_holds_the_masters_state_and_resends_answer_after(make_server, ending):
    print(f"replica fuzz ({ending}): seed {SEED}")  # to run a failure again: PADLOCK_FUZZ_SEED
    rng = random.Random(SEED)
    restart = ending != "promoted"
    gen = Gen(rng, keep=not restart, ttls=HOURS if restart else TTLS)
    aof = ["--appendonly", "yes", "--appendfsync", "always"] if ending == "aof" else []
    master, replica, m, rep = start_pair(make_server, LASTING if restart else (), aof)
    ms, reps = [m, master.client(db=1)], [rep, replica.client(db=1)]
    # Every holder is longer than the replica's bound (and, after a
    # restart, the master's): what the master accepted applies all the
    # same, from the link and from the AOF (docs/operations.md).
    rep.config_set("padlock.max-holder-len", 1)
    m.set(b"warm", 1)
    assert m.wait(1, 5000) == 1
    m.delete(b"warm")
    # (key, holder) -> every request with an id sent for it: (command,
    # reply, whether to resend it). A group remembers its latest
    # `max-ids-per-holder` (16); those of the last RECENT are resent.
    sent = {}
    deadline = time.time() + SECONDS
    n = batches = resent = since_flush = 0
    last = None
    while time.time() < deadline or batches < 3:
        for _ in range(BATCH):
            # Now and then the last command again, as a client resends it.
            again = last is not None and rng.random() < 0.08
            cmd = last if again else gen.command()
            last = cmd
            reply = send(m, cmd)
            n += 1
            since_flush += 1
            if cmd == [b"FLUSHDB"] and not isinstance(reply, Exception):
                sent.clear()  # the database's ids are forgotten with it
                since_flush = 0
            if b"ID" in cmd and not again:
                resend = b"MAILBOX" not in cmd and applied(reply)
                sent.setdefault(group(cmd), []).append((cmd, reply, resend))

        # What the replica acknowledged is the whole state, unless the
        # master's timer wrote since (a lease or a wait that ran out, in a
        # run longer than its ttls): then compare again.
        def same():
            assert m.wait(1, 5000) == 1, "the replica did not acknowledge"
            return snapshot(ms) == snapshot(reps)
        assert wait_for(same, timeout=5), (
            f"after {n} commands the replica differs:\nmaster {snapshot(ms)}\nreplica {snapshot(reps)}")
        batches += 1
    assert master.alive() and replica.alive()
    if ending == "promoted":
        master.stop()
        rep.execute_command("REPLICAOF", "NO", "ONE")
        # Promoted, it gives bound leases their ttl from now (a timer pass
        # over the keys): wait until no deadline is far away any more.
        assert wait_for(lambda: all(exp < FAR for _, _, exp in snapshot(reps)[0].values()), timeout=5)
        target, dbs = rep, reps
    else:
        replica.stop()
        want = snapshot(ms)
        master.module_args = [*LASTING, "max-holder-len", "1"]
        master.restart(save=ending == "rdb")
        target = master.client()
        dbs = [target, master.client(db=1)]
        assert snapshot(dbs) == want, f"loaded from the {ending}: {snapshot(dbs)}\nwas {want}"
    recent = [(c, r) for requests in sent.values() for c, r, resend in requests[-RECENT:] if resend]
    for cmd, reply in recent:
        before = snapshot(dbs)[0]
        again = send(target, cmd)
        assert again == reply, f"resent {cmd} ({ending}): {again!r}, first {reply!r}"
        assert snapshot(dbs)[0] == before, f"resending {cmd} changed the state"
        resent += 1
    print(f"replica fuzz ({ending}): {n} commands in {batches} batches compared, {resent} resends answered")
    # Few requests to resend only when a FLUSHDB came near the end.
    assert n > 100 and (resent > 5 or since_flush < 500)
