"""The docs' examples run: every `redis` session in README.md and
docs/commands.md, in order on one connection to a fresh server, replies
compared by shape (scripts/docs/examples.py); and docs/commands.md's headings
are the syntax lines COMMAND DOCS gives (scripts/docs/reference.py)."""

import pathlib

import pytest

import examples
import reference

ROOT = pathlib.Path(__file__).resolve().parent.parent
FILES = ["README.md", "docs/commands.md"]


@pytest.mark.parametrize("name", FILES)
def test_example_sessions_run_as_written(server, name):
    text = (ROOT / name).read_text()
    sessions = examples.sessions(text)
    assert sum(len(steps) for _, steps in sessions) >= (3 if name == "README.md" else 40)
    diffs = examples.run(server.port, text)
    report = "\n".join(f"{name}:{line} > {cmd}\n  written: {want}\n  server:  {got}"
                       for line, cmd, want, got in diffs)
    assert not diffs, report


def test_reference_headings_and_readme_table_come_from_command_docs(server):
    docs = reference.command_docs(server.port)
    lines = {name: line for name, (line, _) in docs.items()}
    doc = reference.DOC.read_text()
    assert reference.rewrite(doc, lines) == doc, "run scripts/docs/reference.py"
    assert sorted(set(reference.HEADING.findall(doc))) == sorted(lines), "a command without a heading"
    readme = reference.README.read_text()
    assert reference.with_table(readme, doc, docs) == readme, "run scripts/docs/reference.py"


def test_shapes_catch_a_drift():
    """The comparison is not vacuous: another field name, a missing reply
    line, another error class or a nil for an integer all differ."""
    base = ['1) "count"', "2) (integer) 2"]
    assert examples.shape(base) == examples.shape(['1) "count"', "2) (integer) 99"])
    for drifted in (['1) "fence"', "2) (integer) 2"], ['1) "count"'], ['1) "count"', "2) (nil)"]):
        assert examples.shape(drifted) != examples.shape(base)
    assert examples.shape(["(error) NOTHELD x"]) != examples.shape(["(error) ERR x"])
