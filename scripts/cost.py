"""Server cost per command: instructions inside Redis' `call()` counted by
callgrind (repeatable to a fraction of a percent, whatever else the machine
does), for padlock's hot commands and for `SET key v NX PX` on the same
server binary, in the same run.

Each case fills what it needs first (for example the locks a release
frees), then callgrind's counters are zeroed, the measured commands run
pipelined on distinct keys, and the counters are dumped: the dump holds
only the measured commands, and only what runs inside `call()`
(`--toggle-collect=call`), so parsing and networking are left out.

    python scripts/cost.py [server-binary] [--top N]   # one table, and where the instructions go
"""

import glob
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import redis

from harness import SO

N = 20_000
BATCH = 16

# name -> (fill commands, measured commands), each a function of i.
CASES = {
    "SET NX PX": (None, lambda i: ["SET", f"k:{i}", "v", "NX", "PX", "5000"]),
    "LOCK.ACQUIRE (fresh)": (None, lambda i: ["LOCK.ACQUIRE", f"k:{i}", "holder", "5000"]),
    "LOCK.ACQUIRE (reentrant)": (
        lambda i: ["LOCK.ACQUIRE", f"k:{i}", "holder", "5000"],
        lambda i: ["LOCK.ACQUIRE", f"k:{i}", "holder", "5000"]),
    "LOCK.RELEASE": (
        lambda i: ["LOCK.ACQUIRE", f"k:{i}", "holder", "60000"],
        lambda i: ["LOCK.RELEASE", f"k:{i}", "holder"]),
    "LOCK.EXTEND": (
        lambda i: ["LOCK.ACQUIRE", f"k:{i}", "holder", "60000"],
        lambda i: ["LOCK.EXTEND", f"k:{i}", "holder", "5000"]),
    "SEM.ACQUIRE": (None, lambda i: ["SEM.ACQUIRE", f"s:{i}", "holder", "3", "5000"]),
    "SEM.RELEASE": (
        lambda i: ["SEM.ACQUIRE", f"s:{i}", "holder", "3", "60000"],
        lambda i: ["SEM.RELEASE", f"s:{i}", "holder"]),
    "RWLOCK.ACQUIRE": (None, lambda i: ["RWLOCK.ACQUIRE", f"rw:{i}", "holder", "WRITE", "5000"]),
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(r, make, n=N):
    p = r.pipeline(transaction=False)
    for i in range(n):
        p.execute_command(*make(i))
        if i % BATCH == BATCH - 1:
            p.execute()
    p.execute()


class Callgrind:
    """A server under callgrind, counting only inside `call()`."""

    def __init__(self, binary):
        self.dir = tempfile.mkdtemp(prefix="padlock-cg-")
        self.port = free_port()
        self.out = os.path.join(self.dir, "cg.out")
        self.proc = subprocess.Popen(
            ["valgrind", "--tool=callgrind", "--toggle-collect=call",
             f"--callgrind-out-file={self.out}", binary, "--port", str(self.port),
             "--bind", "127.0.0.1", "--dir", self.dir, "--save", "", "--appendonly", "no",
             "--loadmodule", SO],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.r = redis.Redis(port=self.port, socket_timeout=300)
        for _ in range(600):
            try:
                self.r.ping()
                return
            except redis.ConnectionError:
                time.sleep(0.1)
        raise RuntimeError("server under callgrind did not start")

    def control(self, flag):
        subprocess.run(["callgrind_control", flag, str(self.proc.pid)],
                       capture_output=True, check=True)

    def measure(self, fill, measured):
        self.r.flushall()
        if fill:
            run(self.r, fill)
        self.control("-z")
        run(self.r, measured)
        before = set(glob.glob(self.out + "*"))
        self.control("-d")
        dump = max(set(glob.glob(self.out + "*")) - before, key=os.path.getmtime)
        return dump

    def stop(self):
        try:
            self.r.shutdown(nosave=True)
        except redis.RedisError:
            pass
        self.proc.wait(120)
        shutil.rmtree(self.dir, ignore_errors=True)


def total(dump):
    with open(dump) as f:
        for line in f:
            if line.startswith("summary:") or line.startswith("totals:"):
                return int(line.split()[1])
    raise RuntimeError("no totals in " + dump)


def breakdown(dump, top):
    """The functions with the most inclusive instructions per call."""
    incl = "no" if os.environ.get("PADLOCK_COST_SELF") else "yes"
    out = subprocess.run(["callgrind_annotate", f"--inclusive={incl}", "--threshold=100", dump],
                         capture_output=True, text=True).stdout
    rows = []
    for line in out.splitlines():
        m = re.match(r"^\s*([\d,]+)\s+\([^)]*\)\s+(.*)$", line) or re.match(r"^\s*([\d,]+)\s+(\S.*)$", line)
        if m and ":" in m.group(2):
            rows.append((int(m.group(1).replace(",", "")) / N, m.group(2)[:110]))
    return rows[:top]


def measure_all(binary, cases=CASES, top=0):
    """{case: instructions per call} on one server binary."""
    cg = Callgrind(binary)
    try:
        result = {}
        for name, (fill, measured) in cases.items():
            dump = cg.measure(fill, measured)
            result[name] = total(dump) / N
            if top:
                print(f"\n== {name}: {result[name]:,.0f} per call")
                for cost, fn in breakdown(dump, top):
                    print(f"{cost:10,.0f}  {fn}")
        return result
    finally:
        cg.stop()


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
        cases = {k: v for k, v in CASES.items() if k == "SET NX PX" or any(w in k for w in want)}
    res = measure_all(binary, cases, top)
    base = res["SET NX PX"]
    print("\n| command | instructions/call | vs SET NX PX |")
    print("| --- | --- | --- |")
    for name, v in res.items():
        print(f"| {name} | {v:,.0f} | {v / base:.2f}x |")


if __name__ == "__main__":
    main()
