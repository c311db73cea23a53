"""A forked child never shares a holder, a connection or a watcher with its
parent (gunicorn --preload, Celery prefork, multiprocessing with fork):
children forked after the parent used a lock draw their own holders, so
exactly one of them gets a free lock, and the parent's hold stays its
own."""

import multiprocessing
import os

import pytest

from padlock import Lock, Semaphore
from padlock._holders import current_holder


def _try_in_child(port, key, out):
    import redis
    r = redis.Redis(port=port)
    got = Lock(r, key, ttl=30).acquire(blocking=False)
    out.put((os.getpid(), got is not None, current_holder()))


@pytest.mark.parametrize("how", ["os.fork", "multiprocessing fork"])
def test_forked_children_do_not_reenter_one_anothers_lock(server, r, how):
    mine = Lock(r, "parent", ttl=30)
    assert mine.acquire() is not None
    parent_holder = current_holder()
    # Children that were handed the parent's Lock object too.
    job = Lock(r, "job", ttl=30)
    results = []
    if how == "os.fork":
        readers = []
        for _ in range(5):
            rd, wr = os.pipe()
            pid = os.fork()
            if pid == 0:  # the child
                code = 1
                try:
                    got = job.acquire(blocking=False) is not None
                    released = None
                    try:
                        mine.release()
                    except Exception as e:  # noqa: BLE001 - reported to the parent
                        released = type(e).__name__
                    os.write(wr, f"{int(got)} {current_holder()} {released}".encode())
                    code = 0
                finally:
                    os._exit(code)
            os.close(wr)
            readers.append((pid, rd))
        for pid, rd in readers:
            text = os.read(rd, 4096).decode()
            os.close(rd)
            os.waitpid(pid, 0)
            got, holder, released = text.split()
            results.append((got == "1", holder))
            assert released == "NotHeldError", "the parent's hold is not the child's to release"
    else:
        ctx = multiprocessing.get_context("fork")
        q = ctx.Queue()
        procs = [ctx.Process(target=_try_in_child, args=(server.port, "job", q)) for _ in range(5)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(20)
        results = [q.get(timeout=5)[1:] for _ in procs]
    assert sum(got for got, _ in results) == 1, results
    holders = {h for _, h in results}
    assert len(holders) == 5 and parent_holder not in holders, "each child drew its own holder"
    assert mine.held, "the parent still holds its lock"
    info = r.execute_command("LOCK.INFO", "parent")
    assert info[info.index(b"holder") + 1].decode() == parent_holder
    assert info[info.index(b"count") + 1] == 1
    mine.release()


def test_a_child_holds_and_watches_on_its_own(server, r):
    """A child that holds after the fork opens its own keeper connection
    and watcher: its semaphore hold is renewed (bound with KEEP) while the
    parent's keeps going."""
    parent = Semaphore(r, "pool", limit=3, ttl=1)
    assert parent.acquire()
    rd, wr = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            import time
            import redis
            c = redis.Redis(port=server.port)
            s = Semaphore(c, "pool", limit=3, ttl=1)
            ok = s.acquire() is not None
            time.sleep(1.6)
            os.write(wr, f"{int(ok and s.held)}".encode())
            s.release()
            code = 0
        finally:
            os._exit(code)
    os.close(wr)
    out = os.read(rd, 100).decode()
    os.waitpid(pid, 0)
    assert out == "1", "the child's hold outlived its ttl: kept by its own connection"
    assert parent.held
    parent.release()


def test_a_forked_child_draws_request_ids_of_its_own():
    """Request-ids are a per-process prefix and a counter: a child forked
    after the parent sent requests must not send the parent's next ids
    (they would replay the parent's replies on the server)."""
    from padlock._retry import request_id

    parent = [request_id() for _ in range(3)]
    rd, wr = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        try:
            os.write(wr, request_id().encode())
        finally:
            os._exit(0)
    os.close(wr)
    child = os.read(rd, 200).decode()
    os.close(rd)
    os.waitpid(pid, 0)
    nxt = request_id()
    assert len(set(parent + [nxt, child])) == 5
    assert child.split(":")[0] != nxt.split(":")[0], "the child has a prefix of its own"
