"""docs/commands.md, Retries (ID) — a changing command resent with the same key(s),
holder and request-id answers its first reply and changes nothing: while
held, for id-memory-ms after the request that freed the key, on replicas,
after a promotion and after restarts; a BLOCK request granted after its
client stopped waiting answers its fence; a resend while it still waits
takes its place; the same id with other arguments is an error; a pipeline
resent whole ends where the first sending left it; memory is bounded."""

import socket
import time

import pytest
import redis

from conftest import wait_blocked, wait_for
from test_durability import start_pair
from test_state_commands import resp


def info(r, cmd, key):
    raw = r.execute_command(cmd, key)
    return None if raw is None else dict(zip(raw[::2], raw[1::2]))


def events(r, key):
    """A pubsub that counts keyspace events on `key`."""
    r.config_set("notify-keyspace-events", "KEA")
    p = r.pubsub()
    p.psubscribe(f"__keyspace@0__:{key}")
    p.get_message(timeout=1)
    return p


def drain(p):
    seen = []
    while (m := p.get_message(timeout=0.2)) is not None:
        if m["type"] == "pmessage":
            seen.append(m["data"])
    return seen


# (setup commands, the command resent, the INFO command) for each kind.
CASES = {
    "lock.acquire": ([], ["LOCK.ACQUIRE", "k", "h", 60000], "LOCK.INFO"),
    "lock.reacquire": ([["LOCK.ACQUIRE", "k", "h", 60000]], ["LOCK.ACQUIRE", "k", "h", 60000], "LOCK.INFO"),
    "lock.reenter": ([["LOCK.ACQUIRE", "k", "h", 60000]], ["LOCK.REENTER", "k", "h", 60000], "LOCK.INFO"),
    "lock.extend": ([["LOCK.ACQUIRE", "k", "h", 60000]], ["LOCK.EXTEND", "k", "h", 90000], "LOCK.INFO"),
    "lock.release": ([["LOCK.ACQUIRE", "k", "h", 60000]] * 2, ["LOCK.RELEASE", "k", "h"], "LOCK.INFO"),
    "sem.acquire": ([], ["SEM.ACQUIRE", "k", "h", 5, 60000, "PERMITS", 1], "SEM.INFO"),
    "sem.extend": ([["SEM.ACQUIRE", "k", "h", 5, 60000]], ["SEM.EXTEND", "k", "h", 90000], "SEM.INFO"),
    "sem.release": ([["SEM.ACQUIRE", "k", "h", 5, 60000, "PERMITS", 3]], ["SEM.RELEASE", "k", "h", "PERMITS", 1], "SEM.INFO"),
    "rwlock.acquire": ([], ["RWLOCK.ACQUIRE", "k", "h", "READ", 60000], "RWLOCK.INFO"),
    "rwlock.extend": ([["RWLOCK.ACQUIRE", "k", "h", "READ", 60000]], ["RWLOCK.EXTEND", "k", "h", 90000], "RWLOCK.INFO"),
    "rwlock.release": ([["RWLOCK.ACQUIRE", "k", "h", "READ", 60000]] * 2, ["RWLOCK.RELEASE", "k", "h", "READ"], "RWLOCK.INFO"),
    "lock.macquire": ([], ["LOCK.MACQUIRE", 2, "k", "k2", "h", 60000], "LOCK.INFO"),
    "lock.mrelease": ([["LOCK.MACQUIRE", 2, "k", "k2", "h", 60000]] * 2, ["LOCK.MRELEASE", 2, "k", "k2", "h"], "LOCK.INFO"),
}


def without_ttl(i):
    """INFO without the lease left (which runs down), per key and per holder."""
    out = {k: v for k, v in (i or {}).items() if k != b"ttl"}
    if b"holders" in out:
        out[b"holders"] = [h[:-1] if isinstance(h, list) else h for h in out[b"holders"]]
    return out


@pytest.mark.parametrize("case", sorted(CASES))
def test_resend_answers_the_first_reply_and_changes_nothing(r, case):
    setup, cmd, info_cmd = CASES[case]
    for c in setup:
        r.execute_command(*c)
    first = r.execute_command(*cmd, "ID", "req-1")
    assert first is not None
    state = without_ttl(info(r, info_cmd, "k"))
    ttl = r.pttl("k")
    p = events(r, "k")
    time.sleep(0.05)
    for _ in range(3):
        assert r.execute_command(*cmd, "ID", "req-1") == first
    assert without_ttl(info(r, info_cmd, "k")) == state
    # No lease reset: the lease only went down.
    assert r.pttl("k") <= ttl
    assert drain(p) == []
    assert r.info("padlock")["padlock_requests_replayed"] == 3
    # A new id is a new request.
    if case in ("lock.acquire", "lock.reacquire", "lock.reenter"):
        r.execute_command(*cmd, "ID", "req-2")
        assert info(r, info_cmd, "k")[b"count"] == state[b"count"] + 1


def test_without_id_a_resend_applies_twice(r):
    r.execute_command("LOCK.ACQUIRE", "k", "h", 60000)
    r.execute_command("LOCK.ACQUIRE", "k", "h", 60000)
    assert info(r, "LOCK.INFO", "k")[b"count"] == 2


def test_a_resent_final_release_answers_0_and_leaves_the_next_holder(r):
    r.execute_command("LOCK.ACQUIRE", "k", "h", 60000, "ID", "a")
    assert r.execute_command("LOCK.RELEASE", "k", "h", "ID", "b") == 0
    fence = r.execute_command("LOCK.ACQUIRE", "k", "other", 60000)
    assert r.execute_command("LOCK.RELEASE", "k", "h", "ID", "b") == 0
    got = info(r, "LOCK.INFO", "k")
    assert (got[b"holder"], got[b"fence"], got[b"count"]) == (b"other", fence, 1)
    # And the resent acquire does not take the lock again.
    r.execute_command("LOCK.RELEASE", "k", "other")
    r.execute_command("LOCK.ACQUIRE", "k", "h", 60000, "ID", "a")
    assert not r.exists("k")


def test_a_resend_spelled_in_another_case_is_the_same_request(r):
    """Command names are case-insensitive, so a resend's spelling (a
    driver that lower-cases them, another that does not) is the same
    request, and the id's print does not change with it."""
    first = r.execute_command("LOCK.ACQUIRE", "k", "h", 60000, "ID", "a")
    assert r.execute_command("lock.acquire", "k", "h", 60000, "ID", "a") == first
    assert r.execute_command("Lock.Acquire", "k", "h", 60000, "ID", "a") == first
    assert info(r, "LOCK.INFO", "k")[b"count"] == 1
    assert r.execute_command("lock.release", "k", "h", "ID", "b") == 0
    assert r.execute_command("LOCK.RELEASE", "k", "h", "ID", "b") == 0


def test_the_same_id_with_other_arguments_is_an_error(r):
    r.execute_command("LOCK.ACQUIRE", "k", "h", 60000, "ID", "a")
    for other in (["LOCK.ACQUIRE", "k", "h", 5000], ["LOCK.ACQUIRE", "k", "h", 60000, "KEEP"],
                  ["LOCK.EXTEND", "k", "h", 60000], ["LOCK.RELEASE", "k", "h"]):
        with pytest.raises(redis.ResponseError, match="request-id 'a' was used for another request"):
            r.execute_command(*other, "ID", "a")
    assert info(r, "LOCK.INFO", "k")[b"count"] == 1
    r.execute_command("SEM.ACQUIRE", "s", "h", 5, 1000, "PERMITS", 1, "ID", "p")
    with pytest.raises(redis.ResponseError, match="another request"):
        r.execute_command("SEM.ACQUIRE", "s", "h", 5, 1000, "PERMITS", 2, "ID", "p")
    r.execute_command("RWLOCK.ACQUIRE", "rw", "h", "READ", 1000, "ID", "m")
    with pytest.raises(redis.ResponseError, match="another request"):
        r.execute_command("RWLOCK.ACQUIRE", "rw", "h", "WRITE", 1000, "ID", "m")


def test_bad_ids_are_refused_and_id_is_only_an_option(r):
    with pytest.raises(redis.ResponseError, match="syntax error"):
        r.execute_command("LOCK.ACQUIRE", "k", "h", 1000, "ID")
    with pytest.raises(redis.ResponseError, match="request-id must be 1 to 64 bytes"):
        r.execute_command("LOCK.ACQUIRE", "k", "h", 1000, "ID", "")
    with pytest.raises(redis.ResponseError, match="request-id must be 1 to 64 bytes"):
        r.execute_command("LOCK.ACQUIRE", "k", "h", 1000, "ID", "x" * 65)
    assert not r.exists("k")
    # A holder or key named ID is not the option.
    assert r.execute_command("LOCK.ACQUIRE", "ID", "ID", 1000, "ID", "x" * 64) > 0
    assert r.execute_command("LOCK.ACQUIRE", "ID", "ID", 1000, "ID", "x" * 64) > 0
    assert info(r, "LOCK.INFO", "ID")[b"count"] == 1
    # Options in any order, ID among them.
    r.execute_command("SEM.ACQUIRE", "s", "h", 5, 1000, "ID", "q", "PERMITS", 2, "KEEP")
    r.execute_command("SEM.ACQUIRE", "s", "h", 5, 1000, "ID", "q", "PERMITS", 2, "KEEP")
    assert info(r, "SEM.INFO", "s")[b"used"] == 2


def test_a_pipeline_resent_whole_ends_where_the_first_sending_left(r):
    def send():
        p = r.pipeline(transaction=False)
        p.execute_command("LOCK.ACQUIRE", "k", "h", 60000, "ID", "a")
        p.execute_command("LOCK.RELEASE", "k", "h", "ID", "b")
        p.execute_command("LOCK.ACQUIRE", "k", "h", 60000, "ID", "c")
        p.execute_command("SEM.ACQUIRE", "s", "h", 2, 60000, "ID", "d")
        p.execute_command("SEM.RELEASE", "s", "h", "ID", "e")
        return p.execute()

    first = send()
    state = (without_ttl(info(r, "LOCK.INFO", "k")), r.exists("s"))
    assert first[1] == 0 and first[4] == 0 and first[0] != first[2]
    assert send() == first
    assert (without_ttl(info(r, "LOCK.INFO", "k")), r.exists("s")) == state
    assert state[1] == 0 and state[0][b"count"] == 1


def raw_conn(port):
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(5)
    return s


def test_a_block_request_granted_after_its_client_gave_up_answers_its_fence(r, server):
    r.execute_command("LOCK.ACQUIRE", "k", "owner", 60000)
    gave_up = raw_conn(server.port)
    gave_up.sendall(resp("LOCK.ACQUIRE", "k", "w", 60000, "BLOCK", 30000, "ID", "z"))
    wait_blocked(r, 1)
    r.execute_command("LOCK.RELEASE", "k", "owner")
    assert wait_for(lambda: info(r, "LOCK.INFO", "k")[b"holder"] == b"w")
    fence = info(r, "LOCK.INFO", "k")[b"fence"]
    # The reply sits unread on the first connection; a resend on another
    # learns that it holds, without a second reentry.
    other = server.client()
    assert other.execute_command("LOCK.ACQUIRE", "k", "w", 60000, "BLOCK", 1000, "ID", "z") == fence
    assert info(r, "LOCK.INFO", "k")[b"count"] == 1
    gave_up.close()


def test_a_resend_while_queued_takes_its_place(r, server, bg):
    r.execute_command("LOCK.ACQUIRE", "k", "owner", 60000)
    first = bg("LOCK.ACQUIRE", "k", "w", 60000, "BLOCK", 0, "ID", "z")
    wait_blocked(r, 1)
    behind = bg("LOCK.ACQUIRE", "k", "x", 60000, "BLOCK", 0)
    wait_blocked(r, 2)
    resent = bg("LOCK.ACQUIRE", "k", "w", 60000, "BLOCK", 20000, "ID", "z")
    # The older sending is answered nil; the resend waits in its place.
    assert first.result() is None
    assert blocked(r) == 2
    r.execute_command("LOCK.RELEASE", "k", "owner")
    fence = resent.result()
    assert info(r, "LOCK.INFO", "k")[b"holder"] == b"w" and fence == info(r, "LOCK.INFO", "k")[b"fence"]
    assert not behind.done()
    r.execute_command("LOCK.RELEASE", "k", "w")
    assert behind.result() > fence


def blocked(r):
    return r.info("padlock")["padlock_blocked_clients"]


def test_max_remembered_ids_forgets_the_oldest_freed_first(r):
    r.config_set("padlock.max-remembered-ids", 4)
    for i in range(6):
        r.execute_command("LOCK.ACQUIRE", f"k{i}", "h", 60000)
        assert r.execute_command("LOCK.RELEASE", f"k{i}", "h", "ID", f"r{i}") == 0
    assert r.info("padlock")["padlock_request_ids"] <= 4
    with pytest.raises(redis.ResponseError, match="NOTHELD"):
        r.execute_command("LOCK.RELEASE", "k0", "h", "ID", "r0")
    assert r.execute_command("LOCK.RELEASE", "k5", "h", "ID", "r5") == 0
    # Held keys do not count against it: their ids stay.
    r.execute_command("LOCK.ACQUIRE", "held", "h", 60000, "ID", "keep-me")
    for i in range(6, 12):
        r.execute_command("LOCK.ACQUIRE", f"k{i}", "h", 60000)
        r.execute_command("LOCK.RELEASE", f"k{i}", "h", "ID", f"r{i}")
    r.execute_command("LOCK.ACQUIRE", "held", "h", 60000, "ID", "keep-me")
    assert info(r, "LOCK.INFO", "held")[b"count"] == 1


def test_max_remembered_ids_bounds_the_freed_past_many_held(r):
    # More held ids than the bound: the freed keys' ids are still kept
    # within it (the oldest freed go), and no held one is forgotten.
    r.config_set("padlock.max-remembered-ids", 2)
    for i in range(6):
        r.execute_command("LOCK.ACQUIRE", f"held{i}", "h", 60000, "ID", f"a{i}")
    for i in range(3):
        r.execute_command("LOCK.ACQUIRE", f"k{i}", "h", 60000)
        assert r.execute_command("LOCK.RELEASE", f"k{i}", "h", "ID", f"r{i}") == 0
    assert r.info("padlock")["padlock_request_ids"] == 6 + 2
    with pytest.raises(redis.ResponseError, match="NOTHELD"):
        r.execute_command("LOCK.RELEASE", "k0", "h", "ID", "r0")
    assert r.execute_command("LOCK.RELEASE", "k2", "h", "ID", "r2") == 0
    for i in range(6):
        r.execute_command("LOCK.ACQUIRE", f"held{i}", "h", 60000, "ID", f"a{i}")
        assert info(r, "LOCK.INFO", f"held{i}")[b"count"] == 1


def test_max_ids_per_holder_keeps_the_newest(r):
    r.config_set("padlock.max-ids-per-holder", 2)
    for i in range(3):
        r.execute_command("LOCK.ACQUIRE", "k", "h", 60000, "ID", f"a{i}")
    assert info(r, "LOCK.INFO", "k")[b"count"] == 3
    r.execute_command("LOCK.ACQUIRE", "k", "h", 60000, "ID", "a2")
    r.execute_command("LOCK.ACQUIRE", "k", "h", 60000, "ID", "a1")
    assert info(r, "LOCK.INFO", "k")[b"count"] == 3
    r.execute_command("LOCK.ACQUIRE", "k", "h", 60000, "ID", "a0")
    assert info(r, "LOCK.INFO", "k")[b"count"] == 4


def test_id_memory_ms_after_the_free_but_kept_while_held(r):
    r.config_set("padlock.id-memory-ms", 200)
    r.execute_command("LOCK.ACQUIRE", "held", "h", 60000, "ID", "a")
    r.execute_command("LOCK.ACQUIRE", "freed", "h", 60000)
    r.execute_command("LOCK.RELEASE", "freed", "h", "ID", "b")
    time.sleep(0.6)
    assert wait_for(lambda: r.info("padlock")["padlock_request_ids"] == 1)
    r.execute_command("LOCK.ACQUIRE", "held", "h", 60000, "ID", "a")
    assert info(r, "LOCK.INFO", "held")[b"count"] == 1
    with pytest.raises(redis.ResponseError, match="NOTHELD"):
        r.execute_command("LOCK.RELEASE", "freed", "h", "ID", "b")


def test_a_groups_latest_request_sets_when_it_is_forgotten(r):
    # The group of (freed, h) is first due 1 s after the acquire; its
    # release 0.7 s later moves that to 1.7 s. At 1.3 s the release's
    # resend still answers from memory; by 1.7 s and a bit all is gone.
    r.config_set("padlock.id-memory-ms", 1000)
    start = time.monotonic()
    r.execute_command("LOCK.ACQUIRE", "freed", "h", 60000, "ID", "a")
    time.sleep(0.7)
    assert r.execute_command("LOCK.RELEASE", "freed", "h", "ID", "b") == 0
    time.sleep(max(0.0, 1.3 - (time.monotonic() - start)))
    assert r.execute_command("LOCK.RELEASE", "freed", "h", "ID", "b") == 0
    assert r.info("padlock")["padlock_request_ids"] == 2
    assert wait_for(lambda: r.info("padlock")["padlock_request_ids"] == 0)
    assert time.monotonic() - start >= 1.7


def test_flush_forgets(r):
    r.execute_command("LOCK.ACQUIRE", "k", "h", 60000, "ID", "a")
    r.flushall()
    assert r.info("padlock")["padlock_request_ids"] == 0
    r.execute_command("LOCK.ACQUIRE", "k", "h", 60000, "ID", "a")
    assert r.exists("k")


def test_a_promoted_replica_answers_the_resend(make_server):
    master, replica, m, rep = start_pair(make_server)
    fence = m.execute_command("LOCK.ACQUIRE", "k", "h", 60000, "ID", "a")
    m.execute_command("LOCK.ACQUIRE", "k", "h", 60000, "ID", "b")
    assert m.execute_command("LOCK.RELEASE", "k", "h", "ID", "c") == 1
    granted = m.execute_command("SEM.ACQUIRE", "s", "h", 3, 60000, "PERMITS", 2, "ID", "d")
    assert m.wait(1, 2000) == 1
    rep.execute_command("REPLICAOF", "NO", "ONE")
    assert rep.execute_command("LOCK.ACQUIRE", "k", "h", 60000, "ID", "a") == fence
    assert rep.execute_command("LOCK.RELEASE", "k", "h", "ID", "c") == 1
    assert rep.execute_command("SEM.ACQUIRE", "s", "h", 3, 60000, "PERMITS", 2, "ID", "d") == granted
    assert info(rep, "LOCK.INFO", "k")[b"count"] == 1
    assert info(rep, "SEM.INFO", "s")[b"used"] == 2


@pytest.mark.parametrize("how", ["aof", "aof-no-preamble", "rdb", "debug-reload"])
def test_ids_survive_a_restart(make_server, how):
    extra = {
        "aof": ["--appendonly", "yes"],
        "aof-no-preamble": ["--appendonly", "yes", "--aof-use-rdb-preamble", "no"],
        "rdb": [],
        "debug-reload": ["--enable-debug-command", "yes"],
    }[how]
    s = make_server(extra=extra)
    r = s.client()
    fence = r.execute_command("LOCK.ACQUIRE", "k", "h", 60000, "ID", "a")
    r.execute_command("LOCK.ACQUIRE", "k", "h", 60000, "ID", "b")
    r.execute_command("LOCK.ACQUIRE", "f", "h", 60000)
    assert r.execute_command("LOCK.RELEASE", "f", "h", "ID", "c") == 0
    fences = r.execute_command("LOCK.MACQUIRE", 2, "x", "y", "h", 60000, "ID", "d")
    if how == "aof-no-preamble":
        r.bgrewriteaof()
        assert wait_for(lambda: r.info("persistence")["aof_rewrite_in_progress"] == 0)
        time.sleep(0.2)
    if how == "debug-reload":
        r.execute_command("DEBUG", "RELOAD")
    else:
        s.restart(save=how == "rdb")
        r = s.client()
    assert r.execute_command("LOCK.ACQUIRE", "k", "h", 60000, "ID", "a") == fence
    assert info(r, "LOCK.INFO", "k")[b"count"] == 2
    assert r.execute_command("LOCK.MACQUIRE", 2, "x", "y", "h", 60000, "ID", "d") == fences
    assert info(r, "LOCK.INFO", "x")[b"count"] == 1
    if how != "aof-no-preamble":
        # A freed key's ids are saved apart from the keys (the RDB, or the
        # AOF's own stream); a rewrite without a preamble keeps only those
        # of keys it writes.
        assert r.execute_command("LOCK.RELEASE", "f", "h", "ID", "c") == 0


def test_the_effect_is_for_replication_only(r):
    with pytest.raises(redis.ResponseError):
        r.execute_command("PADLOCK.REQUESTID", "k", "h", "a", 1, 1, "I", 5)
    r.execute_command("LOCK.ACQUIRE", "k", "h", 60000, "ID", "a")
    assert r.info("padlock")["padlock_request_ids"] == 1


def test_key_lookups_see_the_keys_not_the_id(r):
    from test_docs import raw
    assert raw(r, "COMMAND", "GETKEYS", "LOCK.MACQUIRE", 2, "a", "b", "h", 1000, "ID", "x") == [b"a", b"b"]
    assert raw(r, "COMMAND", "GETKEYS", "LOCK.MRELEASE", 1, "a", "h", "ID", "x") == [b"a"]
    assert raw(r, "COMMAND", "GETKEYS", "LOCK.ACQUIRE", "a", "h", 1000, "ID", "x") == [b"a"]


def test_the_id_rides_on_the_requests_own_effect(make_server):
    """One propagated command per single-key request: the effect carries
    the id, no MULTI; a release (final or inner) goes as itself, its id
    and all, which a replica or the AOF runs to the same state."""
    from test_state_commands import parse_commands, read_aof_incr
    s = make_server(extra=["--appendonly", "yes"])
    r = s.client()
    r.execute_command("LOCK.ACQUIRE", "k", "h", 60000, "ID", "a")
    r.execute_command("LOCK.ACQUIRE", "k", "h", 60000, "ID", "a2")
    r.execute_command("LOCK.RELEASE", "k", "h", "ID", "b2")
    r.execute_command("LOCK.RELEASE", "k", "h", "ID", "b")
    r.execute_command("SEM.ACQUIRE", "s", "h", 3, 60000, "PERMITS", 2, "ID", "c")
    r.execute_command("RWLOCK.ACQUIRE", "rw", "h", "READ", 60000, "ID", "d")
    r.execute_command("RWLOCK.RELEASE", "rw", "h", "READ", "ID", "e")
    def read():
        return [[a.lower() for a in c[:1]] + c[1:] for c in parse_commands(read_aof_incr(s.dir))]

    own = {b"padlock.lockset": 6, b"padlock.semset": 6, b"padlock.rwset": 7}

    def tail_of(c):  # one word after the effect's own: at-ms:print:rule:request-id
        return c[-1].split(b":", 3) if len(c) == own.get(c[0], 0) + 1 else None

    # (Valkey writes the AOF after the reply: wait for all of it.)
    assert wait_for(lambda: sum(bool(tail_of(c)) or c[-2:-1] == [b"ID"] for c in read()) >= 7)
    cmds = read()
    names = [c[0] for c in cmds if c[0] != b"select"]
    assert b"multi" not in names and b"padlock.requestid" not in names, names
    assert b"del" not in names, names
    tails = [t for t in map(tail_of, cmds) if t]
    assert [t[3] for t in tails] == [b"a", b"a2", b"c", b"d"]
    assert [t[2] for t in tails] == [b"fence", b"fence", b"permits", b"fence"]
    released = [c for c in cmds if c[0].endswith(b".release")]
    assert released == [[b"lock.release", b"k", b"h", b"ID", b"b2"], [b"lock.release", b"k", b"h", b"ID", b"b"],
                        [b"rwlock.release", b"rw", b"h", b"READ", b"ID", b"e"]]


KEPT_BASE = 1 << 52  # a bound lease's far deadline: 2^52 ms + its ttl


def test_a_kept_grant_is_one_effect_carrying_its_id(make_server):
    """A `KEEP` grant binds as it is written: one effect with the far
    deadline (no separate renewal), the id riding on it; a queued request
    granted later carries its id on the grant's own effect too (no
    PADLOCK.REQUESTID), and the mailbox post follows as one effect,
    PADLOCK.POST with the element and the list's absolute expiry."""
    from test_state_commands import parse_commands, read_aof_incr
    s = make_server(extra=["--appendonly", "yes"])
    r, r2 = s.client(), s.client()
    r.execute_command("LOCK.ACQUIRE", "k", "h", 60000, "KEEP", "ID", "a")
    r.execute_command("SEM.ACQUIRE", "s", "h", 3, 60000, "KEEP", "ID", "b")
    r.execute_command("RWLOCK.ACQUIRE", "rw", "h", "WRITE", 60000, "KEEP", "ID", "c")
    r.execute_command("LOCK.ACQUIRE", "q", "o", 60000)
    assert r2.execute_command("LOCK.ACQUIRE", "q", "w", 60000, "KEEP", "BLOCK", 10000,
                              "MAILBOX", "mb", "ID", "g") == b"WAITING"
    assert r.execute_command("LOCK.RELEASE", "q", "o") == 0
    fence = int(r.blpop("mb", 5)[1].split()[1])

    def read():
        return [[a.lower() for a in c[:1]] + c[1:] for c in parse_commands(read_aof_incr(s.dir))]

    assert wait_for(lambda: any(c[0] == b"padlock.post" and c[1] == b"mb" for c in read()))
    cmds = [c for c in read() if c[0] != b"select"]
    names = [c[0] for c in cmds]
    # (The release and the grant it makes are one MULTI: one atomic step.)
    assert b"padlock.requestid" not in names and names.count(b"multi") == 1, names
    for key, rid in ((b"k", b"a"), (b"s", b"b"), (b"rw", b"c"), (b"q", b"g")):
        mine = [c for c in cmds if len(c) > 1 and c[1] == key and c[0] != b"del"]
        if key == b"q":
            mine = [c for c in mine if c[2] == b"w"]
        assert len(mine) == 1, (key, mine)
        effect = mine[0]
        assert effect[-1].split(b":", 3)[3] == rid, effect  # at-ms:print:rule:request-id
        assert int(effect[-2]) >= KEPT_BASE, effect  # written far away at once
    # (The test's own BLPOP follows, as LPOP.)
    to_mb = [c for c in cmds if len(c) > 1 and c[1] == b"mb"]
    assert [c[0] for c in to_mb] == [b"padlock.post", b"lpop"], to_mb
    assert to_mb[0][3] == b"g %d" % fence
    assert abs(int(to_mb[0][2]) - (time.time() * 1000 + 60000)) < 5000  # mailbox-ttl-ms
    # The grant's remembered id answers its resend.
    assert r2.execute_command("LOCK.ACQUIRE", "q", "w", 60000, "KEEP", "BLOCK", 10000,
                              "MAILBOX", "mb", "ID", "g") == fence


def test_a_promoted_replica_answers_a_queued_grants_resend(make_server):
    master, replica, m, rep = start_pair(make_server)
    m2 = master.client()
    m.execute_command("LOCK.ACQUIRE", "q", "o", 60000)
    m.execute_command("SEM.ACQUIRE", "s", "o", 1, 60000)
    args = [60000, "KEEP", "BLOCK", 10000, "MAILBOX", "mb", "ID"]
    assert m2.execute_command("LOCK.ACQUIRE", "q", "w", *args, "g1") == b"WAITING"
    assert m2.execute_command("SEM.ACQUIRE", "s", "w", 1, *args, "g2") == b"WAITING"
    m.execute_command("LOCK.RELEASE", "q", "o")
    m.execute_command("SEM.RELEASE", "s", "o")
    posts = [m.blpop("mb", 5)[1].split() for _ in range(2)]
    assert m.wait(1, 2000) == 1
    rep.execute_command("REPLICAOF", "NO", "ONE")
    got = {p[0]: int(p[1]) for p in posts}
    assert rep.execute_command("LOCK.ACQUIRE", "q", "w", *args, "g1") == got[b"g1"]
    assert rep.execute_command("SEM.ACQUIRE", "s", "w", 1, *args, "g2") == got[b"g2"]
    assert info(rep, "LOCK.INFO", "q")[b"count"] == 1
    assert info(rep, "SEM.INFO", "s")[b"used"] == 1


def test_a_replicas_own_aof_keeps_the_ids(make_server):
    master, replica, m, rep = start_pair(make_server)
    replica.restart(extra=[*replica.extra, "--appendonly", "yes"])
    rep = replica.client()
    assert wait_for(lambda: rep.info("replication")["master_link_status"] == "up", timeout=30)
    fence = m.execute_command("LOCK.ACQUIRE", "k", "h", 60000, "ID", "a")
    assert m.execute_command("LOCK.RELEASE", "k", "h", "ID", "b") == 0
    permits = m.execute_command("SEM.ACQUIRE", "s", "h", 3, 60000, "PERMITS", 2, "ID", "c")
    assert m.wait(1, 2000) == 1
    master.stop()
    replica.restart()
    rep = replica.client()
    rep.execute_command("REPLICAOF", "NO", "ONE")
    assert rep.execute_command("LOCK.ACQUIRE", "k", "h", 60000, "ID", "a") == fence
    assert not rep.exists("k")
    assert rep.execute_command("LOCK.RELEASE", "k", "h", "ID", "b") == 0
    assert rep.execute_command("SEM.ACQUIRE", "s", "h", 3, 60000, "PERMITS", 2, "ID", "c") == permits
    assert info(rep, "SEM.INFO", "s")[b"used"] == 2


def test_ids_loaded_from_the_rdb_are_pruned_too(make_server):
    s = make_server(module_args=["id-memory-ms", "300"])
    r = s.client()
    r.execute_command("LOCK.ACQUIRE", "f", "h", 60000)
    r.execute_command("LOCK.RELEASE", "f", "h", "ID", "a")
    s.restart(save=True)
    r = s.client()
    assert r.info("padlock")["padlock_request_ids"] == 1
    # No request arrives: the load itself set the prune timer going.
    assert wait_for(lambda: r.info("padlock")["padlock_request_ids"] == 0, timeout=5)


def test_ids_of_keys_whose_lease_ran_out_are_bounded_too(r):
    """Keys freed by their own expiry (or DEL, eviction), not by a
    release, count against max-remembered-ids like freed ones; INFO
    padlock shows how many such ids are kept."""
    r.config_set("padlock.max-remembered-ids", 100)
    p = r.pipeline(transaction=False)
    for i in range(2000):
        p.execute_command("LOCK.ACQUIRE", f"gone:{i}", "h", 1, "ID", f"a{i}")
    p.execute()
    time.sleep(0.05)
    p = r.pipeline(transaction=False)
    for i in range(2000):
        p.exists(f"gone:{i}")  # expires each key now
    assert sum(p.execute()) == 0
    info = r.info("padlock")
    # Counted as freed (those that expired while later requests came in
    # were already pruned by them).
    assert info["padlock_request_ids_freed"] >= 100
    p = r.pipeline(transaction=False)
    for i in range(600):
        p.execute_command("LOCK.ACQUIRE", f"held:{i}", "h", 60000, "ID", f"b{i}")
    p.execute()
    info = r.info("padlock")
    assert info["padlock_request_ids_freed"] <= 100
    assert info["padlock_request_ids"] <= 100 + 600, "the 2,000 expired keys' ids are gone"
