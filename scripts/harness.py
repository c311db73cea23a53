"""A throwaway server with the module loaded, for the bench and soak
scripts (the test suite has its own fixtures in python-tests/conftest.py)."""

import os
import pathlib
import shutil
import socket
import subprocess
import tempfile
import time

import redis

ROOT = pathlib.Path(__file__).resolve().parent.parent
SO = os.environ.get("PADLOCK_SO", str(ROOT / "target/release/libpadlock.so"))


class Server:
    def __init__(self, binary=None, extra=()):
        self.binary = binary or os.environ.get("PADLOCK_SERVER") or shutil.which("redis-server")
        self.dir = tempfile.mkdtemp(prefix="padlock-bench-")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.dir,
             "--save", "", "--appendonly", "no", "--loadmodule", SO, *extra],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(500):
            try:
                redis.Redis(port=self.port).ping()
                return
            except redis.ConnectionError:
                time.sleep(0.02)
        raise RuntimeError("server did not start")

    def client(self, **kw):
        return redis.Redis(port=self.port, **kw)

    def stop(self):
        self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)
