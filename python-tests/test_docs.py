"""docs/commands.md, Observability — COMMAND DOCS describes every command (summary,
since, complexity, arguments with their tokens). The test walks every
command of the module, writes its documented arguments back as a syntax
line and checks it against the command reference's line for it."""

import pathlib
import re

import pytest
import redis

# The command reference's headings (`### CMD args`, docs/commands.md).
# The internal state commands are not in it; their lines are the
# README's.
SYNTAX = {
    "lock.acquire": "key holder ttl-ms [BLOCK timeout-ms [MAILBOX mailbox-key]] [KEEP] [ID request-id]",
    "lock.reenter": "key holder ttl-ms [KEEP] [ID request-id]",
    "lock.release": "key holder [ID request-id]",
    "lock.extend": "key holder ttl-ms [KEEP [MAILBOX mailbox-key]] [ID request-id]",
    "lock.info": "key",
    "lock.macquire": "numkeys key [key ...] holder ttl-ms [BLOCK timeout-ms [MAILBOX mailbox-key]] [KEEP] [ID request-id]",
    "lock.mrelease": "numkeys key [key ...] holder [ID request-id]",
    "lock.cancel": "key holder request-id",
    "lock.waitfor": "key holder ttl-ms",
    "lock.graph": "[COUNT n]",
    "lock.top": "[COUNT n]",
    "sem.acquire": "key holder limit ttl-ms [PERMITS n] [BLOCK timeout-ms [MAILBOX mailbox-key]] [KEEP] [ID request-id]",
    "sem.release": "key holder [PERMITS n] [ID request-id]",
    "sem.extend": "key holder ttl-ms [PERMITS n] [KEEP [MAILBOX mailbox-key]] [ID request-id]",
    "sem.info": "key",
    "rwlock.acquire": "key holder READ|WRITE ttl-ms [BLOCK timeout-ms [MAILBOX mailbox-key]] [KEEP] [ID request-id]",
    "rwlock.release": "key holder READ|WRITE [ID request-id]",
    "rwlock.extend": "key holder ttl-ms [KEEP [MAILBOX mailbox-key]] [ID request-id]",
    "rwlock.info": "key",
    "padlock.lockset": "key holder count fence deadline-ms [ID request]",
    "padlock.semset": "key holder limit permits deadline-ms [ID request]",
    "padlock.rwset": "key holder reads writes fence deadline-ms [ID request]",
    "padlock.fencefloor": "fence",
    "padlock.requestid": "key holder request-id at-ms print I|A reply [reply ...]",
    "padlock.post": "mailbox-key at-ms element",
}

COMMANDS = pathlib.Path(__file__).resolve().parent.parent / "docs" / "commands.md"


import reference  # noqa: E402  (scripts/docs/: one renderer and one raw reply for docs and tests)
from reference import as_dict, render, text  # noqa: E402


def raw(r, *args):
    """A reply without redis-py's parsing (it reads every COMMAND reply as
    plain COMMAND's)."""
    return reference.raw(r.connection_pool.connection_kwargs["port"], *args)


def module_commands(r):
    names = raw(r, "COMMAND", "LIST", "FILTERBY", "MODULE", "padlock")
    return sorted(text(n) for n in names)


def effects_are_internal(r):
    """Redis 8.0+ registers the state commands `internal`: unknown to
    clients, absent from COMMAND."""
    info = r.info("server")
    return "valkey_version" not in info and int(info["redis_version"].split(".")[0]) >= 8


def visible(r):
    return {n: l for n, l in SYNTAX.items()
            if not (n.startswith("padlock.") and effects_are_internal(r))}


def test_every_command_is_documented_as_the_spec_writes_it(r):
    assert module_commands(r) == sorted(visible(r))
    for name, line in visible(r).items():
        docs = as_dict(raw(r, "COMMAND", "DOCS", name)[1])
        assert text(docs["summary"]) and text(docs["since"]) == "1.0.0", name
        assert text(docs["complexity"]).startswith("O("), name
        assert text(docs["group"]) == "module" and text(docs["module"]) == "padlock"
        assert render(docs.get("arguments", [])) == line, name


def test_syntax_lines_match_the_command_reference():
    """The repository's own contract is docs/commands.md: each command's
    heading there is the line COMMAND DOCS gives back."""
    doc = COMMANDS.read_text()
    headings = dict(re.findall(r"^### ([A-Z]+\.[A-Z]+) ?(.*)$", doc, re.M))
    for name, line in SYNTAX.items():
        if name.startswith("padlock."):
            continue
        assert headings.get(name.upper()) == line, name


def required_args(line):
    """Arguments outside every [optional group] of a syntax line."""
    depth, n = 0, 0
    for w in line.split():
        opened = len(w) - len(w.lstrip("["))
        if depth == 0 and opened == 0:
            n += 1
        depth += opened - (len(w) - len(w.rstrip("]")))
    return n


def test_arity_and_key_specs(r):
    info = {text(c[0]): c for c in raw(r, "COMMAND", "INFO", *visible(r))}
    for name, line in visible(r).items():
        required = 1 + required_args(line)
        variable = "[" in line
        assert info[name][1] == (-required if variable else required), name
    # numkeys commands keep their own key lookup (cluster routing), and
    # describe it as a keynum spec.
    assert raw(r, "COMMAND", "GETKEYS", "LOCK.MACQUIRE", 3, "a", "b", "c", "h", 1) == [b"a", b"b", b"c"]
    assert raw(r, "COMMAND", "GETKEYS", "LOCK.MRELEASE", 2, "a", "b", "h") == [b"a", b"b"]
    # A numkeys the arguments cannot hold: an error, never holder or ttl
    # taken for keys.
    for bad in ([5, "a", "b", "h", 1000], [0, "h", 1000], ["01", "a", "h", 1], [-1, "a", "h", 1]):
        with pytest.raises(redis.ResponseError, match="Invalid"):
            raw(r, "COMMAND", "GETKEYS", "LOCK.MACQUIRE", *bad)
    with pytest.raises(redis.ResponseError, match="Invalid"):
        raw(r, "COMMAND", "GETKEYS", "LOCK.MRELEASE", 4, "a", "b", "h")
    spec = as_dict(info["lock.macquire"][8][0])
    assert text(as_dict(spec["find_keys"])["type"]) == "keynum"


def test_server_checks_arity_with_the_usual_error(r):
    with pytest.raises(Exception, match="wrong number of arguments for 'rwlock.release' command"):
        r.execute_command("RWLOCK.RELEASE", "k", "h")


def cli_hint(cli, port, typed):
    """What an interactive CLI shows after `typed`: the line with its hint."""
    import fcntl
    import os
    import pty
    import select
    import struct
    import termios
    import time

    pid, fd = pty.fork()
    if pid == 0:
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 200, 0, 0))
        os.environ["TERM"] = "xterm"
        os.execvp(cli, [cli, "-p", str(port)])

    def read(seconds):
        out, end = b"", time.time() + seconds
        while time.time() < end:
            if select.select([fd], [], [], 0.05)[0]:
                try:
                    chunk = os.read(fd, 4096)
                except OSError:
                    break
                out += chunk
                if b"\x1b[6n" in chunk:  # the CLI asks where the cursor is
                    os.write(fd, b"\x1b[1;1R")
        return out

    try:
        read(1.5)
        os.write(fd, typed.encode())
        out = read(1.0).decode(errors="replace")
        os.write(fd, b"\x03")
        read(0.2)
    finally:
        os.close(fd)
        os.waitpid(pid, 0)
    frames = [re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", f) for f in out.split("\r")]
    return [f for f in frames if "> " in f][-1].split("> ", 1)[1]


def test_cli_argument_hints_come_from_the_docs(server):
    import shutil
    cli = shutil.which("redis-cli")
    if not cli:
        pytest.skip("no redis-cli")
    assert cli_hint(cli, server.port, "RWLOCK.ACQUIRE ") == \
        "RWLOCK.ACQUIRE key holder READ|WRITE ttl-ms [BLOCK timeout-ms [MAILBOX mailbox-key]] [KEEP] [ID request-id]"
    assert cli_hint(cli, server.port, "SEM.ACQUIRE s h 3 100 ") == \
        "SEM.ACQUIRE s h 3 100 [PERMITS n] [BLOCK timeout-ms [MAILBOX mailbox-key]] [KEEP] [ID request-id]"
