"""make torture: faults on purpose, and a checker.

A primary (AOF, appendfsync always), a replica and three Sentinels, all on
loopback. Worker processes find the master through Sentinel and loop:
acquire (LOCK.ACQUIRE ... BLOCK, SEM.ACQUIRE, LOCK.MACQUIRE) -> critical
section -> release, on a few hot keys, logging every critical section.
Meanwhile a fault injector, on a fixed seed, kill -9s workers, kill -9s
and restarts the primary, asks Sentinel for a failover, stops the primary
past a lease (SIGSTOP/SIGCONT), kills clients, makes the server sleep,
and, through a loopback proxy in front of each server, loses the reply to
a command the server applied (the connection closes) or leaves a
connection half-open. Workers resend as redis-py 8 does by default (10
retries), with a request-id (`ID`) on every changing command.

The checker then reports per run: critical sections, overlaps (two holders
of a lock at once, or more than the limit of a semaphore), fences going
backwards, acknowledged grants lost (a release answered NOTHELD before the
lease could have run out), workers that never got an answer, and whether
blocked clients, wait edges and padlock's values are back to zero at the
end. It runs once with the restart grace off and once with `auto`.

PADLOCK_TORTURE_SECONDS (default 90) is the length of each run.
"""

import json
import multiprocessing as mp
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import uuid

import redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry
from redis.sentinel import MasterNotFoundError, Sentinel

import pathlib
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # scripts/: harness, faultproxy
from faultproxy import FaultProxy
from harness import FAR_PTTL, SO, free_port

SECONDS = float(os.environ.get("PADLOCK_TORTURE_SECONDS", "90"))
SERVER = os.environ.get("PADLOCK_SERVER") or shutil.which("redis-server")
TTL = 1000
LOCKS = ["L1", "L2", "L3"]
MULTI = ["{M}a", "{M}b"]
SEM, SEM_LIMIT = "S", 2


class Node:
    def __init__(self, root, name, args):
        self.dir = os.path.join(root, name)
        os.makedirs(self.dir, exist_ok=True)
        self.port = free_port()
        self.args = args
        self.proc = None
        # Killed while it was the master: it comes back as one (Sentinel
        # demotes it if it failed over meanwhile), never as a replica of a
        # node that may itself be replicating from it.
        self.was_master = False

    def start(self):
        self.proc = subprocess.Popen(
            [SERVER, *self.args(self), "--port", str(self.port), "--bind", "127.0.0.1",
             "--dir", self.dir, "--logfile", os.path.join(self.dir, "log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(500):
            try:
                if redis.Redis(port=self.port, socket_timeout=1).ping():
                    return
            except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError):
                time.sleep(0.02)

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def data_node(grace, min_replicas=0):
    def args(node):
        return ["--appendonly", "yes", "--appendfsync", "always", "--save", "",
                "--min-replicas-to-write", str(min_replicas), "--min-replicas-max-lag", "2",
                "--repl-diskless-sync-delay", "0", "--enable-debug-command", "yes",
                "--loadmodule", SO, "restart-grace-ms", grace]
    return args


def sentinel_node(master_port):
    def args(node):
        conf = os.path.join(node.dir, "sentinel.conf")
        if not os.path.exists(conf):
            with open(conf, "w") as f:
                f.write(f"sentinel monitor m 127.0.0.1 {master_port} 2\n"
                        "sentinel down-after-milliseconds m 1000\n"
                        "sentinel failover-timeout m 4000\n")
        return [conf, "--sentinel"]
    return args


def with_id(cmd):
    return [*cmd, "ID", uuid.uuid4().hex]


def worker(idx, sentinels, proxies, log_path, stop_at, seed):
    rng = random.Random(seed)
    holder = f"w{idx}-{os.getpid()}"
    sentinel = Sentinel([("127.0.0.1", p) for p in sentinels], socket_timeout=3)
    out = open(log_path, "a", buffering=1)

    def note(**kw):
        out.write(json.dumps(kw) + "\n")

    def section(r, port, acquire, release, records):
        """acquire -> critical section -> release, logged per record. A
        section that outlasted its lease (counted from the acquire's first
        sending: a resend may answer a grant made then) is noted as such."""
        sent = time.time()
        got = r.execute_command(*with_id(acquire))
        if got is None:
            return
        start = time.time()
        time.sleep(rng.uniform(0.01, 0.3))
        end = time.time()
        expired = end > sent + TTL / 1000
        try:
            r.execute_command(*with_id(release))
            ok = True
        except redis.ResponseError as e:
            # NOTHELD: the hold was gone. Anything else (NOREPLICAS,
            # READONLY after a failover) says nothing about it.
            ok = False if str(e).startswith("NOTHELD") else None
        for rec in records(got):
            note(**rec, holder=holder, start=start, end=end, released=ok,
                 answered=time.time(), master=port, expired=expired)

    while time.time() < stop_at:
        try:
            port = int(sentinel.discover_master("m")[1])
            r = redis.Redis(port=proxies[port], socket_timeout=5,
                            retry=Retry(ExponentialBackoff(cap=0.2), 10),
                            retry_on_error=[redis.ConnectionError, redis.TimeoutError])
            kind = rng.random()
            if kind < 0.6:
                key = rng.choice(LOCKS)
                section(r, port, ["LOCK.ACQUIRE", key, holder, TTL, "BLOCK", 2000],
                        ["LOCK.RELEASE", key, holder],
                        lambda fence: [dict(kind="lock", key=key, fence=fence)])
            elif kind < 0.8:
                # Half of them bound to the connection (KEEP): the end
                # state checks that no such lease outlives its workers.
                keep = ["KEEP"] if rng.random() < 0.5 else []
                section(r, port, ["SEM.ACQUIRE", SEM, holder, SEM_LIMIT, TTL, "BLOCK", 2000, *keep],
                        ["SEM.RELEASE", SEM, holder],
                        lambda _: [dict(kind="sem", key=SEM)])
            else:
                section(r, port, ["LOCK.MACQUIRE", 2, *MULTI, holder, TTL, "BLOCK", 2000],
                        ["LOCK.MRELEASE", 2, *MULTI, holder],
                        lambda fences: [dict(kind="lock", key=k, fence=f)
                                        for k, f in zip(MULTI, fences)])
        except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError,
                MasterNotFoundError, redis.ReadOnlyError, OSError):
            time.sleep(0.05)
    note(kind="done", holder=holder, at=time.time())


def check(sections, ttl_ms):
    """Overlaps, fences backwards (on one master, and across masters, as a
    split brain after a failover makes them), and grants lost: a release
    answered NOTHELD before the lease could have run out."""
    overlaps = split = backwards = across = lost = again = 0
    by_key = {}
    for s in sections:
        by_key.setdefault(s["key"], []).append(s)
    for key, ss in by_key.items():
        ss.sort(key=lambda s: s["start"])
        limit = SEM_LIMIT if key == SEM else 1
        for i, s in enumerate(ss):
            if s.get("expired"):
                continue
            inside = [t for t in ss[:i] if t["end"] > s["start"] and t["holder"] != s["holder"]
                      and not t.get("expired")]
            if len(inside) >= limit:
                # Two masters at once (a split brain while Sentinel fails
                # over) is not one server breaking its own rules.
                if all(t["master"] == s["master"] for t in inside):
                    overlaps += 1
                else:
                    split += 1
                if os.environ.get("PADLOCK_TORTURE_SHOW") and overlaps + split <= 5:
                    print("overlap:", json.dumps(inside[-1]), "\n     and", json.dumps(s))
            prev = ss[i - 1] if i else None
            if key != SEM and prev and s["fence"] == prev["fence"] and s["holder"] == prev["holder"]:
                # The same holder again with the same fence: its release was
                # refused (READONLY after a failover, NOREPLICAS) or never
                # answered, so it still held the lock and re-entered it.
                again += 1
            elif key != SEM and prev and s["fence"] <= prev["fence"]:
                if os.environ.get("PADLOCK_TORTURE_SHOW"):
                    print("backwards:", json.dumps(prev), "\n      then", json.dumps(s))
                if s["master"] == prev["master"]:
                    backwards += 1
                else:
                    across += 1
        for s in ss:
            if s["released"] is False and (s["answered"] - s["start"]) * 1000 < ttl_ms * 0.9:
                lost += 1
    return overlaps, split, backwards, across, lost, again


def run(grace, seconds, seed, min_replicas=0):
    root = tempfile.mkdtemp(prefix="padlock-torture-")
    primary = Node(root, "primary", data_node(grace, min_replicas))
    primary.start()
    replica_args = data_node(grace, min_replicas)
    replica = Node(root, "replica", lambda n: [*replica_args(n), *([] if n.was_master else [
        "--replicaof", "127.0.0.1", str(primary.port)])])
    replica.start()
    sentinels = [Node(root, f"sentinel{i}", sentinel_node(primary.port)) for i in range(3)]
    for s in sentinels:
        s.start()
    time.sleep(1.5)
    data = {primary.port: primary, replica.port: replica}
    proxies = {port: FaultProxy(port) for port in data}
    proxy_ports = {port: p.port for port, p in proxies.items()}
    stop_at = time.time() + seconds
    logs = os.path.join(root, "logs")
    os.makedirs(logs)
    sports = [s.port for s in sentinels]
    procs = {}

    def spawn(i):
        p = mp.Process(target=worker, args=(i, sports, proxy_ports, os.path.join(logs, f"{i}.log"), stop_at,
                                            seed * 100 + i + len(procs)), daemon=True)
        p.start()
        procs[i] = p

    for i in range(8):
        spawn(i)
    rng = random.Random(seed)
    faults = {}
    sentinel = Sentinel([("127.0.0.1", p) for p in sports], socket_timeout=2)

    def master():
        host, port = sentinel.discover_master("m")
        return data[int(port)]

    while time.time() < stop_at - 3:
        time.sleep(rng.uniform(1.0, 3.0))
        fault = rng.choice(["kill_worker", "kill_primary", "failover", "stop_primary",
                            "client_kill", "debug_sleep", "lost_reply", "half_open"])
        try:
            m = master()
            mc = redis.Redis(port=m.port, socket_timeout=5)
            if fault == "kill_worker":
                i = rng.randrange(len(procs))
                if procs[i].is_alive():
                    os.kill(procs[i].pid, signal.SIGKILL)
                procs[i].join()
                spawn(i)
            elif fault == "kill_primary":
                m.was_master = True
                m.kill()
                time.sleep(0.2)
                m.start()
            elif fault == "failover":
                redis.Redis(port=sports[0], socket_timeout=5).execute_command("SENTINEL", "FAILOVER", "m")
            elif fault == "stop_primary":
                m.proc.send_signal(signal.SIGSTOP)
                time.sleep(TTL / 1000 + 0.3)
                m.proc.send_signal(signal.SIGCONT)
            elif fault in ("lost_reply", "half_open"):
                cmd = rng.choice(["LOCK.ACQUIRE", "LOCK.RELEASE", "SEM.ACQUIRE", "SEM.RELEASE",
                                  "LOCK.MACQUIRE", "LOCK.MRELEASE"])
                proxies[m.port].drop(cmd, mode="close" if fault == "lost_reply" else "hang")
            elif fault == "client_kill":
                mc.execute_command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
            else:
                mc.execute_command("DEBUG", "SLEEP", "0.5")
            faults[fault] = faults.get(fault, 0) + 1
        except (redis.RedisError, MasterNotFoundError, OSError) as e:
            faults[f"{fault} (failed: {type(e).__name__})"] = faults.get(fault, 0) + 1
    hung = 0
    for p in procs.values():
        p.join(15)
        if p.is_alive():
            hung += 1
            p.kill()
    sections = []
    for name in os.listdir(logs):
        with open(os.path.join(logs, name)) as f:
            for line in f:
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue  # a worker killed mid-line
                if rec["kind"] != "done":
                    sections.append(rec)
    overlaps, split, backwards, across, lost, again = check(sections, TTL)
    time.sleep(TTL / 1000 + 0.5)
    # The last fault may have left Sentinel without a master for a while
    # (a failover under way): the end state is read once there is one.
    leftover = ("unknown",)
    kept_unbound = -1
    patience = time.time() + 30
    while True:
        try:
            mc = redis.Redis(port=master().port, socket_timeout=5)
            info = mc.info("padlock")
            leftover = (info["padlock_blocked_clients"], info["padlock_wait_edges"],
                        info["padlock_locks"] + info["padlock_semaphores"])
            # Every worker is gone: no lease may be held far away now.
            kept_unbound = sum(mc.pttl(k) > FAR_PTTL for k in mc.scan_iter(count=1000))
            break
        except (redis.RedisError, MasterNotFoundError, OSError) as e:
            leftover = (f"unknown: {e}",)
            if time.time() > patience:
                break
            time.sleep(0.5)
    for n in [*sentinels, replica, primary]:
        n.kill()
    dropped = sum(p.dropped for p in proxies.values())
    for p in proxies.values():
        p.close()
    shutil.rmtree(root, ignore_errors=True)
    return {
        "grace": grace, "min_replicas": min_replicas, "seconds": seconds, "sections": len(sections),
        "lock_sections": sum(s["kind"] == "lock" for s in sections),
        "sem_sections": sum(s["kind"] == "sem" for s in sections),
        "overlaps_one_master": overlaps, "overlaps_two_masters": split,
        "fences_backwards_same_master": backwards,
        "fences_backwards_across_masters": across, "grants_lost": lost,
        "reentered_after_refused_release": again, "workers_hung": hung, "left_blocked_edges_values": leftover, "faults": faults,
        "replies_lost_or_hung": dropped,
        "sections_past_their_lease": sum(bool(s.get("expired")) for s in sections),
        "leases_kept_with_nobody_bound": kept_unbound,
    }


def main():
    results = [run("0", SECONDS, 7), run("auto", SECONDS, 7), run("auto", SECONDS, 7, 1)]
    print("| measure | grace off | grace auto | grace auto, min-replicas-to-write 1 |")
    print("| --- | --- | --- | --- |")
    for k in ["seconds", "sections", "lock_sections", "sem_sections", "overlaps_one_master",
              "overlaps_two_masters",
              "fences_backwards_same_master", "fences_backwards_across_masters", "grants_lost",
              "reentered_after_refused_release", "workers_hung", "left_blocked_edges_values",
              "replies_lost_or_hung", "sections_past_their_lease", "leases_kept_with_nobody_bound"]:
        print(f"| {k} | " + " | ".join(str(r[k]) for r in results) + " |")
    for r in results:
        print(f"faults (grace {r['grace']}, min-replicas {r['min_replicas']}): "
              f"{json.dumps(r['faults'], sort_keys=True)}")
    bad = [r for r in results if r["workers_hung"] or r["left_blocked_edges_values"][:2] != (0, 0)
           or r["leases_kept_with_nobody_bound"] != 0]
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
