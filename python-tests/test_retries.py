"""docs/commands.md, Retries — what real drivers do when a reply is lost after the
server applied the command (a loopback proxy drops it and closes the
connection): redis-py resends (by default since 8.0: 10 retries), and
without `ID` that doubled a reentry, freed a nested hold and doubled
permits; with `ID` every resend answers the first reply and the state is
what the first sending left, pipelines resent whole included."""

import pytest
import redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

from faultproxy import FaultProxy  # scripts/, on the path (conftest)


@pytest.fixture
def proxy(server):
    p = FaultProxy(server.port)
    yield p
    p.close()


@pytest.fixture
def resending(proxy):
    """redis-py as 8.x sets it up by default: resend on connection errors."""
    c = redis.Redis(port=proxy.port, retry=Retry(ExponentialBackoff(cap=0.05), 10),
                    retry_on_error=[redis.ConnectionError])
    yield c
    c.close()


def info(r, cmd, key):
    raw = r.execute_command(cmd, key)
    return {} if raw is None else dict(zip(raw[::2], raw[1::2]))


def test_without_id_a_resend_doubles_the_reentry(r, resending, proxy):
    proxy.drop("LOCK.ACQUIRE")
    resending.execute_command("LOCK.ACQUIRE", "k", "h", 60000)
    assert proxy.dropped == 1
    assert info(r, "LOCK.INFO", "k")[b"count"] == 2


@pytest.mark.parametrize("cmd,info_cmd,field,want", [
    (["LOCK.ACQUIRE", "k", "h", 60000], "LOCK.INFO", b"count", 1),
    (["SEM.ACQUIRE", "k", "h", 5, 60000, "PERMITS", 2], "SEM.INFO", b"used", 2),
    (["RWLOCK.ACQUIRE", "k", "h", "READ", 60000], "RWLOCK.INFO", b"mode", b"read"),
    (["LOCK.MACQUIRE", 2, "k", "k2", "h", 60000], "LOCK.INFO", b"count", 1),
])
def test_with_id_a_resent_acquire_applies_once(r, resending, proxy, cmd, info_cmd, field, want):
    proxy.drop(cmd[0])
    first = resending.execute_command(*cmd, "ID", "r1")
    assert proxy.dropped == 1 and first is not None
    assert info(r, info_cmd, "k")[field] == want
    assert resending.execute_command(*cmd, "ID", "r1") == first


def test_a_resent_inner_release_leaves_the_outer_hold(r, resending, proxy):
    resending.execute_command("LOCK.ACQUIRE", "k", "h", 60000, "ID", "outer")
    resending.execute_command("LOCK.ACQUIRE", "k", "h", 60000, "ID", "inner")
    proxy.drop("LOCK.RELEASE")
    assert resending.execute_command("LOCK.RELEASE", "k", "h", "ID", "inner-release") == 1
    assert proxy.dropped == 1
    assert info(r, "LOCK.INFO", "k")[b"count"] == 1
    assert r.execute_command("LOCK.ACQUIRE", "k", "other", 1000) is None


def test_without_id_a_resent_inner_release_frees_the_outer_hold(r, resending, proxy):
    resending.execute_command("LOCK.ACQUIRE", "k", "h", 60000)
    resending.execute_command("LOCK.ACQUIRE", "k", "h", 60000)
    proxy.drop("LOCK.RELEASE")
    resending.execute_command("LOCK.RELEASE", "k", "h")
    # Mutual exclusion broken: another worker gets the key.
    assert r.execute_command("LOCK.ACQUIRE", "k", "other", 1000) is not None


def test_a_pipeline_resent_whole_ends_where_the_first_sending_left(r, resending, proxy):
    def pipeline():
        p = resending.pipeline(transaction=False)
        p.execute_command("LOCK.ACQUIRE", "k", "h", 60000, "ID", "a")
        p.execute_command("LOCK.RELEASE", "k", "h", "ID", "b")
        p.execute_command("SEM.ACQUIRE", "s", "h", 2, 60000, "ID", "c")
        p.execute_command("LOCK.ACQUIRE", "k", "h", 60000, "ID", "d")
        return p

    proxy.drop("LOCK.ACQUIRE")
    replies = pipeline().execute()
    assert proxy.dropped == 1
    assert replies[1] == 0 and replies[2] == 1 and replies[3] > replies[0]
    assert info(r, "LOCK.INFO", "k")[b"count"] == 1
    assert info(r, "SEM.INFO", "s")[b"used"] == 1
    assert pipeline().execute() == replies
    assert info(r, "LOCK.INFO", "k")[b"count"] == 1
