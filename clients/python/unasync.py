"""Writes the blocking client from the asyncio one: `sync.py` from
`aio.py`, `_sync_hold.py` from `_async_hold.py` and `_sync_watch.py` from
`_async_watch.py` (all in `src/padlock/`). The Python client has one
source, and the blocking flavour is the asyncio one without
`async`/`await`.

What the two flavours do differently (time, locks, the watcher, the
connections) lives in `_asyncio_runtime`/`_thread_runtime` and
`_asyncio_mail`/`_thread_mail` under the same names, reached as `rt` and
`mail`; the rest is one text. The rules:

- `async def`/`async with`/`async for` lose `async`, `await ` goes,
  `__aenter__`/`__aexit__` become `__enter__`/`__exit__`, and each
  asyncio module's name becomes its blocking twin's (in comments and
  docstrings too: they read right in both);
- a line ending in `# aio` is left out, and so is a block between
  `# aio {` and `# aio }` (the asyncio module docstring, `cancel_on_loss`);
- a comment line `#sync| text` becomes `text` (the blocking docstring).

The written files are not kept in git: `python unasync.py` writes them, and runs
wherever it is needed — `scripts/deps.sh --python` (before every `make`
target that uses the client) and `setup.py` (any `pip install`, editable
or not, and every wheel). `--check` only says whether they are current.
"""

from __future__ import annotations

import pathlib
import re
import sys

HERE = pathlib.Path(__file__).resolve().parent
PACKAGE = HERE / "src" / "padlock"
#: Each asyncio source and the blocking file written from it.
PAIRS = [("aio.py", "sync.py"), ("_async_hold.py", "_sync_hold.py"),
         ("_async_watch.py", "_sync_watch.py")]

#: Applied in order, to whole words only.
TOKENS = [
    (r"\basync def ", "def "),
    (r"\basync with ", "with "),
    (r"\basync for ", "for "),
    (r"\bawait ", ""),
    (r"\b__aenter__\b", "__enter__"),
    (r"\b__aexit__\b", "__exit__"),
    (r"\b_asyncio_runtime\b", "_thread_runtime"),
    (r"\b_asyncio_mail\b", "_thread_mail"),
    (r"\b_async_hold\b", "_sync_hold"),
    (r"\b_async_watch\b", "_sync_watch"),
]


def convert(text: str) -> str:
    out: list[str] = []
    skipping = False
    for n, line in enumerate(text.splitlines(), 1):
        mark = line.strip()
        if mark == "# aio {":
            if skipping:
                raise SystemExit(f"aio.py:{n}: `# aio {{` inside another")
            skipping = True
            continue
        if mark == "# aio }":
            if not skipping:
                raise SystemExit(f"aio.py:{n}: `# aio }}` without `# aio {{`")
            skipping = False
            continue
        if skipping or re.search(r"\s# aio$", line):
            continue
        if mark.startswith("#sync|"):
            indent = line[: len(line) - len(line.lstrip())]
            body = mark[len("#sync|"):]
            out.append((indent + body[1:] if body.startswith(" ") else indent + body).rstrip())
            continue
        for pattern, repl in TOKENS:
            line = re.sub(pattern, repl, line)
        if re.search(r"\b(async|await)\b", line):
            # What the rules cannot turn (a phrase broken across lines in a
            # docstring): reword it in aio.py.
            raise SystemExit(f"aio.py:{n}: `async`/`await` left in the blocking text: {line.strip()}")
        out.append(line)
    if skipping:
        raise SystemExit("aio.py: `# aio {` never closed")
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    stale = 0
    for source, target in PAIRS:
        want = convert((PACKAGE / source).read_text())
        path = PACKAGE / target
        if "--check" in argv:
            if not path.exists() or path.read_text() != want:
                print(f"{path} is not what {HERE / 'unasync.py'} writes from {source}: run it",
                      file=sys.stderr)
                stale = 1
        else:
            path.write_text(want)
    return stale


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
