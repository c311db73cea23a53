"""docs/commands.md, cluster — every command declares its keys, so Redis Cluster routes
it and refuses multi-key calls across slots (CROSSSLOT)."""

import pytest
import redis

from conftest import free_port, wait_for


@pytest.fixture
def node(make_server):
    port = free_port(cluster=True)
    s = make_server(extra=["--cluster-enabled", "yes", "--cluster-config-file", f"nodes-{port}.conf"],
                    port=port)
    r = s.client()
    r.execute_command("CLUSTER", "ADDSLOTSRANGE", 0, 16383)

    def ok():
        state = r.execute_command("CLUSTER", "INFO")
        return "cluster_state:ok" in (state.decode() if isinstance(state, bytes) else str(state))

    assert wait_for(ok, timeout=10)
    return s


def test_cross_slot_multi_key_is_refused(node):
    r = node.client()
    with pytest.raises(redis.ResponseError, match="CROSSSLOT"):
        r.execute_command("LOCK.MACQUIRE", 2, "a", "b", "h", 1000)
    with pytest.raises(redis.ResponseError, match="CROSSSLOT"):
        r.execute_command("LOCK.MRELEASE", 2, "a", "b", "h")
    fences = r.execute_command("LOCK.MACQUIRE", 2, "{acct}:1", "{acct}:2", "h", 1000)
    assert len(fences) == 2
    assert r.execute_command("LOCK.MRELEASE", 2, "{acct}:1", "{acct}:2", "h") == [0, 0]


def test_single_key_commands_work_in_cluster(node):
    r = node.client()
    assert r.execute_command("LOCK.ACQUIRE", "k", "h", 1000) > 0
    assert r.execute_command("SEM.ACQUIRE", "s", "h", 2, 1000) == 1
    assert r.execute_command("RWLOCK.ACQUIRE", "rw", "h", "READ", 1000) > 0
    assert r.execute_command("RWLOCK.INFO", "rw") is not None
    assert r.execute_command("LOCK.INFO", "k") is not None
