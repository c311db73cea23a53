"""The example sessions of the docs, run against a real server.

An example session is a fenced block marked `redis`: lines `> COMMAND args`
(split like redis-cli does), each followed by the reply as redis-cli prints
it. A file's sessions run in order on one connection to one fresh server,
so a file reads as one session. Replies are compared by shape: strings,
nils, array lengths and error classes exactly; integers (fences, ttls) by
kind, not value. A trailing `# ...` after three spaces is a comment.

    python scripts/docs/examples.py FILE.md   # prints each command's actual reply
"""

import re
import shlex
import sys

import redis

FENCE = re.compile(r"^```redis\n(.*?)^```", re.M | re.S)


def sessions(markdown):
    """[(line number, [(command args, expected reply lines)])] per block."""
    out = []
    for m in FENCE.finditer(markdown):
        line = markdown[:m.start()].count("\n") + 2
        steps, cur = [], None
        for raw in m.group(1).splitlines():
            text = re.split(r"\s{3,}# ", raw, maxsplit=1)[0].rstrip()
            if text.startswith("> "):
                cur = (shlex.split(text[2:]), [])
                steps.append(cur)
            elif cur is not None and text:
                cur[1].append(text)
        out.append((line, steps))
    return out


def render(reply, indent=0):
    """redis-cli's way of printing a RESP2 reply."""
    if isinstance(reply, redis.ResponseError):
        # redis-py drops the generic "ERR " prefix; other codes it keeps.
        text = str(reply)
        code = text.split(" ", 1)[0]
        return [f"(error) {text}" if code.isupper() and code.isalpha() else f"(error) ERR {text}"]
    if reply is None:
        return ["(nil)"]
    if isinstance(reply, int):
        return [f"(integer) {reply}"]
    if reply in (b"OK", b"WAITING"):  # status replies (redis-py reads them as bytes)
        return [reply.decode()]
    if isinstance(reply, bytes):
        return ['"' + reply.decode(errors="replace").replace('"', '\\"') + '"']
    if isinstance(reply, list):
        if not reply:
            return ["(empty array)"]
        width = len(str(len(reply)))
        lines = []
        for i, item in enumerate(reply, 1):
            prefix = f"{i:>{width}}) "
            sub = render(item, indent + len(prefix))
            lines.append(prefix + sub[0])
            lines.extend(" " * len(prefix) + s for s in sub[1:])
        return lines
    return [str(reply)]


def shape(lines):
    """What must match: integers by kind, errors by class; in strings (a
    mailbox element), numbers of ten digits or more are fences."""
    out = []
    for ln in lines:
        ln = re.sub(r"\(integer\) -?\d+", "(integer) N", ln)
        ln = re.sub(r"(?<=[ ,])\d{10,}(?=[,\"])", "F", ln)
        ln = re.sub(r"\(error\) (\S+).*", r"(error) \1", ln)
        out.append(ln.strip())
    return out


def run(port, markdown, check=True):
    """Runs every session of `markdown` in order on one connection; returns
    [(block line, command, expected, actual)] for the replies that differ
    (all of them when check is False)."""
    conn = redis.Connection(port=port, socket_timeout=30)
    diffs = []
    try:
        for line, steps in sessions(markdown):
            for args, expected in steps:
                conn.send_command(*args)
                try:
                    reply = conn.read_response()
                except redis.ResponseError as e:
                    reply = e
                actual = render(reply)
                if not check or shape(actual) != shape(expected):
                    diffs.append((line, " ".join(args), expected, actual))
    finally:
        conn.disconnect()
    return diffs


def main():
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1]))  # scripts/: harness
    from harness import Server
    for path in sys.argv[1:]:
        srv = Server()
        try:
            for line, cmd, _, actual in run(srv.port, open(path).read(), check=False):
                print(f"{path}:{line}\n> {cmd}")
                print("\n".join(actual))
        finally:
            srv.stop()


if __name__ == "__main__":
    main()
