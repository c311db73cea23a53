#!/usr/bin/env python3
"""Checks the source layout rules over both crates (the module in src/,
padlock-core in core/src/, seen as one tree where the module's
`crate::core::` is the core crate): no two files depend on each other in a
circle (through `use`, `super::`/`crate::` paths), no file is much over 400
lines, and the core has no Redis dependency and no unsafe code. Client
library sources are held to the same rule (at most 450 lines), and the
map in docs/design.md ("Where things live") must name every file and
directory directly in core/src/ and src/glue/, and nothing that is not
there. A file
depends on another when it names an item path that resolves into it; `mod
x;` declarations (a parent listing its children) do not count, a child
using its parent's items does. Exits 1 and names the circle or the file
when a rule breaks."""

import pathlib
import re
import sys

TOP = pathlib.Path(__file__).resolve().parents[2]
ROOT = TOP / "src"
CORE = TOP / "core" / "src"
MAX_LINES = 420
CLIENT_MAX_LINES = 450
CLIENT_SOURCES = [
    ("clients/python/src", "*.py"),
    ("clients/typescript/src", "*.ts"),
    ("clients/java/src/main", "*.java"),
    ("clients/java/src/main", "*.kt"),
    ("clients/go", "*.go"),
]
#: Written from another file at install time, not kept in git.
GENERATED = {"clients/python/src/padlock/sync.py", "clients/python/src/padlock/_sync_hold.py",
             "clients/python/src/padlock/_sync_watch.py"}


def module_of(path):
    base, prefix = (CORE, ["core"]) if CORE in path.parents else (ROOT, [])
    rel = path.relative_to(base).with_suffix("")
    parts = prefix + list(rel.parts)
    if parts[-1] in ("mod", "lib"):
        parts = parts[:-1]
    return tuple(parts)


def core_is_pure():
    manifest = (TOP / "core" / "Cargo.toml").read_text()
    if "redis" in manifest.split("[dependencies]")[-1] if "[dependencies]" in manifest else False:
        print("core/Cargo.toml depends on a Redis crate")
        return False
    lib = (CORE / "lib.rs").read_text()
    if "#![forbid(unsafe_code)]" not in lib:
        print("core/src/lib.rs must forbid unsafe code")
        return False
    for p in CORE.rglob("*.rs"):
        if "redis_module" in p.read_text():
            print(f"{p.relative_to(TOP)} names redis_module")
            return False
    return True


def clients_fit():
    ok = True
    for base, pattern in CLIENT_SOURCES:
        for p in sorted((TOP / base).rglob(pattern)):
            rel = str(p.relative_to(TOP))
            if rel in GENERATED:
                continue
            n = len(p.read_text().splitlines())
            if n > CLIENT_MAX_LINES:
                print(f"{rel} has {n} lines (at most {CLIENT_MAX_LINES})")
                ok = False
    return ok


def map_matches():
    """The code block under "Where things live" in docs/design.md."""
    text = (TOP / "docs" / "design.md").read_text()
    try:
        block = text.split("## Where things live", 1)[1].split("```", 2)[1]
    except IndexError:
        print("docs/design.md has no map under \"## Where things live\"")
        return False
    words = set(re.findall(r"[A-Za-z0-9_.-]+/?", block))
    ok = True
    for base in (CORE, ROOT / "glue"):
        for p in sorted(base.iterdir()):
            name = p.name + ("/" if p.is_dir() else "")
            if name in ("lib.rs", "mod.rs"):
                continue
            if name not in words:
                print(f"docs/design.md's map does not name {p.relative_to(TOP)}")
                ok = False
    names = {p.name for p in TOP.rglob("*") if ".git" not in p.parts and "target" not in p.parts
             and "node_modules" not in p.parts}
    for w in sorted(words):
        if (w.endswith(".rs") or w.endswith("/")) and w.rstrip("/") not in names:
            print(f"docs/design.md's map names {w}, which is not in the tree")
            ok = False
    return ok


def main():
    if not core_is_pure():
        return 1
    if not clients_fit() or not map_matches():
        return 1
    files = {module_of(p): p for p in list(ROOT.rglob("*.rs")) + list(CORE.rglob("*.rs"))}
    deps = {m: set() for m in files}
    path_re = re.compile(r"\b((?:crate|super|self)(?:::[A-Za-z_][A-Za-z0-9_]*|::\{)+)")
    for mod, path in files.items():
        text = path.read_text()
        # Test modules may use anything of their parent.
        text = text.split("#[cfg(test)]\nmod tests {")[0]
        for m in path_re.finditer(text):
            segs = m.group(1).rstrip(":{").split("::")
            if segs[0] == "crate":
                cur, segs = (["core"] if mod[:1] == ("core",) else []), segs[1:]
            elif segs[0] == "self":
                cur, segs = list(mod), segs[1:]
            else:
                cur = list(mod)
                while segs and segs[0] == "super":
                    cur = cur[:-1] if cur else cur
                    segs = segs[1:]
            # The longest prefix that is a file.
            target = None
            probe = list(cur)
            if tuple(probe) in files:
                target = tuple(probe)
            for s in segs:
                probe.append(s)
                if tuple(probe) in files:
                    target = tuple(probe)
                else:
                    break
            if target and target != mod:
                deps[mod].add(target)
    # Find a cycle (DFS).
    state, stack = {}, []

    def visit(m):
        state[m] = 1
        stack.append(m)
        for d in sorted(deps[m]):
            if state.get(d) == 1:
                return stack[stack.index(d):] + [d]
            if d not in state:
                c = visit(d)
                if c:
                    return c
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(deps):
        if m not in state:
            cycle = visit(m)
            if cycle:
                print("import circle: " + " -> ".join("/".join(c) or "lib" for c in cycle))
                return 1
    long = [(p, n) for p in files.values() if (n := len(p.read_text().splitlines())) > MAX_LINES]
    for p, n in long:
        print(f"{p.relative_to(TOP)} has {n} lines (at most {MAX_LINES})")
    if long:
        return 1
    edges = sum(len(v) for v in deps.values())
    print(f"structure ok: {len(files)} files, {edges} dependencies, no circle, none over {MAX_LINES} lines;"
          f" client sources within {CLIENT_MAX_LINES}; docs/design.md's map matches the tree")
    return 0


if __name__ == "__main__":
    sys.exit(main())
