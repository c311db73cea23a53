"""Server cost per command, for `make bench`: padlock's hot commands next to
`SET key v NX PX` (and Redisson's reentrant Lua script) on the same server
binary, in the same run, alone or with AOF on and a replica attached.

- Instructions per call: callgrind counting only inside Redis' `call()`
  (`--toggle-collect=call`: parsing and networking left out), zeroed
  after each case's fill and dumped after its 20,000 measured commands.
  Repeatable to a fraction of a percent whatever else the machine does.
- Requests per second at pipeline 16, from `examples/load.rs`: every
  command on its own key in sequence, so a release frees a lock that is
  really held (redis-benchmark's random keys collide).

    python scripts/bench/cost.py [server-binary] [--top N]   # one table, and where the instructions go
    PADLOCK_COST_BLOCKED=1000 python scripts/bench/cost.py  # and a blocked acquire that queues
"""

import glob
import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

import redis

import pathlib
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # scripts/: harness, faultproxy
from harness import ROOT, SO, free_port

LOAD = ROOT / "target/release/examples/load"
CALLS = 20_000

LUA = """
if redis.call('exists', KEYS[1]) == 0 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil
end
return redis.call('pttl', KEYS[1])
"""
LUA_SHA = hashlib.sha1(LUA.encode()).hexdigest()

BASE = "SET NX PX"
HELD = ["LOCK.ACQUIRE", "k:{i}", "holder", "60000"]
SEM_HELD = ["SEM.ACQUIRE", "s:{i}", "holder", "3", "60000"]
# As a client holds: acquired with its own request-id, so a release finds it.
HELD_ID = [*HELD, "ID", "a:{i}"]
# Held twice (a fill may be a tuple of templates, run in turn), so that a
# release is an inner one.
HELD_TWICE = (HELD, HELD)
HELD_TWICE_ID = (HELD_ID, [*HELD, "ID", "b:{i}"])

# (name, fill or None, measured); `{i}` is the command's number.
CASES = [
    (BASE, None, ["SET", "k:{i}", "v", "NX", "PX", "5000"]),
    ("Lua reentrant acquire (EVALSHA)", None, ["EVALSHA", LUA_SHA, "1", "k:{i}", "5000", "holder"]),
    ("LOCK.ACQUIRE", None, ["LOCK.ACQUIRE", "k:{i}", "holder", "5000"]),
    ("LOCK.ACQUIRE, reentrant", HELD, ["LOCK.ACQUIRE", "k:{i}", "holder", "5000"]),
    ("LOCK.RELEASE", HELD, ["LOCK.RELEASE", "k:{i}", "holder"]),
    ("LOCK.RELEASE, inner", HELD_TWICE, ["LOCK.RELEASE", "k:{i}", "holder"]),
    ("LOCK.EXTEND", HELD, ["LOCK.EXTEND", "k:{i}", "holder", "5000"]),
    ("SEM.ACQUIRE", None, ["SEM.ACQUIRE", "s:{i}", "holder", "3", "5000"]),
    ("SEM.RELEASE", SEM_HELD, ["SEM.RELEASE", "s:{i}", "holder"]),
    ("RWLOCK.ACQUIRE", None, ["RWLOCK.ACQUIRE", "rw:{i}", "holder", "WRITE", "5000"]),
    # With `ID request-id` (docs/commands.md, "Retries"): each against its line above.
    ("LOCK.ACQUIRE ID", None, ["LOCK.ACQUIRE", "k:{i}", "holder", "5000", "ID", "r:{i}"]),
    ("LOCK.ACQUIRE, reentrant ID", HELD, ["LOCK.ACQUIRE", "k:{i}", "holder", "5000", "ID", "r:{i}"]),
    ("LOCK.RELEASE ID", HELD, ["LOCK.RELEASE", "k:{i}", "holder", "ID", "r:{i}"]),
    ("LOCK.RELEASE ID, acquired with ID", HELD_ID, ["LOCK.RELEASE", "k:{i}", "holder", "ID", "r:{i}"]),
    ("LOCK.RELEASE, inner ID", HELD_TWICE_ID, ["LOCK.RELEASE", "k:{i}", "holder", "ID", "r:{i}"]),
    ("SEM.ACQUIRE ID", None, ["SEM.ACQUIRE", "s:{i}", "holder", "3", "5000", "ID", "r:{i}"]),
    ("SEM.RELEASE ID", SEM_HELD, ["SEM.RELEASE", "s:{i}", "holder", "ID", "r:{i}"]),
    ("RWLOCK.ACQUIRE ID", None, ["RWLOCK.ACQUIRE", "rw:{i}", "holder", "WRITE", "5000", "ID", "r:{i}"]),
    # What the client libraries send by default: a lease kept while the
    # connection lives (`KEEP`), and `ID`.
    ("LOCK.ACQUIRE KEEP ID", None, ["LOCK.ACQUIRE", "k:{i}", "holder", "5000", "KEEP", "ID", "r:{i}"]),
    # A blocking acquire through a client (lock(), acquire()): granted at once.
    ("LOCK.ACQUIRE BLOCK MAILBOX KEEP ID", None, ["LOCK.ACQUIRE", "k:{i}", "holder", "5000", "BLOCK", "0",
                                                  "MAILBOX", "mb", "KEEP", "ID", "r:{i}"]),
    ("SEM.ACQUIRE KEEP ID", None, ["SEM.ACQUIRE", "s:{i}", "holder", "3", "5000", "KEEP", "ID", "r:{i}"]),
    ("RWLOCK.ACQUIRE KEEP ID", None, ["RWLOCK.ACQUIRE", "rw:{i}", "holder", "WRITE", "5000", "KEEP", "ID", "r:{i}"]),
]


def real_command(binary):
    """The argv that runs `binary`: scripts/redis8.sh makes a shell wrapper
    that starts the server through its own loader, which valgrind must see
    instead of the shell."""
    path = shutil.which(binary) or binary
    with open(path, "rb") as f:
        head = f.read(2)
    if head != b"#!":
        return [path]
    lines = [ln for ln in open(path).read().splitlines() if ln.startswith("exec ")]
    return [a for a in shlex.split(lines[-1])[1:] if a != "$@"]


def load(port, template, total, conns=1, pipeline=16):
    """(requests per second, error replies) of `total` commands."""
    out = subprocess.run([str(LOAD), str(port), str(conns), str(pipeline), str(total), *template],
                         capture_output=True, text=True, check=True).stdout.split()
    return float(out[0]), int(out[1])


class Node:
    """A server with the module, optionally under callgrind, optionally a
    replica of another node."""

    def __init__(self, binary, aof=False, callgrind=False, replica_of=None):
        self.dir = tempfile.mkdtemp(prefix="padlock-cost-")
        self.port = free_port()
        self.out = os.path.join(self.dir, "cg.out")
        argv = [*(real_command(binary) if callgrind else [binary]), "--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.dir,
                "--save", "", "--appendonly", "yes" if aof else "no", "--appendfsync", "everysec",
                "--loadmodule", SO]
        if replica_of:
            argv += ["--replicaof", "127.0.0.1", str(replica_of)]
        if callgrind:
            # Inside `call()` only, or (`callgrind="all"`) the whole process.
            only = [] if callgrind == "all" else ["--toggle-collect=call"]
            argv = ["valgrind", "--tool=callgrind", *only,
                    f"--callgrind-out-file={self.out}", *argv]
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.r = redis.Redis(port=self.port, socket_timeout=600)
        for _ in range(900):
            try:
                self.r.ping()
                return
            except redis.ConnectionError:
                time.sleep(0.1)
        raise RuntimeError("server did not start")

    def control(self, flag):
        subprocess.run(["callgrind_control", flag, str(self.proc.pid)], capture_output=True, check=True)

    def stop(self):
        try:
            self.r.shutdown(nosave=True)
        except redis.RedisError:
            pass
        try:
            self.proc.wait(120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


class Setup:
    """A master (under callgrind or not), with AOF and a replica or alone."""

    def __init__(self, binary, aof_replica, callgrind):
        self.master = Node(binary, aof=aof_replica, callgrind=callgrind)
        self.replica = None
        if aof_replica:
            self.replica = Node(binary, replica_of=self.master.port)
            for _ in range(600):
                if self.replica.r.info("replication").get("master_link_status") == "up":
                    break
                time.sleep(0.1)
            else:
                raise RuntimeError("replica did not connect")
        self.master.r.script_load(LUA)

    def fill(self, template, n):
        r = self.master.r
        r.flushall()
        if self.replica:
            r.execute_command("WAIT", 1, 0)
        for t in (template if isinstance(template, tuple) else (template,) if template else ()):
            load(self.master.port, t, n, pipeline=64)
        if self.replica:
            r.execute_command("WAIT", 1, 0)

    def stop(self):
        for n in (self.replica, self.master):
            if n:
                n.stop()


def instructions(binary, aof_replica=False, cases=CASES, top=0):
    """{case: instructions per call inside call()}."""
    s = Setup(binary, aof_replica, callgrind=True)
    m = s.master
    try:
        result = {}
        for name, fill, measured in cases:
            s.fill(fill, CALLS)
            m.control("-z")
            _, errors = load(m.port, measured, CALLS)
            before = set(glob.glob(m.out + "*"))
            m.control("-d")
            dump = max(set(glob.glob(m.out + "*")) - before, key=os.path.getmtime)
            if errors:
                raise RuntimeError(f"{name}: {errors} error replies")
            result[name] = total(dump) / CALLS
            if os.environ.get("PADLOCK_COST_KEEP"):  # a directory: each case's dump, for callgrind_annotate
                shutil.copy(dump, os.path.join(os.environ["PADLOCK_COST_KEEP"], name.replace(" ", "_").replace(",", "") + ".cg"))
            if top:
                print(f"\n== {name}: {result[name]:,.0f} per call")
                for cost, fn in breakdown(dump, top):
                    print(f"{cost:10,.0f}  {fn}")
        return result
    finally:
        s.stop()


def blocked_instructions(binary, n=1000):
    """Instructions inside call() per `LOCK.ACQUIRE ... BLOCK` that queues:
    `n` locks held, then one waiter per lock, each on its own connection
    (a blocked connection sends nothing more)."""
    import socket
    s = Setup(binary, aof_replica=False, callgrind=True)
    m = s.master
    socks = []
    try:
        s.fill(HELD, n)
        m.control("-z")
        for i in range(n):
            c = socket.create_connection(("127.0.0.1", m.port))
            args = [b"LOCK.ACQUIRE", b"k:%d" % i, b"other", b"60000", b"BLOCK", b"0"]
            c.sendall(b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args))
            socks.append(c)
        time.sleep(3 + n / 200)  # no command of ours in the measured window
        before = set(glob.glob(m.out + "*"))
        m.control("-d")
        dump = max(set(glob.glob(m.out + "*")) - before, key=os.path.getmtime)
        if m.r.info("padlock")["padlock_blocked_clients"] != n:
            raise RuntimeError("the waiters did not all block in time")
        return total(dump) / n
    finally:
        for c in socks:
            c.close()
        s.stop()


def throughput(binary, aof_replica=False, cases=CASES, n=200_000, conns=8):
    """{case: requests per second at pipeline 16}; the baseline is measured
    before and after the others, and averaged."""
    s = Setup(binary, aof_replica, callgrind=False)
    try:
        result, base = {}, []
        for name, fill, measured in [*cases, cases[0]]:
            s.fill(fill, n)
            rps, errors = load(s.master.port, measured, n, conns=conns)
            if errors:
                raise RuntimeError(f"{name}: {errors} error replies")
            if name == BASE:
                base.append(rps)
            else:
                result[name] = rps
        return {BASE: sum(base) / len(base), **result}
    finally:
        s.stop()


def total(dump):
    with open(dump) as f:
        for line in f:
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    raise RuntimeError("no totals in " + dump)


def breakdown(dump, top):
    """The functions with the most instructions per call (inclusive; self
    with PADLOCK_COST_SELF=1)."""
    incl = "no" if os.environ.get("PADLOCK_COST_SELF") else "yes"
    out = subprocess.run(["callgrind_annotate", f"--inclusive={incl}", "--threshold=100", dump],
                         capture_output=True, text=True).stdout
    rows = []
    for line in out.splitlines():
        parts = line.split(None, 1)
        if len(parts) == 2 and parts[0].replace(",", "").isdigit() and ":" in parts[1]:
            fn = parts[1].split(" ", 1)[-1] if parts[1].startswith("(") else parts[1]
            rows.append((int(parts[0].replace(",", "")) / CALLS, fn[:110]))
    return rows[:top]


def main():
    args = sys.argv[1:]
    top = 0
    if "--top" in args:
        i = args.index("--top")
        top = int(args[i + 1])
        del args[i:i + 2]
    binary = args[0] if args else shutil.which("redis-server")
    cases = CASES
    if os.environ.get("PADLOCK_COST_ONLY"):
        want = os.environ["PADLOCK_COST_ONLY"].split(",")
        cases = [c for c in CASES if c[0] == BASE or any((w[1:] == c[0]) if w.startswith('=') else (w in c[0]) for w in want)]
    res = instructions(binary, os.environ.get("PADLOCK_COST_AOF") == "1", cases, top)
    print("\n| command | instructions/call | vs SET NX PX |")
    print("| --- | --- | --- |")
    for name, v in res.items():
        print(f"| {name} | {v:,.0f} | {v / res[BASE]:.2f}x |")
    if os.environ.get("PADLOCK_COST_BLOCKED"):
        b = blocked_instructions(binary, int(os.environ["PADLOCK_COST_BLOCKED"]))
        print(f"| LOCK.ACQUIRE ... BLOCK that queues | {b:,.0f} | {b / res[BASE]:.2f}x |")


if __name__ == "__main__":
    main()
