"""docs/commands.md, LOCK.INFO / SEM.INFO / RWLOCK.INFO `queue` and LOCK.TOP — who
waits, in serving order, for how long; where the contention is now, for
keys the caller may read."""

import time

import pytest
import redis

from conftest import Background, wait_blocked


def as_dict(flat):
    return dict(zip(flat[::2], flat[1::2]))


def test_queue_lists_waiters_in_serving_order(server, r):
    r.execute_command("LOCK.ACQUIRE", "k", "owner", 60000)
    waiters = []
    for i, h in enumerate(["w1", "w2", "w3"]):
        waiters.append(Background(server, "LOCK.ACQUIRE", "k", h, 60000, "BLOCK", 10000))
        wait_blocked(r, i + 1)
        time.sleep(0.05)
    queue = as_dict(r.execute_command("LOCK.INFO", "k"))[b"queue"]
    assert [row[0] for row in queue] == [b"w1", b"w2", b"w3"]
    waited = [row[1] for row in queue]
    assert waited == sorted(waited, reverse=True) and waited[0] >= 100, waited
    r.execute_command("LOCK.RELEASE", "k", "owner")
    assert waiters[0].result() > 0
    queue = as_dict(r.execute_command("LOCK.INFO", "k"))[b"queue"]
    assert [row[0] for row in queue] == [b"w2", b"w3"], "w1 was served"
    r.execute_command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
    wait_blocked(r, 0)


def test_queue_shows_permits_and_modes(server, r):
    r.execute_command("SEM.ACQUIRE", "s", "a", 3, 60000, "PERMITS", 3)
    Background(server, "SEM.ACQUIRE", "s", "b", 3, 60000, "PERMITS", 2, "BLOCK", 5000)
    wait_blocked(r, 1)
    row = as_dict(r.execute_command("SEM.INFO", "s"))[b"queue"][0]
    assert row[0] == b"b" and row[2] == 2
    r.execute_command("RWLOCK.ACQUIRE", "rw", "w", "WRITE", 60000)
    Background(server, "RWLOCK.ACQUIRE", "rw", "reader", "READ", 60000, "BLOCK", 5000)
    wait_blocked(r, 2)
    row = as_dict(r.execute_command("RWLOCK.INFO", "rw"))[b"queue"][0]
    assert row[0] == b"reader" and row[2] == b"read"
    r.execute_command("LOCK.ACQUIRE", "free", "h", 60000)
    assert as_dict(r.execute_command("LOCK.INFO", "free"))[b"queue"] == []
    r.execute_command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")


def test_top_orders_keys_by_waiters_and_respects_acl(server, r):
    r.execute_command("LOCK.ACQUIRE", "app:hot", "owner", 60000)
    r.execute_command("LOCK.ACQUIRE", "app:warm", "owner", 60000)
    r.execute_command("SEM.ACQUIRE", "secret:pool", "a", 1, 60000)
    n = 0
    for key, count in (("app:hot", 3), ("app:warm", 1), ("secret:pool", 2)):
        for i in range(count):
            if key.startswith("secret"):
                Background(server, "SEM.ACQUIRE", key, f"{key}{i}", 1, 60000, "BLOCK", 10000)
            else:
                Background(server, "LOCK.ACQUIRE", key, f"{key}{i}", 60000, "BLOCK", 10000)
            n += 1
            wait_blocked(r, n)
    time.sleep(0.05)
    top = r.execute_command("LOCK.TOP")
    assert [row[0] for row in top] == [b"app:hot", b"secret:pool", b"app:warm"]
    hot = top[0]
    assert hot[1] == b"lock" and hot[2] == 3 and hot[3] >= 50 and hot[4] == 1
    assert top[1][1] == b"sem" and top[1][2] == 2
    assert [row[0] for row in r.execute_command("LOCK.TOP", "COUNT", 1)] == [b"app:hot"]
    r.execute_command("ACL", "SETUSER", "app", "on", "nopass", "~app:*", "+@all", "-@admin")
    app = server.client(username="app", password="x")
    seen = [row[0] for row in app.execute_command("LOCK.TOP")]
    assert seen == [b"app:hot", b"app:warm"], "no key the user may not read"
    for bad in (["COUNT"], ["COUNT", 0], ["NOPE", 1], ["COUNT", 1, "x"]):
        with pytest.raises(redis.ResponseError):
            r.execute_command("LOCK.TOP", *bad)
    r.execute_command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
    wait_blocked(r, 0)
    assert r.execute_command("LOCK.TOP") == [], "nobody waits any more"


def test_top_and_graph_say_each_keys_database(server):
    """Keys of every database are listed, each with its database."""
    import threading

    from conftest import wait_blocked
    r3 = server.client(db=3)
    r3.execute_command("LOCK.ACQUIRE", "same", "a", 10000)
    r = server.client()
    r.execute_command("LOCK.ACQUIRE", "same", "a", 10000)
    waits = [threading.Thread(target=c.execute_command,
                              args=("LOCK.ACQUIRE", "same", who, 10000, "BLOCK", 3000), daemon=True)
             for c, who in ((server.client(db=3), "b"), (server.client(), "c"))]
    for t in waits:
        t.start()
    wait_blocked(r, 2)
    top = sorted((row[0], row[5]) for row in r.execute_command("LOCK.TOP"))
    assert top == [(b"same", 0), (b"same", 3)]
    edges = sorted((e[0], e[4]) for e in r.execute_command("LOCK.GRAPH"))
    assert edges == [(b"b", 3), (b"c", 0)]
    r.execute_command("LOCK.RELEASE", "same", "a")
    r3.execute_command("LOCK.RELEASE", "same", "a")
    for t in waits:
        t.join(5)
