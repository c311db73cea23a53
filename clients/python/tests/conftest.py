"""A real server with the module (the repository's harness), one per test,
on a free loopback port."""

import pathlib
import sys
import time

import pytest
import redis

ROOT = pathlib.Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "scripts"))

from harness import Server  # noqa: E402


@pytest.fixture
def server():
    s = Server()
    yield s
    s.stop()


@pytest.fixture
def r(server):
    c = server.client()
    yield c
    c.close()


@pytest.fixture
def grace_server():
    s = Server(extra=["--padlock.restart-grace-ms", "800"])
    yield s
    s.stop()


@pytest.fixture
def cluster_server():
    s = Server(extra=["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"])
    c = s.client()
    c.execute_command("CLUSTER", "ADDSLOTSRANGE", 0, 16383)
    for _ in range(200):
        if b"cluster_state:ok" in c.execute_command("CLUSTER", "INFO"):
            break
        time.sleep(0.05)
    c.close()
    yield s
    s.stop()


def wait_for(pred, timeout=5.0):
    end = time.time() + timeout
    while time.time() < end:
        if pred():
            return True
        time.sleep(0.01)
    return pred()


__all__ = ["redis", "wait_for"]
