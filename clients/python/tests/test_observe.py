"""LOCK.TOP wrappers, `python -m padlock top` run in tmux as a person would
(its screen read back with capture-pane, quit with q), and `graph` drawn
with Graphviz: a deadlock's cycle in red, the picture with every node."""

import os
import pathlib
import re
import shutil
import subprocess
import sys
import threading
import time

import pytest

import padlock
import padlock.aio
from conftest import redis, wait_for


def contend(server, key, waiters):
    """`waiters` blocked LOCK.ACQUIREs on `key` (held by "owner")."""
    r = server.client()
    r.execute_command("LOCK.ACQUIRE", key, "owner", 60000)
    conns = []
    for i in range(waiters):
        c = server.client(socket_timeout=30)
        conns.append(c)
        threading.Thread(
            target=lambda c=c, i=i: _quiet(c.execute_command, "LOCK.ACQUIRE", key, f"{key}-w{i}", 60000, "BLOCK", 20000),
            daemon=True).start()
    return conns


def _quiet(f, *a):
    try:
        f(*a)
    except Exception:  # noqa: BLE001 - the waiters are killed at the end
        pass


def blocked(r):
    return int(r.info("padlock")["padlock_blocked_clients"])


def test_top_wrappers(server, r):
    contend(server, "hot", 3)
    contend(server, "warm", 1)
    assert wait_for(lambda: blocked(r) == 4)
    rows = padlock.top(r)
    assert [(h.key, h.kind, h.waiters, h.holders) for h in rows] == [("hot", "lock", 3, 1), ("warm", "lock", 1, 1)]
    assert rows[0].oldest_wait_ms >= 0
    assert padlock.top(r, count=1) == rows[:1] or padlock.top(r, count=1)[0].key == "hot"

    async def aio():
        c = redis.asyncio.Redis(port=server.port)
        try:
            return await padlock.aio.top(c, count=1)
        finally:
            await c.aclose()

    import asyncio
    assert [h.key for h in asyncio.run(aio())] == ["hot"]
    r.execute_command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")


def tmux(*args):
    return subprocess.run(["tmux", *args], capture_output=True, text=True)


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_top_in_tmux(server, r, tmp_path):
    contend(server, "orders:1001", 5)
    contend(server, "orders:7", 2)
    assert wait_for(lambda: blocked(r) == 7)
    session = f"padlock-top-{os.getpid()}"
    sock = str(tmp_path / "tmux.sock")
    env = f"PYTHONPATH={pathlib.Path(padlock.__file__).parent.parent}"
    cmd = f"{env} {sys.executable} -m padlock --url redis://127.0.0.1:{server.port} top"
    assert tmux("-S", sock, "new-session", "-d", "-s", session, "-x", "120", "-y", "30", cmd).returncode == 0
    try:
        def screen():
            return tmux("-S", sock, "capture-pane", "-p", "-t", session).stdout

        assert wait_for(lambda: "orders:1001" in screen(), timeout=15), screen()
        text = screen()
        lines = [l for l in text.splitlines() if "orders:" in l]
        assert "orders:1001" in lines[0] and "orders:7" in lines[1], text
        cells = lines[0].replace("│", " ").split()
        assert cells[:4] == ["orders:1001", "lock", "1", "5"], cells
        assert "blocked 7" in text
        # One more waiter: the next refresh shows it.
        contend_more = server.client(socket_timeout=30)
        threading.Thread(target=lambda: _quiet(contend_more.execute_command, "LOCK.ACQUIRE", "orders:7",
                                               "late", 60000, "BLOCK", 20000), daemon=True).start()
        assert wait_for(lambda: "blocked 8" in screen(), timeout=5), screen()
        tmux("-S", sock, "send-keys", "-t", session, "q")
        assert wait_for(lambda: tmux("-S", sock, "has-session", "-t", session).returncode != 0, timeout=5), \
            "q did not quit"
    finally:
        tmux("-S", sock, "kill-server")
        r.execute_command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")


def test_graph_marks_cycles(server, r):
    r.execute_command("LOCK.ACQUIRE", "k1", "a", 60000)
    r.execute_command("LOCK.ACQUIRE", "k2", "b", 60000)
    assert r.execute_command("LOCK.WAITFOR", "k2", "a", 60000) == 1
    with pytest.raises(redis.ResponseError, match="DEADLOCK"):
        r.execute_command("LOCK.WAITFOR", "k1", "b", 60000)
    edges = padlock.graph(r)
    assert [(e.waiter, e.key, e.holders) for e in edges] == [("a", "k2", ("b",))]
    # The server refuses the edge that would close the cycle; a graph
    # gathered from two shards, or a moment apart, can still show one.
    dot = padlock.to_dot(edges + [padlock.Edge("b", "k1", ("a",), 500)], {"k2": 5000}, 1000)
    red = [l for l in dot.splitlines() if "color=red" in l]
    assert any('"a" -> "key:k2"' in l for l in red) and any('"b" -> "key:k1"' in l for l in red), dot
    assert any("fillcolor=orange" in l and "k2" in l for l in dot.splitlines())
    assert padlock.to_dot([padlock.Edge("c", "k9", ("d",), -1)]).count("color=red") == 0


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz (dot) is not installed")
def test_graph_cli_draws_png_and_svg(server, r, tmp_path):
    r.execute_command("LOCK.ACQUIRE", "orders:1", "worker-a", 60000)
    r.execute_command("LOCK.ACQUIRE", "orders:2", "worker-b", 60000)
    c = server.client(socket_timeout=30)
    threading.Thread(target=lambda: _quiet(c.execute_command, "LOCK.ACQUIRE", "orders:2", "worker-a", 60000,
                                           "BLOCK", 20000), daemon=True).start()
    assert wait_for(lambda: blocked(r) == 1)
    svg, png = tmp_path / "g.svg", tmp_path / "g.png"
    out = subprocess.run([sys.executable, "-m", "padlock", "--url", f"redis://127.0.0.1:{server.port}",
                          "graph", "--svg", str(svg), "--png", str(png), "--long-wait-ms", "0"],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    import html
    titles = {html.unescape(t) for t in re.findall(r"<title>([^<]*)</title>", svg.read_text())}
    assert {"worker-a", "key:orders:2", "worker-b", "worker-a->key:orders:2"} <= titles, titles
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 1000
    keep = os.environ.get("PADLOCK_GRAPH_PNG")
    if keep:
        shutil.copy(png, keep)
    r.execute_command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")


def test_top_without_a_terminal_draws_its_frames_and_ends(server, r):
    """Piped (no terminal): `--frames n` draws n refreshes and exits; an
    empty stdin is not taken for q."""
    contend(server, "piped", 1)
    assert wait_for(lambda: blocked(r) == 1)
    url = f"redis://127.0.0.1:{server.port}"
    # `--url` before the subcommand, and after it, as the guide writes it.
    for argv in (["--url", url, "top"], ["top", "--url", url]):
        out = subprocess.run([sys.executable, "-m", "padlock", *argv, "--frames", "2", "--interval", "0.1"],
                             stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30)
        assert out.returncode == 0, out.stderr
        assert "piped" in out.stdout and "blocked 1" in out.stdout
    r.execute_command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
