"""Fuzz on a fixed seed (`PADLOCK_FUZZ_SEED`, default 2026): random padlock
commands with random arguments and byte strings against a live server.
The server must never crash, and a command answered with an error must
leave every key as it was (only the leases' own expiry may change things
meanwhile). `make test` runs it for a
few seconds per server; `PADLOCK_FUZZ_SECONDS` makes it longer (`make
torture` does)."""

import os
import random
import time

import redis

from conftest import wait_for
from harness import FAR_PTTL, kept_without_binding

SECONDS = float(os.environ.get("PADLOCK_FUZZ_SECONDS", "3"))
#: Another seed explores other paths (a long `make torture` run may use
#: several); the default is what `make test` always runs.
SEED = int(os.environ.get("PADLOCK_FUZZ_SEED", "2026"))
KEYS = [b"k0", b"k1", b"k2", b"{t}k3"]
COMMANDS = [
    "LOCK.ACQUIRE", "LOCK.REENTER", "LOCK.RELEASE", "LOCK.EXTEND", "LOCK.INFO",
    "LOCK.MACQUIRE", "LOCK.MRELEASE", "LOCK.WAITFOR", "LOCK.GRAPH",
    "SEM.ACQUIRE", "SEM.RELEASE", "SEM.EXTEND", "SEM.INFO",
    "RWLOCK.ACQUIRE", "RWLOCK.RELEASE", "RWLOCK.EXTEND", "RWLOCK.INFO",
    "PADLOCK.LOCKSET", "PADLOCK.SEMSET", "PADLOCK.RWSET", "LOCK.CANCEL",
]
TOKENS = [b"BLOCK", b"PERMITS", b"KEEP", b"READ", b"WRITE", b"read", b"keep", b"NOPE", b"",
          b"MAILBOX", b"ID", b"id", b"mailbox"]
#: Mailboxes: outside KEYS, since a queued request's outcome is posted
#: between commands (its timeout, a grant on a lease's end).
MAILBOXES = [b"mb", b"{t}mb"]
#: Few request-ids, so that resends and reuses for other requests come up.
RIDS = [b"r1", b"r2", b"r3"]
#: Settings an operator may change under live holds and queues (each at
#: its bounds and its default): what was accepted under one must still
#: save, load and be given back under another.
SETTINGS = {
    "max-ttl-ms": [100, 60000, 86400000],
    "max-holder-len": [1, 2, 512, 65536],
    "max-waiters-per-key": [1, 2, 10000],
    "max-waiters": [1, 3, 100000],
    "max-wait-edges": [1, 2, 100000],
    "keep-max-idle-ms": [0, 20, 5000],
    "keep-min-interval-ms": [1, 100, 1000],
    "id-memory-ms": [1, 50, 60000],
    "max-ids-per-holder": [1, 2, 16],
    "max-remembered-ids": [0, 1, 5, 100000],
    "mailbox-ttl-ms": [1, 100, 60000],
}


def value(rng):
    kind = rng.randrange(9)
    if kind == 0:
        return rng.choice(KEYS)
    if kind == 1:
        return rng.choice([b"h1", b"h2", b"h3"])
    if kind == 2:
        return str(rng.choice([0, 1, 2, 3, 5, 100, 60000, -1, 2**31, 2**53, 2**63 - 1])).encode()
    if kind == 3:
        return str(rng.randrange(-10, 100000)).encode()
    if kind == 4:
        return rng.choice([b"9" * 30, b"1.5", b"+5", b" 7", b"0x10", b"-", b"", b"1e3"])
    if kind == 5:
        return rng.choice(TOKENS)
    if kind == 6:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(0, 12)))
    if kind == 7:
        return b"x" * rng.choice([511, 512, 513, 70000])
    return rng.choice([b"\r\n", b"\x00", b"h\x00\r\n"])


def shaped(rng):
    """A well-formed command (one argument sometimes spoiled), so that
    state builds up and the deeper paths run too."""
    k, h = rng.choice(KEYS), rng.choice([b"h1", b"h2", b"h3"])
    ttl = str(rng.choice([50, 500, 60000])).encode()
    mode = rng.choice([b"READ", b"WRITE"])
    mb = rng.choice(MAILBOXES) if rng.random() < 0.9 else k  # a lock's key: WRONGTYPE
    wait = [b"BLOCK", rng.choice([b"5", b"50"]), b"MAILBOX", mb]
    # Half the waits through a mailbox: they outlive their command.
    options = [[], [b"KEEP"], [b"BLOCK", b"5"], wait, wait, [*wait, b"KEEP"], [*wait, b"KEEP"]]
    keep_mb = rng.choice([[], [b"KEEP"], [b"KEEP", b"MAILBOX", mb]])
    name, args = rng.choice([
        ("LOCK.ACQUIRE", [k, h, ttl, *rng.choice(options)]),
        ("LOCK.RELEASE", [k, h]),
        ("LOCK.EXTEND", [k, h, ttl, *keep_mb]),
        ("LOCK.REENTER", [k, h, ttl]),
        ("SEM.ACQUIRE", [k, h, b"3", ttl, b"PERMITS", rng.choice([b"1", b"2", b"4"]), *rng.choice(options)]),
        ("SEM.RELEASE", [k, h, *rng.choice([[], [b"PERMITS", b"1"]])]),
        ("SEM.EXTEND", [k, h, ttl, *keep_mb]),
        ("RWLOCK.ACQUIRE", [k, h, mode, ttl, *rng.choice(options)]),
        ("RWLOCK.RELEASE", [k, h, mode]),
        ("RWLOCK.EXTEND", [k, h, ttl, *keep_mb]),
        ("LOCK.MACQUIRE", [b"2", b"k0", b"k1", h, ttl, *rng.choice(options[:3])]),
        ("LOCK.MRELEASE", [b"2", b"k0", b"k1", h]),
        ("LOCK.WAITFOR", [k, h, ttl]),
        ("LOCK.CANCEL", [k, h, rng.choice(RIDS)]),
    ])
    # An id on most changing commands, as the client libraries send.
    if name not in ("LOCK.WAITFOR", "LOCK.CANCEL") and (b"MAILBOX" in args or rng.random() < 0.6):
        args += [b"ID", rng.choice(RIDS) if rng.random() < 0.3 else b"n%d" % rng.randrange(10**6)]
    if rng.random() < 0.5:
        args[rng.randrange(len(args))] = value(rng)
    return name, short_blocks(rng, args)


def command(rng):
    if rng.random() < 0.6:
        return shaped(rng)
    name = rng.choice(COMMANDS)
    args = [value(rng) for _ in range(rng.randrange(0, 9))]
    if rng.random() < 0.5 and args:
        args[0] = rng.choice(KEYS)  # aim at the keys that are watched
    if name in ("LOCK.MACQUIRE", "LOCK.MRELEASE") and rng.random() < 0.5:
        n = rng.randrange(1, 4)
        args = [str(n).encode(), *rng.sample(KEYS, n), *args]
    # Never wait long: a BLOCK gets a short timeout (or stays malformed).
    return name, short_blocks(rng, args)


def short_blocks(rng, args):
    for i, a in enumerate(args[:-1]):
        if a.upper() == b"BLOCK":
            args[i + 1] = str(rng.randrange(1, 20)).encode()
    return args


def view(r, key):
    """The key as its *.INFO shows it, without the ticking ttl; and the
    shortest lease left (a change by expiry is no error's doing)."""
    t = r.type(key)
    if t == b"none":
        return None, None
    info = {
        b"pdlk-lock": "LOCK.INFO", b"pdlk-sema": "SEM.INFO", b"pdlk-rwlk": "RWLOCK.INFO",
    }.get(t)
    if info is None:
        return (t, r.dump(key)), None
    raw = r.execute_command(info, key)
    if raw is None:
        return (t, None), 0
    d = {raw[i]: raw[i + 1] for i in range(0, len(raw), 2)}
    pttl = r.pttl(key)
    if t == b"pdlk-lock":
        return (t, d[b"holder"], d[b"count"], d[b"fence"]), pttl
    holders = d[b"holders"]
    hs = {holders[i]: tuple(holders[i + 1][:-1]) for i in range(0, len(holders), 2)}
    least = min([holders[i + 1][-1] for i in range(0, len(holders), 2)] + [pttl])
    return (t, tuple(sorted(hs.items()))), least


def test_fuzz(server):
    print(f"fuzz: seed {SEED}")  # to run a failure again: PADLOCK_FUZZ_SEED
    rng = random.Random(SEED)
    r = server.client(socket_timeout=10)
    fuzz = server.client(socket_timeout=10)
    # A key of another type among them, for WRONGTYPE paths.
    r.set(b"{t}k3", b"plain")
    deadline = time.time() + SECONDS
    n = errors = checked = restored = 0
    last = None
    settings = 0
    defaults = {k: r.config_get(f"padlock.{k}")[f"padlock.{k}"] for k in SETTINGS}
    while time.time() < deadline:
        if rng.random() < 0.02:
            # Half the time one goes back to its default: the others'
            # extremes still refuse much.
            name = rng.choice(sorted(SETTINGS))
            v = rng.choice(SETTINGS[name]) if rng.random() < 0.5 else defaults[name]
            r.config_set(f"padlock.{name}", v)
            settings += 1
        # Now and then the last command again, as a client resends it.
        name, args = last if last and rng.random() < 0.1 else command(rng)
        last = (name, args)
        # A queued MAILBOX request may be granted between two commands
        # (a lease that ran out): then a key may change under any command.
        queued = r.info("padlock")["padlock_mailbox_waiters"]
        before = {k: view(r, k) for k in KEYS}
        try:
            fuzz.execute_command(name, *args)
            failed = False
        except redis.ResponseError:
            failed = True
        except redis.ConnectionError:
            assert server.alive(), server.tail()
            fuzz = server.client(socket_timeout=10)
            failed = False
        n += 1
        if failed:
            errors += 1
            for k in KEYS if not queued else []:
                (was, least) = before[k]
                if least is not None and least < 2000:
                    continue  # a lease may have run out meanwhile
                now, _ = view(r, k)
                assert now == was, f"{name} {args!r} failed yet changed {k!r}: {was} -> {now}"
                checked += 1
        if n % 200 == 0:
            assert server.alive(), server.tail()
        if n % 300 == 0:
            restored += loadable(r)
            # The KEEP invariant: a lease held far away has a binding.
            assert kept_without_binding(r, dbs=[0]) == []
    # The end's checks under the settings' defaults (replays and posts
    # counted, leases let go), after a reload under the fuzz's last ones.
    reloads_to_the_same_state(r)
    for name, v in defaults.items():
        r.config_set(f"padlock.{name}", v)
    stats = r.info("padlock")
    print(f"fuzz: {n} commands ({settings} settings changed), {errors} errors, "
          f"{checked} key checks after errors, "
          f"{restored} values DUMPed and RESTOREd, {stats['padlock_mailbox_posts']} posts, "
          f"{stats['padlock_requests_replayed']} replays, {stats['padlock_cancelled']} cancelled")
    assert server.alive() and r.ping()
    assert n > 100 and errors > 10
    # The newer paths ran too: ids replayed, and outcomes mailed.
    assert stats["padlock_requests_replayed"] > 0 and stats["padlock_mailbox_posts"] > 0
    # Its connection closed, nothing it bound is held far away any more.
    fuzz.close()
    far = lambda: [k for k in KEYS if r.pttl(k) > FAR_PTTL]  # noqa: E731
    assert wait_for(lambda: not far(), timeout=3), far()
    # And every request it queued left with it.
    assert wait_for(lambda: r.info("padlock")["padlock_mailbox_waiters"] == 0, timeout=3)
    assert r.info("padlock")["padlock_blocked_clients"] == 0
    reloads_to_the_same_state(r)


def steady(r):
    """Each key's view, for keys whose leases do not end within a second."""
    out = {}
    for k in KEYS:
        v, least = view(r, k)
        if least is None or least > 1000 or least == -1:
            out[k] = v
    return out


def loadable(r):
    """Accepted means loadable: every value DUMPs and RESTOREs into a
    scratch key with the same view."""
    n = 0
    for k, v in steady(r).items():
        if v is None:
            continue
        r.restore(b"{t}scratch", 0, r.dump(k), replace=True)
        copy, _ = view(r, b"{t}scratch")
        assert copy == v, f"{k!r}: {v} restored as {copy}"
        r.delete(b"{t}scratch")
        n += 1
    return n


def reloads_to_the_same_state(r):
    before, fence = steady(r), r.info("padlock")["padlock_last_fence"]
    assert r.execute_command("DEBUG", "RELOAD") == b"OK"
    # Each key steady before is looked at as it is now (filtering again by
    # lease left would drop a key whose lease crossed the line meanwhile).
    after = {k: view(r, k)[0] for k in before}
    assert after == before
    assert r.info("padlock")["padlock_last_fence"] == fence
    # (Within every max-ttl-ms and max-holder-len the fuzz sets.)
    assert r.execute_command("LOCK.ACQUIRE", b"{t}after", b"h", 100) > fence
    assert r.execute_command("LOCK.RELEASE", b"{t}after", b"h") == 0


def effect_value(rng, now):
    return str(rng.choice([
        0, 1, 2, 3, 5, 2**31 - 1, 2**31, 2**53 - 1, 2**53, 2**63 - 1, -1, now + 60000,
        now + 600000, 2**53 + 1, "0100", "x", "",
    ])).encode()


def test_fuzz_effects_as_the_aof_sends_them(make_server):
    """State commands the way the master link or the AOF would send them,
    with random and extreme arguments: whatever the server accepts, it can
    save, load, DUMP and RESTORE again, and its fences stay below 2^53."""
    from test_state_commands import aof_server
    rng = random.Random(SEED + 1)
    now = int(time.time() * 1000)
    cmds = []
    for _ in range(600):
        name = rng.choice(["PADLOCK.LOCKSET", "PADLOCK.SEMSET", "PADLOCK.RWSET"])
        arity = 7 if name == "PADLOCK.RWSET" else 6
        args = [rng.choice(KEYS[:3]), rng.choice([b"h1", b"h2", b"h3", b"", b"x" * 600])]
        # (Arity is the server's to check: some refuse to load such an AOF.)
        args += [effect_value(rng, now) for _ in range(arity - 3)]
        if rng.random() < 0.3:
            # A request-id riding on the effect, well formed or not.
            # Its forms: one packed word (what padlock sends), `ID` and
            # that word (until 2026-12-07), `ID`, a prefix and the id (the
            # builds of 2026-12-07).
            packed = [
                b"%d:%d:fence:r%d" % (now, rng.randrange(2**64), rng.randrange(9)),
                b"%d:1:holds:a:b:c" % now, b"%d:1:count:" % now, b"1:2:nope:x",
                b"x:1:one:r", b"%d:1:one:" % now + b"y" * 65, b"", b"::::", b"ID",
            ]
            form = rng.random()
            if form < 0.3:
                args += [rng.choice(packed)]
            elif form < 0.65:
                args += [b"ID", rng.choice([
                    b"%d:%d:fence:r%d" % (now, rng.randrange(2**64), rng.randrange(9)),
                    b"%d:1:holds:a:b:c" % now, b"%d:1:count:" % now, b"1:2:nope:x",
                    b"x:1:one:r", b"%d:1:one:" % now + b"y" * 65, b"", b"::::",
                ])]
            else:
                args += [b"ID", rng.choice([
                    b"%d:%d:fence" % (now, rng.randrange(2**64)), b"%d:1:holds" % now,
                    b"%d:1:count" % now, b"1:2:nope", b"x:1:one", b"", b"::", b"1:2:one:x",
                ]), rng.choice([b"r%d" % rng.randrange(9), b"a:b:c", b"", b"y" * 65, b"ID"])]
        cmds.append([name, *args])
        if rng.random() < 0.2:
            # A mailbox post and a request-id on its own, as a master sends
            # them for a queued request's outcome and a multi-key request.
            cmds.append(["PADLOCK.POST", rng.choice(MAILBOXES + KEYS[:1]), effect_value(rng, now),
                         rng.choice([b"r1 5", b"r2 nil", b"r3 -LOST removed", b"", b"x" * 600])])
            cmds.append(["PADLOCK.REQUESTID", rng.choice(KEYS[:3]), rng.choice([b"h1", b"h2", b""]),
                         rng.choice(RIDS + [b"", b"y" * 65]), effect_value(rng, now), effect_value(rng, now),
                         rng.choice([b"I", b"A", b"F", b"i"]),
                         *[effect_value(rng, now) for _ in range(rng.randrange(1, 4))]])
    # A post's expiry is absolute and the next post to the list moves it:
    # one well formed last, so a mailbox's survival does not hang on
    # which random post came last.
    cmds.append(["PADLOCK.POST", MAILBOXES[0], now + 600000, b"r1 5"])
    # And so for a lock with an id riding, on a key no random effect
    # names: on some seeds every key's last random effect freed it or gave
    # it a lease long past, and no well formed id rode in.
    cmds.append(["PADLOCK.LOCKSET", KEYS[3], b"h1", 1, 7, now + 600000, b"%d:1:fence:r1" % now])
    srv, _ = aof_server(make_server, cmds)
    r = srv.client()
    assert r.dbsize() > 0, "some effects were accepted"
    assert r.info("padlock")["padlock_request_ids"] > 0, "some request-ids rode in"
    assert any(r.type(m) == b"list" for m in MAILBOXES), "some posts were accepted"
    assert loadable(r) >= 1
    fence = r.info("padlock")["padlock_last_fence"]
    assert 0 <= fence < 2**53
    if fence < 2**53 - 1:  # at the bound no new fence can be drawn
        reloads_to_the_same_state(r)
    before = steady(r)
    srv.restart()
    r = srv.client()
    after = steady(r)
    assert {k: after.get(k) for k in before} == {k: v for k, v in before.items()}
