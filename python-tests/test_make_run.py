"""README, the two commands: `make run` (scripts/run.sh) starts a server a
newcomer can connect to, also when the port it would take is taken (on a
machine with systemd, installing Debian's redis-server starts its own
service on 6379)."""

import os
import pathlib
import re
import socket
import subprocess
import time

import redis

from conftest import ROOT, SERVER, SO

RUN = ROOT / "scripts" / "run.sh"


def env_with_server(tmp_dir):
    """run.sh starts `redis-server` from PATH: the binary under test."""
    bin_dir = pathlib.Path(tmp_dir) / "bin"
    bin_dir.mkdir(exist_ok=True)
    link = bin_dir / "redis-server"
    if not link.exists():
        link.symlink_to(SERVER)
    return dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}")


def listening():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    return s


def start(args, env):
    """run.sh's process and the port it says to connect to."""
    p = subprocess.Popen(["bash", str(RUN), SO, *args], env=env, cwd=str(ROOT),
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    said = []
    assert p.stdout is not None
    for line in p.stdout:
        said.append(line)
        m = re.search(r"connect: redis-cli -p (\d+)", line)
        if m:
            return p, int(m.group(1)), said
    p.wait()
    return p, None, said


def test_make_run_takes_the_next_port_when_its_own_is_taken(tmp_dir):
    env = env_with_server(tmp_dir)
    for _ in range(3):  # the port it picks may be taken before it binds it
        with listening() as busy:
            taken = busy.getsockname()[1]
            p, port, said = start([], dict(env, PADLOCK_RUN_FROM=str(taken)))
            try:
                assert port is not None and port != taken, said
                assert f"port {taken} is taken" in "".join(said)
                r = redis.Redis(port=port, socket_timeout=5)
                for _ in range(100):
                    try:
                        r.ping()
                        break
                    except redis.ConnectionError:
                        if p.poll() is not None:
                            break
                        time.sleep(0.05)
                if p.poll() is not None:
                    continue
                assert r.execute_command("LOCK.ACQUIRE", "mylock", "me", 30000) > 0
                assert r.config_get("bind")["bind"] == "127.0.0.1"
                return
            finally:
                p.terminate()
                p.wait(timeout=10)
    raise AssertionError("make run never started: " + "".join(said))


def test_make_run_refuses_a_port_asked_for_and_taken(tmp_dir):
    with listening() as busy:
        taken = busy.getsockname()[1]
        out = subprocess.run(["bash", str(RUN), SO, str(taken)], env=env_with_server(tmp_dir),
                             capture_output=True, text=True, timeout=30)
    assert out.returncode == 1
    assert f"port {taken} on 127.0.0.1 is taken" in out.stderr
    assert "make run PORT=" in out.stderr
