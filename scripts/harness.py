"""A throwaway server with the module loaded, for the bench and soak
scripts (the test suite has its own fixtures in python-tests/conftest.py)."""

import os
import pathlib
import random
import shutil
import socket
import subprocess
import tempfile
import time

import redis

ROOT = pathlib.Path(__file__).resolve().parent.parent
SO = os.environ.get("PADLOCK_SO", str(ROOT / "target/release/libpadlock.so"))


def server_and_count(argv, default_n):
    """A bench script's `[server-binary] [n]`: the binary (the
    `redis-server` on PATH when not given) and how many to measure."""
    binary = argv[0] if argv else shutil.which("redis-server")
    n = int(argv[1]) if len(argv) > 1 else default_n
    return binary, n


def resp(*args):
    """One command in RESP, as a client sends it (for raw sockets)."""
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def port_free(port):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def _ephemeral_low():
    """The first port the kernel hands to outgoing connections."""
    try:
        return int(pathlib.Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port(cluster=False):
    """A free loopback port below the kernel's ephemeral range, so that no
    outgoing connection (other suites run beside this one and open many)
    can take it between this pick and the server's bind. A cluster node
    also needs port + 10000 (its bus) free, and below that range too. The
    pick can still race another picker; `port_taken` tells a caller that
    lost, and the fixtures then pick again."""
    top = _ephemeral_low() - 1 - (10000 if cluster else 0)
    for _ in range(500):
        if top >= 11000:
            port = random.randint(10000, top)
        else:  # an unusual range: take the kernel's pick, as before
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            if port > 55535:
                continue
        if port_free(port) and (not cluster or port_free(port + 10000)):
            return port
    raise RuntimeError("no free port")


def port_taken(log_text):
    """True when a server's log says it exited because its port was taken."""
    return "Address already in use" in log_text


class Server:
    def __init__(self, binary=None, extra=()):
        self.binary = binary or os.environ.get("PADLOCK_SERVER") or shutil.which("redis-server")
        self.dir = tempfile.mkdtemp(prefix="padlock-bench-")
        for _ in range(5):
            self.port = free_port(cluster="--cluster-enabled" in extra)
            self.proc = subprocess.Popen(
                [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.dir,
                 "--logfile", os.path.join(self.dir, "server.log"), "--save", "", "--appendonly", "no",
                 "--loadmodule", SO, *extra],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for _ in range(500):
                if self.proc.poll() is not None:
                    break
                try:
                    redis.Redis(port=self.port).ping()
                    return
                except redis.ConnectionError:
                    time.sleep(0.02)
            log = pathlib.Path(self.dir, "server.log")
            if self.proc.poll() is None or not port_taken(log.read_text(errors="replace")):
                break
        raise RuntimeError("server did not start")

    def client(self, **kw):
        return redis.Redis(port=self.port, **kw)

    def stop(self):
        self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


# A bound lease is held at 2^52 ms + its ttl: its PTTL is far above this.
FAR_PTTL = 1 << 51
_INFO = {b"pdlk-lock": "LOCK.INFO", b"pdlk-sema": "SEM.INFO", b"pdlk-rwlk": "RWLOCK.INFO"}


def kept_without_binding(r, dbs=range(16)):
    """The KEEP invariant, read from outside: every lease held far away
    belongs to a binding (`keep` >= 1 in its *.INFO). Returns the
    (db, key) that break it."""
    bad = []
    port = r.connection_pool.connection_kwargs["port"]
    for db in dbs:
        c = redis.Redis(port=port, db=db, socket_timeout=10)
        try:
            for key in c.scan_iter(count=1000):
                kind = c.type(key)
                cmd = _INFO.get(kind if isinstance(kind, bytes) else str(kind).encode())
                if cmd is None or c.pttl(key) <= FAR_PTTL:
                    continue
                raw = c.execute_command(cmd, key)
                if raw is None:
                    continue
                info = {raw[i]: raw[i + 1] for i in range(0, len(raw), 2)}
                if int(info.get(b"keep", 0)) < 1:
                    bad.append((db, key))
        except redis.ResponseError:
            break  # no such database
        finally:
            c.close()
    return bad
