"""Bounded resources: waiters per key and per server (configurable, a
clear error when reached), and a MACQUIRE of 1,024 keys with 1,024
waiters on it."""

import resource
import time

import pytest
import redis

from harness import resp

from conftest import Background, wait_blocked


def test_waiters_per_key_are_bounded(make_server):
    s = make_server(module_args=["max-waiters-per-key", "3", "max-waiters", "5"])
    r = s.client()
    assert r.config_get("padlock.max-waiters-per-key") == {"padlock.max-waiters-per-key": "3"}
    r.execute_command("LOCK.ACQUIRE", "k", "owner", 60000)
    r.execute_command("LOCK.ACQUIRE", "j", "owner", 60000)
    # One at a time, so that the server's arrival order is w0, w1, w2
    # (threads started together may arrive in any order).
    waiters = []
    for i in range(3):
        waiters.append(Background(s, "LOCK.ACQUIRE", "k", f"w{i}", 60000, "BLOCK", 0))
        wait_blocked(r, i + 1)
    with pytest.raises(redis.ResponseError, match=r"^too many waiters: 3 clients already wait for 'k' \(padlock.max-waiters-per-key\)"):
        r.execute_command("LOCK.ACQUIRE", "k", "late", 60000, "BLOCK", 0)
    # Without BLOCK nothing waits: the usual nil.
    assert r.execute_command("LOCK.ACQUIRE", "k", "late", 60000) is None
    more = []
    for i in range(2):
        more.append(Background(s, "LOCK.ACQUIRE", "j", f"v{i}", 60000, "BLOCK", 0))
        wait_blocked(r, 4 + i)
    with pytest.raises(redis.ResponseError, match=r"too many waiters: 5 clients already wait on this server"):
        r.execute_command("SEM.ACQUIRE", "s0", "x", 1, 1000, "BLOCK", 0) if r.execute_command(
            "SEM.ACQUIRE", "s0", "y", 1, 60000) else None
    assert r.info("padlock")["padlock_blocked_clients"] == 5, "the refused ones never queued"
    r.config_set("padlock.max-waiters", 6)
    extra = Background(s, "LOCK.ACQUIRE", "j", "v9", 60000, "BLOCK", 0)
    wait_blocked(r, 6)
    r.execute_command("LOCK.RELEASE", "k", "owner")
    r.execute_command("LOCK.RELEASE", "j", "owner")
    assert waiters[0].result() > 0 and more[0].result() > 0
    for w in waiters[1:] + more[1:] + [extra]:
        r.client_kill_filter(_id=w.client_id)


@pytest.fixture
def many_files():
    """1,024 client connections need more than the usual 1,024 descriptors,
    here and in the server started after this (it inherits the limit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, 8192)
    if want < 4096:
        pytest.skip(f"open-files limit {hard} is too low for 1,024 clients")
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.mark.heavy
def test_macquire_of_1024_keys_with_1024_waiters(many_files, make_server, record_property):
    """1,024 clients each wait for the same 1,024 keys (plain sockets, so
    the clients cost little), then one LOCK.MRELEASE hands all the keys to
    the first of them."""
    import socket

    server = make_server()
    r = server.client()
    keys = [f"{{m}}k{i}" for i in range(1024)]
    assert len(r.execute_command("LOCK.MACQUIRE", len(keys), *keys, "owner", 60000)) == 1024
    socks = []
    for i in range(1024):
        sock = socket.create_connection(("127.0.0.1", server.port))
        sock.sendall(resp("LOCK.MACQUIRE", len(keys), *keys, f"w{i}", 60000, "BLOCK", 0))
        socks.append(sock)
    wait_blocked(r, 1024, timeout=120)
    r.config_resetstat()
    t0 = time.perf_counter()
    counts = r.execute_command("LOCK.MRELEASE", len(keys), *keys, "owner")
    ms = (time.perf_counter() - t0) * 1000
    assert counts == [0] * 1024
    usec = r.info("commandstats")["cmdstat_lock.mrelease"]["usec"]
    record_property("mrelease_1024_with_1024_waiters_ms", round(ms, 1))
    print(f"LOCK.MRELEASE of 1,024 keys handing all to the first of 1,024 waiters: "
          f"{ms:.1f} ms at the client, {usec / 1000:.1f} ms in the server")
    socks[0].settimeout(10)
    reply = socks[0].recv(1 << 16)
    assert reply.startswith(b"*1024\r\n:"), reply[:40]
    assert r.info("padlock")["padlock_blocked_clients"] == 1023
    assert r.execute_command("LOCK.INFO", keys[-1])[5] == b"w0"
    slow = r.slowlog_get(1)
    print(f"slowest command: {slow[0]['duration'] if slow else 0} us")
    for sock in socks:
        sock.close()
    assert r.ping()
