"""Writes `src/padlock/sync.py` from `src/padlock/aio.py`: the Python client
has one source, and the blocking flavour is the asyncio one without
`async`/`await`.

What the two flavours do differently (time, locks, the watcher, the
connections) lives in `_ashared` and `_shared` under the same names, and
`aio.py` reaches it as `rt`; the rest is one text. The rules:

- `async def`/`async with`/`async for` lose `async`, `await ` goes,
  `__aenter__`/`__aexit__` become `__enter__`/`__exit__`, and `_ashared`
  becomes `_shared` (in comments and docstrings too: they read right in
  both);
- a line ending in `# aio` is left out, and so is a block between
  `# aio {` and `# aio }` (the asyncio module docstring, `cancel_on_loss`);
- a comment line `#sync| text` becomes `text` (the blocking docstring).

`sync.py` is not kept in git: `python unasync.py` writes it, and runs
wherever it is needed — `scripts/deps.sh --python` (before every `make`
target that uses the client) and `setup.py` (any `pip install`, editable
or not, and every wheel). `--check` only says whether the file is current.
"""

from __future__ import annotations

import pathlib
import re
import sys

HERE = pathlib.Path(__file__).resolve().parent
SOURCE = HERE / "src" / "padlock" / "aio.py"
TARGET = HERE / "src" / "padlock" / "sync.py"

#: Applied in order, to whole words only.
TOKENS = [
    (r"\basync def ", "def "),
    (r"\basync with ", "with "),
    (r"\basync for ", "for "),
    (r"\bawait ", ""),
    (r"\b__aenter__\b", "__enter__"),
    (r"\b__aexit__\b", "__exit__"),
    (r"\b_ashared\b", "_shared"),
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
    want = convert(SOURCE.read_text())
    if "--check" in argv:
        if not TARGET.exists() or TARGET.read_text() != want:
            print(f"{TARGET} is not what {HERE / 'unasync.py'} writes from aio.py: run it", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(want)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
