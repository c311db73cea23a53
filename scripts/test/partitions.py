"""make partitions: network partitions between namespaces of the run's own,
and the fenced-store check (run as root).

Each node lives in a network namespace of its own: a master, two replicas
and three Sentinels (padlock loaded on the data nodes), a store (a plain
redis-server) and eight workers. Their veth pairs meet on a bridge inside
one more namespace (the hub), on 198.18.N.0/24 (RFC 2544's benchmarking
range): no namespace has a route anywhere else, the root namespace gets no
interface and no address, and everything is removed when the run ends,
however it ends (a run killed outright is cleaned up by the next one).

Workers use the padlock Python client: find the master through Sentinel,
take one of a few locks (`ttl` 1 s, `KEEP`), and inside the section write
twice to the store with the lock's fence, once at the start and once at
the end. The store accepts a write only with a fence above the highest it
accepted for that key (Kleppmann's fencing), so an overlap whose writes
interleave at the store is rejected there, and a worker that the client
says no longer holds (its loss seen) writes nothing.

Faults, seconds long, one at a time on a fixed seed (iptables in the
namespaces): the master cut off from its replicas and Sentinels with two
workers left on its side (Sentinel fails over; the old master, demoted on
healing, loses what it took alone); one worker cut off from the master
with its KEEP connection left half-open, with and without
`keep-max-idle-ms`; the master's replication stream cut one way.

The checker reports per configuration (restart grace, min-replicas-to-
write, the clients' `replicas=`): sections, overlaps (two holders of a key
at once by the workers' clocks), overlaps the store rejected a write of,
accepted writes out of fence order and sections whose writes interleaved
at the store (both must be 0), grants lost (a release answered NOTHELD
well inside the lease) and, per fault, the longest a key went without a
grant.

    make partitions          # as root; PADLOCK_PARTITION_SECONDS per configuration (50)
"""

import ctypes
import json
import logging
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "clients", "python", "src"))

import redis  # noqa: E402
from redis.sentinel import MasterNotFoundError, Sentinel  # noqa: E402

SECONDS = float(os.environ.get("PADLOCK_PARTITION_SECONDS", "50"))
SO = os.environ.get("PADLOCK_SO", os.path.join(ROOT, "target", "release", "libpadlock.so"))
SERVER = os.environ.get("PADLOCK_SERVER") or shutil.which("redis-server")
PREFIX = "padlock-p"
TTL = 1.0
KEYS = ["A", "B"]
WORKERS = 8
# The store: a write is accepted only with a fence at least the highest one
# accepted for its key (a grant writes twice with its one fence); every
# accepted write is logged in order.
STORE = """
local top = tonumber(redis.call('GET', KEYS[1]) or '0')
if tonumber(ARGV[1]) < top then return 0 end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('RPUSH', KEYS[2], ARGV[2])
return 1
"""


def sh(*argv, check=True):
    return subprocess.run(argv, check=check, capture_output=True, text=True)


def setns(name):
    """Moves this (single-threaded) process into namespace `name`: its
    sockets and children from now on."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(f"/run/netns/{name}", os.O_RDONLY)
    try:
        if libc.setns(fd, 0x40000000) != 0:  # CLONE_NEWNET
            raise OSError(ctypes.get_errno(), "setns")
    finally:
        os.close(fd)


def clean_stale():
    """Namespaces of runs whose process is gone (killed outright)."""
    for name in sh("ip", "netns", "list", check=False).stdout.split():
        if name.startswith(PREFIX):
            pid = name[len(PREFIX):].split("-")[0]
            if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
                sh("ip", "netns", "del", name, check=False)


class Net:
    """The run's namespaces: the hub with its bridge, and one per node."""

    def __init__(self, subnet):
        self.run = f"{PREFIX}{os.getpid()}"
        self.subnet = subnet
        self.ips = {}
        self.hub = f"{self.run}-hub"
        sh("ip", "netns", "add", self.hub)
        sh("ip", "-n", self.hub, "link", "add", "br0", "type", "bridge")
        sh("ip", "-n", self.hub, "link", "set", "br0", "up")

    def ns(self, name):
        return f"{self.run}-{name}"

    def add(self, name):
        i = len(self.ips) + 1
        ns, ip = self.ns(name), f"198.18.{self.subnet}.{i}"
        sh("ip", "netns", "add", ns)
        sh("ip", "link", "add", "eth0", "netns", ns, "type", "veth", "peer", "name", f"v{i}", "netns", self.hub)
        sh("ip", "-n", self.hub, "link", "set", f"v{i}", "master", "br0")
        sh("ip", "-n", self.hub, "link", "set", f"v{i}", "up")
        for dev in ("lo", "eth0"):
            sh("ip", "-n", ns, "link", "set", dev, "up")
        sh("ip", "-n", ns, "addr", "add", f"{ip}/24", "dev", "eth0")
        self.ips[name] = ip
        return ip

    def exec(self, name, argv):
        return ["ip", "netns", "exec", self.ns(name), *argv]

    def cut(self, side_a, side_b, one_way=False):
        """Drops every packet between the sides (one_way: only a -> b)."""
        for a in side_a:
            for b in side_b:
                sh(*self.exec(a, ["iptables", "-A", "OUTPUT", "-d", self.ips[b], "-j", "DROP"]))
                if not one_way:
                    sh(*self.exec(a, ["iptables", "-A", "INPUT", "-s", self.ips[b], "-j", "DROP"]))

    def heal(self):
        for name in self.ips:
            sh(*self.exec(name, ["iptables", "-F"]), check=False)

    def close(self):
        for name in [*self.ips, "hub"]:
            sh("ip", "netns", "del", self.ns(name), check=False)


class Node:
    """A server in its namespace, on a port of its own choosing (the
    namespace is fresh: every port is free)."""

    def __init__(self, net, name, root, args):
        self.net, self.name = net, name
        self.ip = net.add(name)
        self.port = random.randint(20000, 60000)
        self.dir = os.path.join(root, name)
        os.makedirs(self.dir)
        self.args = args
        self.proc = None

    def start(self):
        # No protected mode: the clients are in other namespaces (not
        # loopback), on addresses nothing outside the run can reach.
        argv = [SERVER, *self.args(self), "--port", str(self.port), "--bind", self.ip, "--protected-mode", "no",
                "--dir", self.dir, "--logfile", os.path.join(self.dir, "log")]
        self.proc = subprocess.Popen(self.net.exec(self.name, argv), stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        for _ in range(500):
            try:
                if self.client().ping():
                    return
            except redis.RedisError:
                time.sleep(0.02)
        try:
            with open(os.path.join(self.dir, "log")) as f:
                tail = f.read()[-600:]
        except OSError:
            tail = "(no log)"
        raise RuntimeError(f"{self.name} did not start: {tail}")

    def client(self):
        return redis.Redis(host=self.ip, port=self.port, socket_timeout=2, socket_connect_timeout=1)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def data_args(grace, min_replicas, master=None):
    def args(node):
        out = ["--appendonly", "yes", "--save", "", "--repl-diskless-sync-delay", "0",
               "--min-replicas-to-write", str(min_replicas), "--min-replicas-max-lag", "2",
               "--loadmodule", SO, "restart-grace-ms", grace]
        return out + (["--replicaof", master.ip, str(master.port)] if master else [])
    return args


def sentinel_args(master):
    def args(node):
        conf = os.path.join(node.dir, "sentinel.conf")
        with open(conf, "w") as f:
            f.write(f"sentinel monitor m {master.ip} {master.port} 2\n"
                    "sentinel down-after-milliseconds m 1000\nsentinel failover-timeout m 4000\n")
        return [conf, "--sentinel"]
    return args


# --- a worker, in its own namespace ------------------------------------------

def worker(spec):
    from padlock import Lock, NotHeldError, PadlockError, Replicas

    rng = random.Random(spec["seed"])
    holder = spec["holder"]
    sentinel = Sentinel([tuple(s) for s in spec["sentinels"]], socket_timeout=0.5)
    store = redis.Redis(host=spec["store"][0], port=spec["store"][1], socket_timeout=2)
    write = store.register_script(STORE)
    replicas = Replicas(1, timeout=0.3) if spec["replicas"] else None
    out = open(spec["log"], "a", buffering=1)
    clients, locks = {}, {}
    known, asked = None, 0.0
    # Reentry across a failover ("held more than this client took") and
    # grants short of their replicas are counted by the checker, not printed.
    warnings.simplefilter("ignore")
    logging.getLogger("padlock").setLevel(logging.ERROR)
    while time.time() < spec["stop_at"]:
        try:
            # Sentinel is asked after an error and every 2 s, as a client
            # that keeps its master until it fails or is told otherwise; cut
            # off from Sentinel, the master it knew.
            if known is None or time.time() - asked > 2.0:
                asked = time.time()
                try:
                    known = sentinel.discover_master("m")
                except MasterNotFoundError:
                    if known is None:
                        raise
            host, port = known
            if (host, port) not in clients:
                clients[(host, port)] = redis.Redis(host=host, port=port, socket_timeout=1,
                                                    socket_connect_timeout=0.5)
            key = rng.choice(KEYS)
            # One lock object per master and key: its count is the server's.
            lock = locks.get((host, port, key))
            if lock is None:
                lock = locks[(host, port, key)] = Lock(clients[(host, port)], key, ttl=TTL, holder=holder,
                                                       replicas=replicas)
            fence = lock.acquire(timeout=2)
            if fence is None:
                continue
            start = end = time.time()
            writes = []
            for half in (0, 1):
                if not lock.held:
                    # The client says it no longer holds: the section ended
                    # with its last write.
                    writes.append(None)
                    continue
                writes.append(bool(write(keys=[f"top:{key}", f"log:{key}"],
                                         args=[fence, f"{holder} {fence} {half}"])))
                end = time.time()
                if half == 0:
                    time.sleep(rng.uniform(0.02, 0.3))
            try:
                lock.release()
                released = True
            except NotHeldError:
                released = False
            except (PadlockError, redis.RedisError, OSError):
                released = None
            out.write(json.dumps(dict(key=key, holder=holder, fence=fence, start=start, end=end,
                                      writes=writes, released=released, master=f"{host}:{port}",
                                      answered=time.time())) + "\n")
        except (redis.RedisError, MasterNotFoundError, PadlockError, OSError):
            asked = 0.0  # ask Sentinel again
            time.sleep(0.05)


# --- the checker ---------------------------------------------------------------

def fault_at(windows, t, after=5.0):
    """The fault whose window (and `after` seconds past its healing) holds t."""
    for fault, start, healed in windows:
        if start <= t <= healed + after:
            return fault
    return "none"


def check(sections, store_logs, windows):
    """Totals, and per fault: overlaps (fenced / stopped by the client) and
    the longest a key went without a grant from the fault's start until
    five seconds past its healing."""
    def row_of(fault):
        return per.setdefault(fault, dict(overlaps=0, fenced=0, stopped=0, lost=0, recover_s=0.0))

    per = {}
    for f in [*FAULTS, "none"]:
        row_of(f)
    lost = 0
    by_key = {}
    for s in sections:
        by_key.setdefault(s["key"], []).append(s)
    for ss in by_key.values():
        ss.sort(key=lambda s: s["start"])
        for i, s in enumerate(ss):
            for t in ss[:i]:
                if t["end"] > s["start"] and t["holder"] != s["holder"]:
                    row = row_of(fault_at(windows, s["start"]))
                    row["overlaps"] += 1
                    both = s["writes"] + t["writes"]
                    if False in both:
                        row["fenced"] += 1  # the store refused a write of the pair
                    elif None in both:
                        row["stopped"] += 1  # the client said it no longer held, and wrote no more
            if s["released"] is False and (s["answered"] - s["start"]) < TTL * 0.9:
                lost += 1
                row_of(fault_at(windows, s["start"]))["lost"] += 1
    for fault, start, healed in windows:
        row = row_of(fault)
        for ss in by_key.values():
            starts = [s["start"] for s in ss]
            if not starts:
                continue
            # The longest a key went without a grant, from the fault's start
            # until five seconds past its healing.
            inside = [start, *(t for t in starts if start <= t <= healed + 5.0), min(healed + 5.0, starts[-1])]
            gap = max(b - a for a, b in zip(inside, inside[1:]))
            row["recover_s"] = round(max(row["recover_s"], gap), 2)
    out_of_order = shared = interleaved = 0
    for entries in store_logs.values():
        parsed = [(h, int(f), half) for h, f, half in (e.split() for e in entries)]
        out_of_order += sum(b[1] < a[1] for a, b in zip(parsed, parsed[1:]))
        owners = {}
        for h, f, _ in parsed:
            owners.setdefault(f, set()).add(h)
        shared += sum(len(hs) > 1 for hs in owners.values())
        # A section's start and end writes with another section's between.
        opened = {}
        for n, (h, f, half) in enumerate(parsed):
            if half == "0":
                opened[(h, f)] = n
            elif (h, f) in opened and any((x, y) != (h, f) for x, y, _ in parsed[opened[(h, f)] + 1:n]):
                interleaved += 1
    return dict(per_fault=per, overlaps=sum(r["overlaps"] for r in per.values()),
                fenced=sum(r["fenced"] for r in per.values()), stopped=sum(r["stopped"] for r in per.values()),
                accepted_out_of_order=out_of_order, fence_of_two_holders=shared,
                interleaved_at_store=interleaved, grants_lost=lost)


# --- one configuration ----------------------------------------------------------

def run(grace, min_replicas, replicas, seed, subnet):
    net = Net(subnet)
    root = tempfile.mkdtemp(prefix="padlock-partitions-")
    nodes, procs = [], []
    try:
        master = Node(net, "m", root, data_args(grace, min_replicas))
        reps = [Node(net, f"r{i}", root, data_args(grace, min_replicas, master)) for i in (1, 2)]
        sentinels = [Node(net, f"s{i}", root, sentinel_args(master)) for i in (1, 2, 3)]
        store = Node(net, "store", root, lambda n: ["--save", "", "--appendonly", "no"])
        for i in range(WORKERS):
            net.add(f"w{i}")
        net.add("ctl")
        setns(net.ns("ctl"))
        for n in [master, *reps, *sentinels, store]:
            nodes.append(n)
            n.start()
        time.sleep(2.0)
        stop_at = time.time() + SECONDS
        logs = os.path.join(root, "logs")
        os.makedirs(logs)
        for i in range(WORKERS):
            spec = dict(holder=f"w{i}", seed=seed * 100 + i, stop_at=stop_at, replicas=replicas,
                        sentinels=[(s.ip, s.port) for s in sentinels], store=(store.ip, store.port),
                        log=os.path.join(logs, f"w{i}.log"))
            procs.append(subprocess.Popen(net.exec(f"w{i}", [sys.executable, __file__, "--worker",
                                                             json.dumps(spec)])))
        windows, failovers = inject(net, [master, *reps], sentinels, random.Random(seed), stop_at)
        for p in procs:
            try:
                p.wait(timeout=max(1, stop_at - time.time()) + 15)
            except subprocess.TimeoutExpired:
                p.kill()
        sections = []
        for name in os.listdir(logs):
            with open(os.path.join(logs, name)) as f:
                sections += [json.loads(line) for line in f if line.strip()]
        sc = store.client()
        store_logs = {k: [e.decode() for e in sc.lrange(f"log:{k}", 0, -1)] for k in KEYS}
        return dict(grace=grace, min_replicas=min_replicas, replicas=replicas, sections=len(sections),
                    failovers=failovers, **check(sections, store_logs, windows))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        for n in nodes:
            n.stop()
        net.close()
        shutil.rmtree(root, ignore_errors=True)


FAULTS = ["isolate_master", "isolate_client", "isolate_client_idle", "cut_replication"]


def inject(net, data_nodes, sentinels, rng, stop_at):
    """Each fault in turn until the run's end nears: [(fault, start, healed)]
    and the failovers seen."""
    data = {f"{n.ip}:{n.port}": n for n in data_nodes}
    sentinel = Sentinel([(s.ip, s.port) for s in sentinels], socket_timeout=0.5)
    windows, seen, failovers = [], None, 0
    turn = rng.randrange(len(FAULTS))
    while time.time() < stop_at - 8:
        time.sleep(rng.uniform(1.0, 2.0))
        try:
            host, port = sentinel.discover_master("m")
        except MasterNotFoundError:
            continue
        m = data[f"{host}:{port}"]
        failovers += seen is not None and m is not seen
        seen = m
        others = [n.name for n in data_nodes if n is not m]
        fault = FAULTS[turn % len(FAULTS)]
        turn += 1
        start = time.time()
        try:
            if fault == "isolate_master":
                # Two workers stay on the old master's side.
                rest = [*others, *(s.name for s in sentinels), *(f"w{i}" for i in range(2, WORKERS))]
                net.cut([m.name, "w0", "w1"], rest)
                time.sleep(6.0)  # Sentinel fails over meanwhile
            elif fault.startswith("isolate_client"):
                # Its KEEP connection half-open; with keep-max-idle-ms the
                # server stops keeping the lease after a second of silence.
                idle = fault.endswith("idle")
                if idle:
                    m.client().config_set("padlock.keep-max-idle-ms", 1000)
                net.cut([f"w{rng.randrange(WORKERS)}"], [m.name])
                time.sleep(3.0)
                if idle:
                    m.client().config_set("padlock.keep-max-idle-ms", 0)
            else:
                net.cut([m.name], others, one_way=True)  # the replication stream only
                time.sleep(3.0)
        except redis.RedisError:
            fault += " (config failed)"
        finally:
            net.heal()
        windows.append((fault, start, time.time()))
    return windows, failovers


def main():
    if "--worker" in sys.argv:
        worker(json.loads(sys.argv[sys.argv.index("--worker") + 1]))
        return
    if os.geteuid() != 0:
        sys.exit("make partitions needs root (network namespaces and iptables)")
    # Ended by a signal: the cleanup (`finally`) runs as on Ctrl-C.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    signal.signal(signal.SIGHUP, lambda *_: sys.exit(1))
    clean_stale()
    configs = [(g, mr, rep) for g in ("0", "auto") for mr in (0, 1) for rep in (False, True)]
    results = []
    for n, (grace, mr, rep) in enumerate(configs):
        # Each configuration in a child process: it moves into the run's
        # control namespace, and its cleanup runs however it ends.
        out = f"/tmp/padlock-partitions-{os.getpid()}-{n}.json"
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                with open(out, "w") as f:
                    json.dump(run(grace, mr, rep, 7, 10 + n), f)
                code = 0
            finally:
                os._exit(code)
        while True:
            try:
                os.waitpid(pid, 0)
                break
            except KeyboardInterrupt:
                continue  # the child cleans up first
        if os.path.exists(out):
            with open(out) as f:
                text = f.read()
            os.remove(out)
            if text:
                results.append(json.loads(text))
                print(json.dumps(results[-1]), flush=True)
    print_table(results)
    bad = [r for r in results if r["accepted_out_of_order"] or r["interleaved_at_store"]]
    sys.exit(1 if bad or len(results) != len(configs) else 0)


def print_table(results):
    """The matrix: a row per fault (overlaps: fenced by the store, stopped
    by the client; grants lost; the longest a key went without a grant),
    then totals."""
    head = [f"grace {r['grace']}, min-replicas {r['min_replicas']}, replicas={int(r['replicas'])}"
            for r in results]
    print("| fault | " + " | ".join(head) + " |")
    print("| --- |" + " --- |" * len(results))
    for f in [*FAULTS, "none"]:
        cells = []
        for r in results:
            row = r["per_fault"].get(f)
            if row is None:
                cells.append("—")
                continue
            cell = f"{row['overlaps']} ({row['fenced']} fenced, {row['stopped']} stopped), {row['lost']} lost"
            cells.append(cell + (f", {row['recover_s']} s" if f != "none" else ""))
        print(f"| {f} | " + " | ".join(cells) + " |")
    for k in ["sections", "failovers", "overlaps", "fenced", "stopped", "accepted_out_of_order",
              "fence_of_two_holders", "interleaved_at_store", "grants_lost"]:
        print(f"| {k} | " + " | ".join(str(r[k]) for r in results) + " |")


if __name__ == "__main__":
    main()
