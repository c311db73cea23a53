"""docs/commands.md, Configuration — load-time arguments and CONFIG GET/SET padlock.*."""

import pytest
import redis


def test_defaults(r):
    assert r.config_get("padlock.max-ttl-ms") == {"padlock.max-ttl-ms": "86400000"}
    assert r.config_get("padlock.max-holder-len") == {"padlock.max-holder-len": "512"}


def test_load_time_arguments(make_server):
    s = make_server(module_args=["max-ttl-ms", "1000", "max-holder-len", "4"])
    r = s.client()
    assert r.config_get("padlock.max-ttl-ms")["padlock.max-ttl-ms"] == "1000"
    with pytest.raises(redis.ResponseError, match="^ttl-ms must be an integer from 1 to 1000$"):
        r.execute_command("LOCK.ACQUIRE", "k", "h", 1001)
    with pytest.raises(redis.ResponseError, match="^timeout-ms must be an integer from 0 to 1000$"):
        r.execute_command("LOCK.ACQUIRE", "k", "h", 10, "BLOCK", 1001)
    with pytest.raises(redis.ResponseError, match="^holder must be 1 to 4 bytes long$"):
        r.execute_command("LOCK.ACQUIRE", "k", "hhhhh", 100)
    assert r.execute_command("LOCK.ACQUIRE", "k", "hhhh", 1000) > 0


def test_config_set(r):
    r.config_set("padlock.max-holder-len", 3)
    with pytest.raises(redis.ResponseError, match="^holder must be 1 to 3 bytes long$"):
        r.execute_command("LOCK.ACQUIRE", "k", "abcd", 100)
    r.config_set("padlock.max-ttl-ms", 50)
    with pytest.raises(redis.ResponseError, match="from 1 to 50$"):
        r.execute_command("SEM.ACQUIRE", "s", "abc", 1, 51)
    with pytest.raises(redis.ResponseError):
        r.config_set("padlock.max-ttl-ms", 0)
    assert r.config_get("padlock.max-ttl-ms")["padlock.max-ttl-ms"] == "50"


def test_bad_load_argument_refuses_to_load(tmp_dir):
    from conftest import Server
    s = Server(tmp_dir, module_args=["max-ttl-ms", "nope"])
    with pytest.raises(RuntimeError):
        s.start()
