"""deploy/: Debian's prometheus-redis-exporter, run with
deploy/padlock-metrics.lua against a server with contention, scraped on
loopback: every INFO padlock field arrives with its value, the percentiles
and the hottest keys included; every series the Grafana dashboard queries is
in that scrape."""

import json
import pathlib
import re
import shutil
import subprocess
import sys
import time
import urllib.request

import pytest

from conftest import Background, free_port, wait_blocked, wait_for

DEPLOY = pathlib.Path(__file__).resolve().parent.parent / "deploy"
EXPORTER = shutil.which("prometheus-redis-exporter") or shutil.which("redis_exporter")

pytestmark = pytest.mark.skipif(
    EXPORTER is None,
    reason="prometheus-redis-exporter is not installed (Debian: apt-get install prometheus-redis-exporter)")


def scrape(url):
    with urllib.request.urlopen(url, timeout=5) as f:
        text = f.read().decode()
    out = {}
    for m in re.finditer(r'^redis_script_values\{key="([^"]*)"\} (\S+)$', text, re.M):
        out[m.group(1)] = float(m.group(2))
    return out


@pytest.fixture
def exported(server, r):
    """A server with a hold that ended, a wait that was granted and two
    waiters queued on one key, with the exporter in front of it."""
    r.execute_command("LOCK.ACQUIRE", "orders:1", "a", 60000)
    granted = Background(server, "LOCK.ACQUIRE", "orders:1", "b", 60000, "BLOCK", 5000)
    wait_blocked(r, 1)
    time.sleep(0.03)
    r.execute_command("LOCK.RELEASE", "orders:1", "a")
    assert granted.result() > 0
    for h in ("c", "d"):
        Background(server, "LOCK.ACQUIRE", "orders:1", h, 60000, "BLOCK", 20000)
    wait_blocked(r, 2)
    port = free_port()
    proc = subprocess.Popen(
        [EXPORTER, "-redis.addr", f"redis://127.0.0.1:{server.port}",
         "-script", str(DEPLOY / "padlock-metrics.lua"),
         "-web.listen-address", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        assert wait_for(lambda: _up(url), timeout=10), "the exporter did not answer"
        yield scrape(url)
    finally:
        proc.terminate()
        proc.wait(5)
        r.execute_command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")


def _up(url):
    try:
        return bool(scrape(url))
    except OSError:
        return False


def test_every_info_field_is_scraped(r, exported):
    info = r.info("padlock")
    for name, value in info.items():
        if "_percentiles_usec_" in name:
            for q in ("p50", "p99", "p99_9"):
                assert f"{name}_{q}" in exported, name
        elif "_buckets_usec_" in name:
            # redis-py reads `le_1000=0,...,count=0` as a dict.
            for b, v in value.items():
                assert exported.get(f"{name}_{b}") == float(v), (name, b)
        elif name not in ("padlock_blocked_clients", "padlock_wait_edges", "padlock_wait_edges_declared", "padlock_wait_edges_blocked"):
            assert exported.get(name) == float(value), (name, exported.get(name), value)
    assert exported["padlock_blocked_clients"] == 2
    assert exported["padlock_handoffs"] == 1
    assert 20_000 <= exported["padlock_wait_percentiles_usec_lock_p50"] <= 1_000_000
    assert 20_000 <= exported["padlock_hold_percentiles_usec_lock_p99"] <= 1_000_000
    assert exported["padlock_top1_waiters"] == 2
    assert exported["padlock_top1_oldest_wait_ms"] >= 0
    assert exported["padlock_top1_holders"] == 1
    assert not any(":" in k for k in exported), "no series named after a key"
    # One granted wait of 30 ms or more: counted from the 100 ms bucket up.
    assert exported["padlock_wait_buckets_usec_lock_count"] == 1
    assert exported["padlock_wait_buckets_usec_lock_le_100000"] == 1
    assert exported["padlock_wait_buckets_usec_lock_le_1000"] == 0


def test_dashboard_queries_exist_in_the_scrape(exported):
    dash = json.loads((DEPLOY / "grafana" / "padlock-dashboard.json").read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    titles = " ".join(p["title"].lower() for p in dash["panels"])
    for topic in ("wait p99", "hold p99", "waiters", "hot keys", "deadlocks", "expiries while held", "evicted"):
        assert topic in titles, topic
    matchers = [m for e in exprs for m in re.findall(r'key(=~?)"([^"]+)"', e)]
    assert len(matchers) >= 10
    for op, pattern in matchers:
        if op == "=":
            assert pattern in exported, pattern
        else:
            found = [k for k in exported if re.fullmatch(pattern, k)]
            assert found, pattern
            if "percentiles" in pattern:
                assert len(found) == 3, (pattern, found)


def test_alert_rules_pass_promtool_and_name_real_series(r, exported):
    """deploy/prometheus-rules.yml: valid for Prometheus (`promtool check
    rules`), and every padlock series an alert reads is in the scrape."""
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (Debian: apt-get install prometheus)")
    rules = DEPLOY / "prometheus-rules.yml"
    out = subprocess.run([promtool, "check", "rules", str(rules)], capture_output=True, text=True)
    assert out.returncode == 0 and "SUCCESS" in out.stdout, out.stdout + out.stderr
    keys = set(re.findall(r'key="(padlock_[a-z_]+)"', rules.read_text()))
    assert len(keys) >= 6
    for k in keys:
        assert k in exported, k


def test_the_guides_acl_recipes_as_written(server, r):
    """docs/operations.md "ACL recipes", run line by line (scripts/
    doc-shell.py: only the port is this server's): the application user
    locks its own keys and nothing else, the exporter user takes no lock,
    and the exporter scraping as that user exports every padlock field."""
    import redis as redis_py
    root = DEPLOY.parent
    lines = subprocess.run(
        [sys.executable, str(root / "scripts" / "docs" / "doc-shell.py"), str(root / "docs" / "operations.md"),
         "ACL recipes", str(server.port)], capture_output=True, text=True, check=True).stdout.splitlines()
    assert len(lines) == 4, lines
    for line in lines[:3]:
        out = subprocess.run(line, shell=True, capture_output=True, text=True, cwd=root)
        assert out.returncode == 0 and "ERR" not in out.stdout, (line, out.stdout, out.stderr)
    app = redis_py.Redis(port=server.port, username="app", password="app-secret")
    assert app.execute_command("LOCK.INFO", "app:job:1") is not None, "the recipe's lock is there"
    with pytest.raises(redis_py.exceptions.NoPermissionError):
        app.execute_command("LOCK.ACQUIRE", "other:1", "worker-1", 1000)
    exp = redis_py.Redis(port=server.port, username="exporter", password="exporter-secret")
    with pytest.raises(redis_py.exceptions.NoPermissionError):
        exp.execute_command("LOCK.ACQUIRE", "app:job:2", "x", 1000)
    port = free_port()
    cmd = lines[3].rstrip(" &").replace("127.0.0.1:6379", f"127.0.0.1:{server.port}").split()
    assert cmd[0] == "prometheus-redis-exporter"
    proc = subprocess.Popen([EXPORTER, *cmd[1:], "-web.listen-address", f"127.0.0.1:{port}"],
                            cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        assert wait_for(lambda: _up(url), timeout=10), "nothing exported as the exporter user"
        got = scrape(url)
        for name in r.info("padlock"):
            if "_usec_" not in name:
                assert name in got, name
    finally:
        proc.terminate()
        proc.wait(5)
