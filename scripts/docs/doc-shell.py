"""The shell recipes of a doc section, as `make test-container` runs them.

    python scripts/docs/doc-shell.py FILE.md "HEADING" PORT

Prints, one per line, the commands of every ```sh block under the heading
(up to the next heading of its level or above), continuation lines joined,
comments dropped: exactly what the docs say, with one change a test on
this machine must make. A test may use no fixed port and the private
Docker daemon has no bridge, so `-p HOST:6379:6379` becomes `--network
host` plus `--port PORT --bind 127.0.0.1` after the image's arguments,
and `redis-cli` talks to PORT. A bare `redis-cli` (an interactive session)
becomes `run-session`: the section's ```redis session, which the caller
runs with scripts/docs/examples.py.
"""

import re
import shlex
import sys

PUBLISH = re.compile(r"\s-p\s+(?:127\.0\.0\.1:)?6379:6379\b")


def section(markdown, heading):
    lines = markdown.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"^(#+)\s+(.*)$", line)
        if m and m.group(2).strip() == heading:
            level = len(m.group(1))
            out = []
            for rest in lines[i + 1:]:
                n = re.match(r"^(#+)\s", rest)
                if n and len(n.group(1)) <= level:
                    break
                out.append(rest)
            return "\n".join(out)
    raise SystemExit(f"doc-shell: no heading {heading!r}")


def commands(text):
    for block in re.findall(r"^```sh\n(.*?)^```", text, re.M | re.S):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            line = re.split(r"\s+#\s", line, maxsplit=1)[0].strip()
            if line and not line.startswith("#"):
                yield line


def rewrite(cmd, port):
    words = shlex.split(cmd)
    if words[:2] == ["docker", "run"] and PUBLISH.search(cmd):
        return PUBLISH.sub(" --network host", cmd) + f" --port {port} --bind 127.0.0.1"
    if words and words[0] == "redis-cli":
        if len(words) == 1:
            return "run-session"
        return f"redis-cli -p {port} " + cmd[len("redis-cli"):].strip()
    return cmd


def main():
    path, heading, port = sys.argv[1:4]
    for cmd in commands(section(open(path).read(), heading)):
        print(rewrite(cmd, port))


if __name__ == "__main__":
    main()
