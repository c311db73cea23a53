"""The docs' command lines, written from COMMAND DOCS: every `### NAME ...`
heading of docs/commands.md gets the syntax line the server's docs give (the
same line the command rows in src/glue/commands generate them from), and the
README's table of commands (between `<!-- commands:start -->` and
`<!-- commands:end -->`) gets each command's line and summary, linking to
its heading. No command line is typed twice.

    python scripts/docs/reference.py          # rewrites both in place
    python scripts/docs/reference.py --check  # exit 1 when either differs
"""

import re
import sys

import redis

import pathlib
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # scripts/: harness, faultproxy
from harness import ROOT, Server

DOC = ROOT / "docs" / "commands.md"
README = ROOT / "README.md"
START, END = "<!-- commands:start -->", "<!-- commands:end -->"
HEADING = re.compile(r"^### ((?:LOCK|SEM|RWLOCK)\.[A-Z]+)\b.*$", re.M)


def text(v):
    return v.decode() if isinstance(v, bytes) else v


def as_dict(flat):
    if isinstance(flat, dict):
        return {text(k): v for k, v in flat.items()}
    return {text(flat[i]): flat[i + 1] for i in range(0, len(flat), 2)}


def render(args):
    """A command's COMMAND DOCS arguments as a syntax line."""
    out = []
    for raw in args:
        a = as_dict(raw)
        kind, name = text(a["type"]), text(a["name"])
        flags = [text(f) for f in a.get("flags", [])]
        token = text(a["token"]) if "token" in a else None
        if kind == "pure-token":
            body = token
        elif kind == "oneof":
            body = "|".join(text(as_dict(c)["token"]) for c in a["arguments"])
        elif kind == "block":
            body = f"{token} {render(a['arguments'])}"
        else:
            body = f"{token} {name}" if token else name
        if "multiple" in flags:
            body = f"{body} [{name} ...]"
        out.append(f"[{body}]" if "optional" in flags else body)
    return " ".join(out)


def raw(port, *args):
    c = redis.Connection(port=port)
    try:
        c.send_command(*args)
        return c.read_response()
    finally:
        c.disconnect()


def command_docs(port):
    """{COMMAND: (syntax line, summary)} for every client-facing command."""
    names = [text(n) for n in raw(port, "COMMAND", "LIST", "FILTERBY", "MODULE", "padlock")]
    out = {}
    for name in names:
        if name.startswith("padlock."):
            continue
        docs = as_dict(raw(port, "COMMAND", "DOCS", name)[1])
        line = f"{name.upper()} {render(docs.get('arguments', []))}".rstrip()
        out[name.upper()] = (line, text(docs["summary"]))
    return out


def syntax_lines(port):
    return {name: line for name, (line, _) in command_docs(port).items()}


def rewrite(markdown, lines):
    return HEADING.sub(lambda m: "### " + lines.get(m.group(1), m.group(0)[4:]), markdown)


def anchor(heading):
    """The anchor GitHub gives a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def table(doc, docs):
    """The README's table: the commands in the reference's order."""
    rows = ["| command | what it does |", "| --- | --- |"]
    for name in HEADING.findall(doc):
        line, summary = docs[name]
        rows.append(f"| [`{line}`](docs/commands.md#{anchor(line)}) | {summary} |")
    return "\n".join(rows)


def with_table(readme, doc, docs):
    a, b = readme.index(START) + len(START), readme.index(END)
    return readme[:a] + "\n" + table(doc, docs) + "\n" + readme[b:]


def main():
    srv = Server()
    try:
        docs = command_docs(srv.port)
    finally:
        srv.stop()
    lines = {name: line for name, (line, _) in docs.items()}
    old, readme = DOC.read_text(), README.read_text()
    new = rewrite(old, lines)
    new_readme = with_table(readme, new, docs)
    missing = sorted(set(lines) - set(HEADING.findall(new)))
    if "--check" in sys.argv:
        if new != old or new_readme != readme or missing:
            print("headings or the README's table differ from COMMAND DOCS; missing:", missing)
            return 1
        return 0
    DOC.write_text(new)
    README.write_text(new_readme)
    if missing:
        print("no heading for:", ", ".join(missing))
    return 0


if __name__ == "__main__":
    sys.exit(main())
