"""docs/commands.md, Observability: wait and hold percentiles per kind in INFO padlock,
in Redis' latencystats form, cleared by CONFIG RESETSTAT, zero on
replicas (they apply effects; they do not decide)."""

import time

import reference
from conftest import Background, wait_blocked, wait_for

KINDS = ("lock", "sem", "rwlock")


def info_text(client):
    """INFO padlock as the server wrote it (redis-py parses INFO)."""
    return reference.raw(client.connection_pool.connection_kwargs["port"], "INFO", "padlock").decode()


def percentiles(client, what, kind):
    """{'p50': usec, 'p99': ..., 'p99.9': ...} from INFO padlock."""
    line = client.info("padlock")[f"padlock_{what}_percentiles_usec_{kind}"]
    if isinstance(line, dict):  # redis-py parses "a=1,b=2" into a dict
        return {k: float(v) for k, v in line.items()}
    return {k: float(v) for k, v in (p.split("=") for p in line.split(","))}


def test_form_is_latencystats(r):
    raw = info_text(r)
    for what in ("wait", "hold"):
        for kind in KINDS:
            line = next(l for l in raw.splitlines()
                        if l.startswith(f"padlock_{what}_percentiles_usec_{kind}:"))
            value = line.split(":", 1)[1]
            assert [p.split("=")[0] for p in value.split(",")] == ["p50", "p99", "p99.9"], line
            assert all(p.split("=")[1].count(".") == 1 for p in value.split(","))


def test_waits_of_about_20ms(server, r):
    # 50 waiters, each granted about 20 ms after it queued: the holder
    # releases 20 ms after each waiter blocked.
    r.execute_command("LOCK.ACQUIRE", "w", "h0", 60000)
    for i in range(1, 51):
        bg = Background(server, "LOCK.ACQUIRE", "w", f"h{i}", 60000, "BLOCK", 5000)
        wait_blocked(r, 1)
        time.sleep(0.02)
        r.execute_command("LOCK.RELEASE", "w", f"h{i - 1}")
        assert bg.result() > 0
    p = percentiles(r, "wait", "lock")
    assert 15_000 <= p["p50"] <= 60_000, p
    assert p["p50"] <= p["p99"] <= p["p99.9"]
    assert percentiles(r, "wait", "sem")["p50"] == 0, "only lock waits counted"


def test_holds_of_about_100ms_each_kind(r):
    for i in range(5):
        r.execute_command("LOCK.ACQUIRE", "l", "a", 60000)
        r.execute_command("LOCK.ACQUIRE", "l", "a", 60000)  # a reentry: one hold
        r.execute_command("SEM.ACQUIRE", "s", f"a{i}", 3, 60000)
        r.execute_command("RWLOCK.ACQUIRE", "rw", "a", "READ", 60000)
        time.sleep(0.1)
        r.execute_command("LOCK.RELEASE", "l", "a")
        assert percentiles(r, "hold", "lock")["p50"] == 0 or i > 0, "a reentry's release ends no hold"
        r.execute_command("LOCK.RELEASE", "l", "a")
        r.execute_command("SEM.RELEASE", "s", f"a{i}")
        r.execute_command("RWLOCK.RELEASE", "rw", "a", "READ")
    for kind in KINDS:
        p = percentiles(r, "hold", kind)
        assert 80_000 <= p["p50"] <= 300_000, (kind, p)


def test_expired_holds_count_to_their_lease_end(r):
    r.execute_command("LOCK.ACQUIRE", "l", "a", 150)
    r.execute_command("SEM.ACQUIRE", "s", "a", 2, 150)
    r.execute_command("SEM.ACQUIRE", "s", "b", 2, 5000)  # keeps the key alive
    assert wait_for(lambda: not r.exists("l"), timeout=3)
    time.sleep(0.2)
    r.execute_command("SEM.ACQUIRE", "s", "c", 2, 5000)  # removes a's ended lease
    for kind in ("lock", "sem"):
        p = percentiles(r, "hold", kind)
        assert 100_000 <= p["p50"] <= 400_000, (kind, p)


def test_resetstat_clears_them(r):
    r.execute_command("LOCK.ACQUIRE", "l", "a", 60000)
    time.sleep(0.01)
    r.execute_command("LOCK.RELEASE", "l", "a")
    assert percentiles(r, "hold", "lock")["p50"] > 0
    r.config_resetstat()
    assert percentiles(r, "hold", "lock") == {"p50": 0.0, "p99": 0.0, "p99.9": 0.0}


def test_replicas_report_their_own_zero_values(make_server):
    master = make_server(extra=["--repl-diskless-sync-delay", "0"])
    replica = make_server(extra=["--replicaof", "127.0.0.1", str(master.port)])
    m, rep = master.client(), replica.client()
    assert wait_for(lambda: rep.info("replication")["master_link_status"] == "up")
    m.execute_command("LOCK.ACQUIRE", "l", "a", 60000)
    m.execute_command("SEM.ACQUIRE", "s", "a", 1, 60000)
    time.sleep(0.02)
    m.execute_command("LOCK.RELEASE", "l", "a")
    m.execute_command("SEM.RELEASE", "s", "a")
    m.execute_command("WAIT", 1, 2000)
    assert percentiles(m, "hold", "lock")["p50"] > 0
    for kind in KINDS:
        assert percentiles(rep, "hold", kind)["p50"] == 0
        assert percentiles(rep, "wait", kind)["p50"] == 0
