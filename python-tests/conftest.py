"""Fixtures: real servers (Redis 7.0 from Debian, or the binary named by
PADLOCK_SERVER) with the module loaded, each on a free loopback port in its
own temp dir, stopped afterwards. A server that died during a test fails the
test loudly with the tail of its log."""

import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

import pytest
import redis

# scripts/ (harness, faultproxy) and scripts/docs/ (the docs' renderers).
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "scripts"))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "scripts" / "docs"))
from harness import free_port, port_taken  # noqa: E402  (one port picker for tests and scripts)

ROOT = pathlib.Path(__file__).resolve().parent.parent
SO = os.environ.get("PADLOCK_SO", str(ROOT / "target/release/libpadlock.so"))
SERVER = os.environ.get("PADLOCK_SERVER") or shutil.which("redis-server")


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "heavy: a measurement of padlock's own code (latency, memory) that takes "
        "seconds; `make test` runs it on the first server only")


class Server:
    def __init__(self, tmpdir, module_args=(), extra=(), port=None, cluster=False):
        self.dir = pathlib.Path(tmpdir)
        self.module_args = list(module_args)
        self.extra = list(extra)
        self.cluster = cluster
        self.picked = port is None  # a port of our own pick may be picked again
        self.port = port or free_port(cluster)
        self.proc = None
        self.log = self.dir / f"server-{self.port}.log"
        self.clients = []

    def argv(self):
        return [
            SERVER, "--port", str(self.port), "--bind", "127.0.0.1",
            "--dir", str(self.dir), "--logfile", str(self.log),
            "--save", "", "--appendonly", "no",
            "--enable-debug-command", "yes",
            "--loadmodule", SO, *self.module_args, *self.extra,
        ]

    def start(self):
        """Starts the server. A first start whose picked port another
        process took meanwhile picks again (each suite of `make test` runs
        beside others that start servers too)."""
        for _ in range(4):
            try:
                return self._start()
            except RuntimeError:
                if not (self.picked and self.proc.poll() is not None and port_taken(self.tail())):
                    raise
                self.port = free_port(self.cluster)
                self.log = self.dir / f"server-{self.port}.log"
        return self._start()

    def _start(self):
        self.proc = subprocess.Popen(self.argv(), stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        deadline = time.time() + 15
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited {self.proc.returncode}:\n{self.tail()}")
            try:
                c = redis.Redis(port=self.port, socket_timeout=2)
                c.ping()
                # Wait for AOF/RDB loading to finish.
                if c.info("persistence").get("loading", 0) == 0:
                    c.close()
                    self.picked = False  # from now on the port is the server's own
                    return self
                c.close()
            except (redis.ConnectionError, redis.BusyLoadingError):
                pass
            time.sleep(0.02)
        raise RuntimeError(f"server did not start:\n{self.tail()}")

    def tail(self, n=40):
        """The log's last lines; after a crash, the report's first ones
        (what crashed and where), which the memory test pushes out of the
        last."""
        try:
            lines = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        start = next((i for i, line in enumerate(lines) if "BUG REPORT START" in line), None)
        if start is not None:
            return "\n".join(lines[max(0, start - 5):start + 60])
        return "\n".join(lines[-n:])

    def client(self, **kw):
        kw.setdefault("socket_timeout", 10)
        c = redis.Redis(port=self.port, **kw)
        self.clients.append(c)
        return c

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self, save=False):
        """Shuts down; fails loudly when the server had crashed."""
        if self.proc is None:
            return
        for c in self.clients:
            c.close()
        self.clients = []
        if self.proc.poll() is not None:
            code = self.proc.returncode
            self.proc = None
            raise AssertionError(f"server on port {self.port} had died (exit {code}):\n{self.tail()}")
        try:
            c = redis.Redis(port=self.port, socket_timeout=5, retry=None)
            c.execute_command("SHUTDOWN", "SAVE" if save else "NOSAVE")
        except (redis.ConnectionError, redis.TimeoutError):
            # Gone at once, or slow to answer on a loaded machine: waited
            # for (and killed past ten seconds) below either way.
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def restart(self, save=False, extra=None):
        self.stop(save=save)
        if extra is not None:
            self.extra = list(extra)
        return self.start()

    def kill(self):
        if self.proc:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


@pytest.fixture
def tmp_dir():
    d = tempfile.mkdtemp(prefix="padlock-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def make_server(tmp_dir):
    """Factory: make_server(module_args=..., extra=...) -> started Server."""
    servers = []

    def make(module_args=(), extra=(), subdir=None, **kw):
        d = pathlib.Path(tmp_dir) / (subdir or f"s{len(servers)}")
        d.mkdir(exist_ok=True)
        s = Server(d, module_args, extra, **kw)
        servers.append(s)
        return s.start()

    yield make
    errors = []
    for s in reversed(servers):
        try:
            s.stop()
        except AssertionError as e:
            errors.append(str(e))
    if errors:
        pytest.fail("\n\n".join(errors))


@pytest.fixture
def server(make_server):
    return make_server()


@pytest.fixture
def r(server):
    return server.client()


@pytest.fixture
def r3(server):
    return server.client(protocol=3)


def is_valkey(client):
    return "valkey_version" in client.info("server")


def wait_for(pred, timeout=5.0, interval=0.01):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return True
        time.sleep(interval)
    return pred()


def synced(m, rep):
    """Waits until the replica `rep` applied all its master `m` sent so
    far, and says how far that is. `WAIT` is not enough where other
    connections or timers wrote: it waits only for the calling
    connection's own latest write."""
    at = m.info("replication")["master_repl_offset"]
    assert wait_for(lambda: rep.info("replication")["slave_repl_offset"] >= at, timeout=10), \
        "the replica fell behind"
    return at


class Background:
    """A command running on its own connection in a thread (for BLOCK)."""

    def __init__(self, server, *cmd):
        import threading
        self.client = server.client(socket_timeout=30)
        self.client_id = self.client.client_id()
        self.value = None
        self.error = None
        self.done_at = None
        self.thread = threading.Thread(target=self._run, args=(cmd,), daemon=True)
        self.thread.start()

    def _run(self, cmd):
        try:
            self.value = self.client.execute_command(*cmd)
        except Exception as e:  # noqa: BLE001 - recorded for the test to check
            self.error = e
        self.done_at = time.time()

    def result(self, timeout=10):
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "still blocked"
        if self.error:
            raise self.error
        return self.value

    def done(self):
        return not self.thread.is_alive()


@pytest.fixture
def bg(server):
    """bg(*cmd) -> Background running cmd on a new connection."""
    return lambda *cmd: Background(server, *cmd)


def blocked(r):
    return r.info("padlock")["padlock_blocked_clients"]


def wait_blocked(r, n, timeout=5):
    assert wait_for(lambda: blocked(r) == n, timeout=timeout), f"expected {n} blocked, got {blocked(r)}"
