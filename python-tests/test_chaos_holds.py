"""Chaos for what the client libraries send: workers acquire with `KEEP`,
`ID` and `MAILBOX` waits, resend, cancel, extend and rebind, beside the
plain workers of test_chaos, while the operator does all it does there
and more: swaps databases, changes padlock's settings, makes the server a
replica of a dead master and a master again, restarts it from its AOF,
and runs padlock commands in scripts and transactions.

The server and its replica must live, and at the end: every wait
answered, every binding and queued request gone with its connection, no
lease kept far away, the replica in the master's state, the state
reloading as it was; and from the mailboxes, request by request: one
outcome at most, no more losses than keys, no outcome for a request
never queued. A resend that nothing came between answers what the first
send did."""

import os
import random
import socket
import threading
import time

import redis

from conftest import wait_for
from harness import kept_without_binding
from test_chaos import LOCKS, MULTI, RWS, SEMS, connected, operator, run, worker
from test_durability import start_pair
from test_replica_fuzz import snapshot

SECONDS = float(os.environ.get("PADLOCK_CHAOS_SECONDS", "6"))
#: Another seed draws other workloads and acts (threads interleave as they
#: will, so a run is not repeated exactly either way).
SEED = int(os.environ.get("PADLOCK_CHAOS_SEED", "2027"))
SETTINGS = {
    "max-waiters-per-key": [1, 10000],
    "max-holder-len": [1, 512],
    "keep-min-interval-ms": [1, 100],
    "keep-max-idle-ms": [0, 5000],
    "id-memory-ms": [20, 60000],
    "max-remembered-ids": [1, 100000],
    "max-ids-per-holder": [1, 16],
    "mailbox-ttl-ms": [50, 60000],
}
DBS = [0, 1]
#: INFO padlock's counters the end checks, summed over restarts.
COUNTED = ["padlock_mailbox_posts", "padlock_requests_replayed"]


def holder_worker(server, seed, stop, stats, ids, idx, log):
    """One client library's traffic: every changing command with an id,
    acquires with KEEP, half the waits through a mailbox of its own. A
    failed check is kept for the test to raise."""
    try:
        holder_traffic(server, seed, stop, stats, ids, idx, log)
    except Exception as e:  # noqa: BLE001  (any failure fails the test)
        stats["failures"].append(f"{type(e).__name__}: {e}")


def holder_traffic(server, seed, stop, stats, ids, idx, log):
    rng = random.Random(seed)
    holder, mb = f"m{idx}", f"mb{idx}"
    n = 0
    last = None

    def connect():
        return connected(server, ids, f"m{idx}")

    def rid():
        nonlocal n
        n += 1
        return f"{holder}-{n}"

    def drain(c):
        got = c.lpop(mb, 100) or []
        for item in got:
            r, _, reply = item.partition(b" ")
            log.setdefault(r.decode(), []).append(("post", reply))

    c = connect()
    waiting = []
    while not stop.is_set():
        # (A KEEP ttl is at least 3 x keep-min-interval-ms.)
        ttl, block = rng.randint(300, 1000), rng.randint(20, 400)
        wait = rng.choice([[], ["BLOCK", block], ["BLOCK", block, "MAILBOX", mb]])
        op = rng.randrange(11)
        k = rng.choice(LOCKS)
        if op == 0:
            cmd = ["LOCK.ACQUIRE", k, holder, ttl, *wait, "KEEP"]
        elif op == 1:
            cmd = ["LOCK.RELEASE", k, holder]
        elif op == 2:
            cmd = ["SEM.ACQUIRE", SEMS[0], holder, 2, ttl, "PERMITS", rng.randint(1, 2), *wait, "KEEP"]
        elif op == 3:
            cmd = ["SEM.RELEASE", SEMS[0], holder]
        elif op == 4:
            cmd = ["RWLOCK.ACQUIRE", RWS[0], holder, rng.choice(["READ", "WRITE"]), ttl, *wait, "KEEP"]
        elif op == 5:
            cmd = ["RWLOCK.RELEASE", RWS[0], holder, rng.choice(["READ", "WRITE"])]
        elif op == 6:
            cmd = ["LOCK.MACQUIRE", 2, *MULTI, holder, ttl, *wait, "KEEP"]
        elif op == 7:
            cmd = ["LOCK.EXTEND", k, holder, ttl, "KEEP", "MAILBOX", mb]
        elif op == 8 and waiting:
            key, r = waiting.pop(rng.randrange(len(waiting)))
            cmd = ["LOCK.CANCEL", key, holder, r]
        elif op == 9 and last:
            cmd = last[0]
        else:
            cmd = ["LOCK.MRELEASE", 2, *MULTI, holder]
        resend = op == 9 and last is not None
        if cmd[0] != "LOCK.CANCEL" and not resend:
            cmd = [*cmd, "ID", rid()]
        # The operator's acts begun and ended: a resend is compared only
        # when none was under way or came between.
        started = (stats["started"], stats["finished"])
        try:
            reply = c.execute_command(*cmd)
            stats["ok"] += 1
        except redis.TimeoutError:
            stats["hung"] += 1
            c, reply = connect(), None
        except redis.ConnectionError:
            stats["dropped"] += 1
            time.sleep(0.01)
            c, reply = connect(), None
        except redis.ResponseError as e:
            stats["errors"] += 1
            kinds, kind = stats.setdefault("kinds", {}), str(e).split(" ")[0]
            kinds[kind] = kinds.get(kind, 0) + 1
            reply = e
        if "ID" in cmd:
            r = cmd[cmd.index("ID") + 1]
            log.setdefault(r, []).append(("sent", cmd[0]))
            if reply is None:
                log.setdefault(r, []).append(("unknown", None))
            elif isinstance(reply, Exception):
                log.setdefault(r, []).append(("error", str(reply)))
            else:
                log.setdefault(r, []).append(("reply", reply))
                if reply == b"WAITING":
                    waiting.append((cmd[1], r))
            now = (stats["started"], stats["finished"])
            if resend and last[1] is not None and reply is not None and started == last[2] == now \
                    and now[0] == now[1] and not stats["off"]:
                first = last[1]
                # A queued request may be granted meanwhile: its resend
                # answers the grant. Anything else answers as before.
                if first != b"WAITING" and not isinstance(first, Exception):
                    assert reply == first, f"resent {cmd}: {first!r}, then {reply!r}"
                    stats["resends_checked"] += 1
            last = (cmd, reply, started)
        if rng.random() < 0.02:
            # A process that restarts: its connection, bindings and queued
            # requests go at once.
            c.close()
            c = connect()
            waiting.clear()
        try:
            drain(c)
        except (redis.ResponseError, redis.ConnectionError):
            pass  # a mailbox moved or flushed away, a killed connection
    c.close()


def settings_act(defaults, stats, replica):
    """Sets a setting at a bound or back to its default, on the master and
    its replica, as an operator sets every node; `stats["off"]` names
    those not at their default (a shorter `id-memory-ms` or fewer
    remembered ids forget a request before its resend)."""
    def act(op, rng):
        name = rng.choice(sorted(SETTINGS))
        v = rng.choice(SETTINGS[name]) if rng.random() < 0.5 else defaults[name]
        op.config_set(f"padlock.{name}", v)
        replica.config_set(f"padlock.{name}", v)
        if str(v) == str(defaults[name]):
            stats["off"].discard(name)
        else:
            stats["off"].add(name)
    return act


def demote_act(op, rng):
    """A master made a replica of a master that is not there, then a
    master again: its blocked clients are answered `-UNBLOCKED`."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    dead = s.getsockname()[1]
    s.close()
    try:
        op.execute_command("REPLICAOF", "127.0.0.1", dead)
        time.sleep(rng.uniform(0.01, 0.1))
    finally:
        op.execute_command("REPLICAOF", "NO", "ONE")


def restart_act(server, replica, defaults, stats):
    """The master shut down (its AOF flushed, as `SHUTDOWN` does) and
    started again from it: every connection drops, queued requests go,
    bound leases come back without their bindings. It starts at its
    default settings, so the replica is set back to them too."""
    def act(op, rng):
        # (INFO's counters start again: those so far are kept.)
        before = op.info("padlock")
        for name in COUNTED:
            stats[name] += before[name]
        stats["restarting"] = True
        try:
            try:
                op.execute_command("SHUTDOWN", "NOSAVE")
            except redis.ConnectionError:
                pass
            server.proc.wait(15)
            server.start()
        finally:
            stats["restarting"] = False
        for name, v in defaults.items():
            replica.config_set(f"padlock.{name}", v)
        stats["off"].clear()
        stats["restarts"] += 1
    return act


def script_act(op, rng):
    k = rng.choice(LOCKS)
    op.eval("return redis.call('LOCK.ACQUIRE', KEYS[1], 'op', 100, 'BLOCK', 0)", 1, k)


def transaction_act(op, rng):
    p = op.pipeline(transaction=True)
    k = rng.choice(LOCKS)
    p.execute_command("LOCK.ACQUIRE", k, "op", 200, "BLOCK", 50)
    p.execute_command("LOCK.RELEASE", k, f"m{rng.randrange(4)}")
    p.execute_command("SEM.RELEASE", SEMS[0], f"m{rng.randrange(4)}")
    p.execute()


def locks(dbs, lasting=False):
    """The lock keys of `dbs` as `snapshot` reads them (type, `DUMP`,
    absolute expiry), and the remembered ids; `lasting`: only those whose
    lease outlives a reload."""
    keys, ids = snapshot(dbs)
    soon = int(time.time() * 1000) + 2000
    return {k: v for k, v in keys.items()
            if v[0].startswith(b"pdlk-") and not (lasting and 0 <= v[2] < soon)}, ids


def test_chaos_of_holds(make_server):
    # With a replica: it must end in the master's state, whatever the
    # operator did to the master.
    server, replica, _, rep = start_pair(make_server, extra=[
        "--appendonly", "yes", "--maxmemory-policy", "allkeys-lru",
        "--aof-use-rdb-preamble", "no",
    ])
    r = server.client(socket_timeout=30)
    defaults = {k: r.config_get(f"padlock.{k}")[f"padlock.{k}"] for k in SETTINGS}
    stop = threading.Event()
    stats = {"ok": 0, "hung": 0, "dropped": 0, "errors": 0, "ops": 0, "op_errors": 0,
             "op_dropped": 0, "started": 0, "finished": 0, "resends_checked": 0,
             "off": set(), "failures": [], "restarts": 0, **{name: 0 for name in COUNTED}}
    ids, logs = {}, [{} for _ in range(4)]
    threads = [threading.Thread(target=holder_worker, args=(server, SEED + 300 + i, stop, stats, ids, i, logs[i]),
                                daemon=True) for i in range(4)]
    threads += [threading.Thread(target=worker, args=(server, SEED + 200 + i, stop, stats, ids, i), daemon=True)
                for i in range(4)]
    for t in threads:
        t.start()
    assert wait_for(lambda: len(ids) == len(threads))
    more = (settings_act(defaults, stats, rep), demote_act, script_act, transaction_act,
            restart_act(server, rep, defaults, stats))
    # No `DEBUG RELOAD`: a master that reloads drops the keys whose
    # expiry has passed without telling its replicas (Redis' own rule:
    # `RPUSH` and `PEXPIRE` lists part the same way), and the next append
    # to such a list then lands on the replica's stale copy. Mailboxes
    # expire after `mailbox-ttl-ms` (down to 50 ms here), so a replica
    # would keep elements its master dropped. (Restarts, which reload from
    # the AOF and resync the replica, stay in.)
    op = threading.Thread(target=operator, args=(server, random.Random(SEED), stop, stats, ids, more),
                          kwargs={"reload": False}, daemon=True)
    run(server, stop, op, threads, stats, SECONDS)
    assert stats["failures"] == []
    assert stats["hung"] == 0, stats
    assert stats["ok"] > 100 and stats["ops"] > 20, stats
    if r.info("replication")["role"] != "master":
        r.execute_command("REPLICAOF", "NO", "ONE")
    for name, v in defaults.items():
        r.config_set(f"padlock.{name}", v)
        rep.config_set(f"padlock.{name}", v)

    # Every connection closed: nothing waits, nothing is bound.
    info = lambda: r.info("padlock")  # noqa: E731
    assert wait_for(lambda: info()["padlock_blocked_clients"] == 0)
    assert wait_for(lambda: info()["padlock_mailbox_waiters"] == 0)
    assert wait_for(lambda: info()["padlock_wait_edges"] == 0)
    assert wait_for(lambda: info()["padlock_keep_bound"] == 0)
    assert r.execute_command("LOCK.GRAPH") == []
    assert kept_without_binding(r, dbs=DBS) == []

    # What the mailboxes said, request by request. (A grant's element may
    # be flushed away before it is read, and the loss of that hold then
    # posted; a swap moves a mailbox away and back: so a loss need not
    # follow a grant as read.)
    outcomes = 0
    for log in logs:
        for rid, events in log.items():
            posts = [e[1] for e in events if e[0] == "post"]
            lost = [p for p in posts if p.startswith(b"-LOST")]
            ends = [p for p in posts if not p.startswith(b"-LOST")]
            outcomes += len(ends)
            assert len(ends) <= 1, f"{rid}: two outcomes {events}"
            # One loss per hold; a multi-key hold tells each key's.
            keys = 2 if ("sent", "LOCK.MACQUIRE") in events else 1
            assert len(lost) <= keys, f"{rid}: lost twice {events}"
            # (A refused request changed nothing, so its resend may run
            # anew and be granted.)
            answers = [e[1] for e in events if e[0] in ("reply", "unknown")]
            if posts:
                assert answers, f"{rid}: refused, yet posted {events}"
            if ends:
                assert b"WAITING" in answers or None in answers, f"{rid}: posted, never queued {events}"
    now = info()
    posts, replays = (stats[name] + now[name] for name in COUNTED)
    losses = sum(p.startswith(b"-LOST") for log in logs for e in log.values() for _, p in e if _ == "post")
    print(f"chaos of holds: {outcomes} outcomes posted, {losses} losses told, "
          f"{stats['resends_checked']} resends checked, {replays} replays, {stats['restarts']} restarts")
    assert posts > 0 and replays > 0

    # The replica holds the master's keys, locks and mailboxes, to the
    # byte and the expiry.
    assert replica.alive(), replica.tail()
    assert wait_for(lambda: rep.info("replication")["master_link_status"] == "up", timeout=30)
    ms = [server.client(db=db) for db in DBS]
    reps = [replica.client(db=db) for db in DBS]

    def same():
        assert r.wait(1, 5000) == 1, "the replica did not acknowledge"
        return snapshot(ms) == snapshot(reps)
    assert wait_for(same, timeout=10), f"master {snapshot(ms)}\nreplica {snapshot(reps)}"

    # It all reloads as it was.
    before, _ = locks(ms, lasting=True)
    assert r.execute_command("DEBUG", "RELOAD") == b"OK"
    after, _ = locks(ms)
    assert {k: after.get(k) for k in before} == before
    assert r.execute_command("LOCK.ACQUIRE", "after", "me", 1000) > 0
