"""docs/commands.md, Durability — the restart grace also starts when a replica is
promoted to master: it may have missed the old master's last grants."""

import time

import pytest
import redis

from conftest import wait_for


def cut_off_replica(master, m):
    """The master keeps working but the replica cannot follow any more."""
    m.config_set("requirepass", "sealed")
    m.execute_command("CLIENT", "KILL", "TYPE", "replica")


@pytest.mark.parametrize("grace", ["1500", "0"])
def test_grace_starts_again_on_promotion(make_server, grace):
    master = make_server(extra=["--repl-diskless-sync-delay", "0"])
    replica = make_server(module_args=["restart-grace-ms", grace],
                          extra=["--replicaof", "127.0.0.1", str(master.port)])
    m, rep = master.client(), replica.client()
    assert wait_for(lambda: rep.info("replication")["master_link_status"] == "up")
    cut_off_replica(master, m)
    try:
        check_promotion(m, rep, grace)
    finally:
        m.config_set("requirepass", "")  # so the fixture can shut it down


def check_promotion(m, rep, grace):
    assert wait_for(lambda: rep.info("replication")["master_link_status"] == "down")
    fence = m.execute_command("LOCK.ACQUIRE", "p", "a", 60000)
    time.sleep(1.6)  # the grace from the replica's own start is over
    assert rep.exists("p") == 0, "the replica missed the grant"
    rep.execute_command("REPLICAOF", "NO", "ONE")
    assert rep.info("replication")["role"] == "master"
    if grace == "0":
        assert rep.execute_command("LOCK.ACQUIRE", "p", "b", 5000) > 0
        return
    with pytest.raises(redis.ResponseError, match="TRYAGAIN"):
        rep.execute_command("LOCK.ACQUIRE", "p", "b", 5000)
    # The old holder, still working, keeps its lock on the new master.
    assert rep.execute_command("LOCK.EXTEND", "p", "a", 60000) == 1
    raw = rep.execute_command("LOCK.INFO", "p")
    got = dict(zip(raw[::2], raw[1::2]))
    assert got[b"holder"] == b"a"
    assert got[b"fence"] > fence, "a re-created lock gets a new, larger fence"
    # After the grace, free keys are free again.
    time.sleep(1.6)
    assert rep.execute_command("LOCK.ACQUIRE", "q", "b", 5000) > 0
