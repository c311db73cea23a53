"""`python -m padlock top` (a live view of the hottest keys) and
`python -m padlock graph --svg FILE` (the wait-for graph drawn with
Graphviz). Of one server: in a cluster, point it at each master."""

from __future__ import annotations

import argparse
import contextlib
import os
import select
import shutil
import subprocess
import sys
import time
from typing import Any, Iterator, Optional, Sequence

import redis

from ._common import Hot, parse_graph, parse_top, to_dot

KINDS = ("lock", "sem", "rwlock")


def wait_p99_ms(info: dict[str, Any]) -> dict[str, float]:
    """Each kind's wait p99 (ms) from `INFO padlock`."""
    out: dict[str, float] = {}
    for kind in KINDS:
        line = info.get(f"padlock_wait_percentiles_usec_{kind}")
        if isinstance(line, dict):  # redis-py parses "p50=1,p99=2" itself
            out[kind] = float(line.get("p99", 0)) / 1000
        elif isinstance(line, str):
            parts = dict(p.split("=", 1) for p in line.split(","))
            out[kind] = float(parts.get("p99", 0)) / 1000
    return out


def screen(client: Any, count: int) -> Any:
    """One frame of `top`: a rich renderable."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    rows: list[Hot] = parse_top(client.execute_command("LOCK.TOP", "COUNT", count))
    info = client.info("padlock")
    p99 = wait_p99_ms(info)
    table = Table(title="padlock top — keys with the most waiters", expand=True)
    for name, justify in (("key", "left"), ("kind", "left"), ("holders", "right"),
                          ("waiters", "right"), ("oldest wait", "right"), ("wait p99 (kind)", "right")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for h in rows:
        table.add_row(h.key, h.kind, str(h.holders), str(h.waiters),
                      f"{h.oldest_wait_ms} ms", f"{p99.get(h.kind, 0):.1f} ms")
    summary = Text(
        f"blocked {info.get('padlock_blocked_clients', 0)}  "
        f"handoffs {info.get('padlock_handoffs', 0)}  "
        f"deadlocks {info.get('padlock_deadlocks', 0)}  "
        f"timeouts {info.get('padlock_timeouts', 0)}  "
        f"held locks {info.get('padlock_locks', 0)}  — q quits"
    )
    if not rows:
        summary.append("\nno key has waiters")
    return Group(table, summary)


@contextlib.contextmanager
def keys_unbuffered() -> Iterator[None]:
    """Single key presses, without echo, while it runs (when a terminal)."""
    if not sys.stdin.isatty():
        yield
        return
    import termios
    import tty

    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    try:
        tty.setcbreak(fd)
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def quit_pressed(timeout: float) -> bool:
    """Waits up to `timeout` s for a key; True for q (or the terminal
    closing). Without a terminal (output piped, `--frames`), just waits."""
    if not sys.stdin.isatty():
        time.sleep(timeout)
        return False
    ready, _, _ = select.select([sys.stdin], [], [], timeout)
    if not ready:
        return False
    ch = os.read(sys.stdin.fileno(), 1)
    return ch in (b"q", b"Q", b"")


def top(client: Any, count: int, interval: float, frames: Optional[int]) -> None:
    from rich.live import Live

    shown = 0
    with keys_unbuffered(), Live(screen(client, count), auto_refresh=False, screen=False) as live:
        while frames is None or shown < frames:
            if quit_pressed(interval):
                return
            live.update(screen(client, count), refresh=True)
            shown += 1


def graph(client: Any, svg: Optional[str], png: Optional[str], long_wait_ms: int) -> str:
    edges = parse_graph(client.execute_command("LOCK.GRAPH"))
    waited = {h.key: h.oldest_wait_ms for h in parse_top(client.execute_command("LOCK.TOP", "COUNT", 1000))}
    dot = to_dot(edges, waited, long_wait_ms)
    for path, fmt in ((svg, "svg"), (png, "png")):
        if path:
            if shutil.which("dot") is None:
                raise SystemExit("graph: Graphviz's `dot` is not installed (Debian: apt-get install graphviz)")
            subprocess.run(["dot", f"-T{fmt}", "-o", path], input=dot.encode(), check=True)
    return dot


def main(argv: Optional[Sequence[str]] = None) -> int:
    default_url = os.environ.get("PADLOCK_URL", "redis://127.0.0.1:6379")
    # `--url` before or after the subcommand: both read as the guide says.
    url = argparse.ArgumentParser(add_help=False)
    url.add_argument("--url", default=argparse.SUPPRESS,
                     help="the server (default $PADLOCK_URL or redis://127.0.0.1:6379)")
    p = argparse.ArgumentParser(prog="python -m padlock", description=__doc__, parents=[url])
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("top", parents=[url], help="the hottest keys, refreshed every second; q quits")
    t.add_argument("--count", type=int, default=20)
    t.add_argument("--interval", type=float, default=1.0)
    t.add_argument("--frames", type=int, default=None, help="stop after this many refreshes")
    g = sub.add_parser("graph", parents=[url], help="LOCK.GRAPH drawn with Graphviz (DOT on stdout)")
    g.add_argument("--svg", help="write an SVG here")
    g.add_argument("--png", help="write a PNG here")
    g.add_argument("--long-wait-ms", type=int, default=1000,
                   help="keys whose oldest waiter waited this long are filled orange")
    args = p.parse_args(argv)
    client: Any = redis.Redis.from_url(getattr(args, "url", default_url), decode_responses=True)
    if args.cmd == "top":
        try:
            top(client, args.count, args.interval, args.frames)
        except KeyboardInterrupt:
            pass
    else:
        dot = graph(client, args.svg, args.png, args.long_wait_ms)
        if not (args.svg or args.png):
            print(dot)
    return 0

