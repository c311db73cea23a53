"""docs/commands.md, Replies and errors — every row of the table, and no input crashing
the server or leaving partial state."""

import random

import pytest
import redis

COMMANDS = {
    # command: (minimal valid args, arity is exact?)
    "LOCK.ACQUIRE": ["k", "h", "100"],
    "LOCK.REENTER": ["k", "h", "100"],
    "LOCK.RELEASE": ["k", "h"],
    "LOCK.EXTEND": ["k", "h", "100"],
    "LOCK.INFO": ["k"],
    "LOCK.MACQUIRE": ["1", "k", "h", "100"],
    "LOCK.MRELEASE": ["1", "k", "h"],
    "SEM.ACQUIRE": ["s", "h", "2", "100"],
    "SEM.RELEASE": ["s", "h"],
    "SEM.EXTEND": ["s", "h", "100"],
    "SEM.INFO": ["s"],
}


@pytest.mark.parametrize("cmd", sorted(COMMANDS))
def test_too_few_arguments(r, cmd):
    args = COMMANDS[cmd][:-1]
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command(cmd, *args)
    assert str(e.value) == f"wrong number of arguments for '{cmd.lower()}' command"


@pytest.mark.parametrize("cmd", ["LOCK.RELEASE", "LOCK.INFO", "LOCK.WAITFOR"])
def test_too_many_arguments(r, cmd):
    with pytest.raises(redis.ResponseError, match="wrong number of arguments"):
        r.execute_command(cmd, *COMMANDS.get(cmd, ["k", "h", "100"]), "extra")


@pytest.mark.parametrize("cmd", ["LOCK.REENTER", "LOCK.EXTEND"])
def test_unknown_trailing_option(r, cmd):
    # These take the KEEP option, so anything else after ttl-ms is an
    # unknown option, as for SEM.EXTEND.
    with pytest.raises(redis.ResponseError, match="^syntax error$"):
        r.execute_command(cmd, *COMMANDS[cmd], "extra")


@pytest.mark.parametrize("value", ["0", "-1", "abc", "1.5", "86400001", "+5", "", "99999999999999999999"])
def test_ttl_out_of_range(r, value):
    for cmd, args in [("LOCK.ACQUIRE", ["k", "h", value]), ("LOCK.EXTEND", ["k", "h", value]),
                      ("LOCK.REENTER", ["k", "h", value]), ("SEM.ACQUIRE", ["s", "h", "1", value]),
                      ("LOCK.MACQUIRE", ["1", "k", "h", value])]:
        with pytest.raises(redis.ResponseError, match=r"^ttl-ms must be an integer from 1 to 86400000$"):
            r.execute_command(cmd, *args)
    assert r.dbsize() == 0


@pytest.mark.parametrize("value", ["-1", "x", "86400001"])
def test_timeout_out_of_range(r, value):
    with pytest.raises(redis.ResponseError, match="^timeout-ms must be an integer from 0 to"):
        r.execute_command("LOCK.ACQUIRE", "k", "h", 100, "BLOCK", value)
    assert r.dbsize() == 0


@pytest.mark.parametrize("value", ["0", "-3", "2147483648", "x"])
def test_limit_out_of_range(r, value):
    with pytest.raises(redis.ResponseError, match="^limit must be an integer from 1 to 2147483647$"):
        r.execute_command("SEM.ACQUIRE", "s", "h", value, 100)
    assert r.dbsize() == 0


def test_permits_out_of_range(r):
    with pytest.raises(redis.ResponseError, match="^PERMITS must be an integer from 1 to 3$"):
        r.execute_command("SEM.ACQUIRE", "s", "h", 3, 100, "PERMITS", 0)
    with pytest.raises(redis.ResponseError, match="PERMITS must not exceed limit"):
        r.execute_command("SEM.ACQUIRE", "s", "h", 3, 100, "PERMITS", 4)
    with pytest.raises(redis.ResponseError, match="^PERMITS must be an integer"):
        r.execute_command("SEM.RELEASE", "s", "h", "PERMITS", "x")
    assert r.dbsize() == 0


@pytest.mark.parametrize("value", ["0", "-1", "x", "1025"])
def test_numkeys_out_of_range(r, value):
    with pytest.raises(redis.ResponseError, match="^numkeys must be an integer from 1 to 1024$"):
        r.execute_command("LOCK.MACQUIRE", value, "a", "h", 100)


def test_numkeys_larger_than_args(r):
    with pytest.raises(redis.ResponseError, match="wrong number of arguments"):
        r.execute_command("LOCK.MACQUIRE", 5, "a", "b", "h", 100)
    assert r.dbsize() == 0


def test_holder_empty_or_too_long(r):
    with pytest.raises(redis.ResponseError, match="^holder must be 1 to 512 bytes long$"):
        r.execute_command("LOCK.ACQUIRE", "k", "", 100)
    with pytest.raises(redis.ResponseError, match="^holder must be"):
        r.execute_command("LOCK.ACQUIRE", "k", "x" * 513, 100)
    assert r.execute_command("LOCK.ACQUIRE", "k", "x" * 512, 100) > 0
    # Those that give back too (a holder past the bound holds nothing),
    # told the bound in force whatever the length.
    for h in ("x" * 513, "", "x" * 70000):
        for cmd in (["LOCK.RELEASE", "k", h], ["LOCK.MRELEASE", 1, "k", h],
                    ["SEM.RELEASE", "s", h], ["RWLOCK.RELEASE", "w", h, "WRITE"],
                    ["LOCK.CANCEL", "k", h, "r1"]):
            with pytest.raises(redis.ResponseError, match="^holder must be 1 to 512 bytes long$"):
                r.execute_command(*cmd)


@pytest.mark.parametrize("args", [
    ["k", "h", 100, "BLOCK"], ["k", "h", 100, "NOPE", 1], ["k", "h", 100, "PERMITS", 1],
])
def test_syntax_errors(r, args):
    with pytest.raises(redis.ResponseError, match="^syntax error$"):
        r.execute_command("LOCK.ACQUIRE", *args)
    assert r.dbsize() == 0


def test_sem_syntax_errors(r):
    for extra in (["PERMITS"], ["BLOCK"], ["FOO", "1"]):
        with pytest.raises(redis.ResponseError, match="^syntax error$"):
            r.execute_command("SEM.ACQUIRE", "s", "h", 2, 100, *extra)
    assert r.dbsize() == 0


def test_options_case_insensitive(r):
    assert r.execute_command("SEM.ACQUIRE", "s", "h", 5, 100, "permits", 2) == 2


def test_notheld_error_code(r):
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("LOCK.RELEASE", "k", "h")
    assert str(e.value) == "NOTHELD 'k' is not held by 'h'"


def test_random_input_never_crashes(server):
    r = server.client()
    rnd = random.Random(1234)
    words = [b"", b"0", b"-1", b"1", b"100", b"2147483648", b"BLOCK", b"PERMITS", b"k", b"s",
             b"\x00", b"\r\n", b"x" * 600, b"99999999999999999999", b"1024", b"2"]
    r.set("str", "v")
    for _ in range(3000):
        cmd = rnd.choice(sorted(COMMANDS) + ["PADLOCK.LOCKSET", "PADLOCK.SEMSET"])
        args = [rnd.choice(words + [b"str"]) for _ in range(rnd.randint(0, 8))]
        try:
            r.execute_command(cmd, *args)
        except redis.ResponseError:
            pass
    assert server.alive()
    assert r.ping()
    assert r.get("str") == b"v"
