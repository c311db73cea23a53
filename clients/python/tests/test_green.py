"""gevent patching the process before or after padlock is imported (as
gunicorn's and Celery's gevent workers, and python-redis-lock's own test
helper, do): renewed holds work, waits do not block other green threads,
and nothing is held after release."""

import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("gevent")

SCRIPT = textwrap.dedent("""
    import sys
    order, port = sys.argv[1], int(sys.argv[2])
    if order == "before":
        from gevent import monkey; monkey.patch_all()
        import padlock
    else:
        import padlock
        from gevent import monkey; monkey.patch_all()
    import gevent, redis
    r = redis.Redis(port=port)
    lock = padlock.Lock(r, "green", ttl=0.6)
    assert lock.acquire() is not None
    gevent.sleep(1.2)
    assert lock.held, "renewed past its ttl"
    order_seen = []
    def worker(i):
        l = padlock.Lock(r, "green:q", ttl=1)
        assert l.acquire(timeout=10) is not None
        order_seen.append(i)
        gevent.sleep(0.05)
        l.release()
    ticks = []
    def ticker():
        for _ in range(20):
            ticks.append(1)
            gevent.sleep(0.01)
    jobs = [gevent.spawn(worker, i) for i in range(5)] + [gevent.spawn(ticker)]
    gevent.joinall(jobs, timeout=20, raise_error=True)
    assert sorted(order_seen) == [0, 1, 2, 3, 4], order_seen
    assert len(ticks) == 20, "other green threads ran while holds waited"
    lock.release()
    assert r.exists("green", "green:q") == 0
    print("ok")
""")


@pytest.mark.parametrize("order", ["before", "after"])
def test_gevent_patched_before_or_after_import(server, order):
    out = subprocess.run([sys.executable, "-c", SCRIPT, order, str(server.port)],
                         capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stdout + out.stderr
