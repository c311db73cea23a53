"""make bench: padlock against the baselines, side by side on one server.

1. Throughput (redis-benchmark, 50 clients, unpipelined and -P 16) and the
   server's own cost per call (INFO commandstats usec_per_call) of
   - SET key v NX PX 5000            (the simplest non-reentrant lock)
   - Redisson's reentrant-acquire Lua script through EVALSHA
   - LOCK.ACQUIRE key holder 5000
2. Memory per lock for 100,000 locks of each kind.
3. Release-to-grant latency with 50 blocked waiters handing one lock on.
4. KEEP: 100,000 leases of 30 s bound by 4 connections: renewals per
   second, server CPU per renewal (against the idle server), bytes per
   binding; and bytes per reader of a read-write lock with 10,000 readers.
5. Instructions per call, counted by callgrind (repeatable, unlike the
   timings on a busy 2-core machine), when valgrind is installed.
"""

import re
import shutil
import statistics
import subprocess
import tempfile
import threading
import time

from harness import SO, Server

N = 200_000
KEYS = 100_000

LUA = """
if redis.call('exists', KEYS[1]) == 0 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil
end
return redis.call('pttl', KEYS[1])
"""


def bench(server, r, name, args, pipeline):
    r.flushall()
    r.config_resetstat()
    out = subprocess.run(
        ["redis-benchmark", "-p", str(server.port), "-n", str(N), "-c", "50", "-r", str(KEYS),
         "-P", str(pipeline), "-q", "--csv", *args],
        capture_output=True, text=True, check=True).stdout
    rps = float(out.strip().splitlines()[-1].split(",")[1].strip('"'))
    stats = r.info("commandstats")
    usec = stats[f"cmdstat_{name}"]["usec_per_call"]
    return rps, usec


def memory(r, fill):
    r.flushall()
    before = r.info("memory")["used_memory"]
    p = r.pipeline(transaction=False)
    for i in range(KEYS):
        fill(p, i)
        if i % 5000 == 4999:
            p.execute()
    p.execute()
    return (r.info("memory")["used_memory"] - before) / KEYS


def handoff_latency(server, waiters=50, rounds=40):
    r = server.client()
    r.flushall()
    r.execute_command("LOCK.ACQUIRE", "lat", "start", 60000)
    released_at = {}
    samples = []
    lock = threading.Lock()
    remaining = [waiters * rounds]

    def worker(i):
        c = server.client()
        for _ in range(rounds):
            c.execute_command("LOCK.ACQUIRE", "lat", f"w{i}", 60000, "BLOCK", 0)
            got = time.perf_counter()
            with lock:
                samples.append(got - released_at["t"])
                remaining[0] -= 1
                released_at["t"] = time.perf_counter()
            c.execute_command("LOCK.RELEASE", "lat", f"w{i}")

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(waiters)]
    for t in threads:
        t.start()
    while r.info("padlock")["padlock_blocked_clients"] < waiters:
        time.sleep(0.01)
    released_at["t"] = time.perf_counter()
    r.execute_command("LOCK.RELEASE", "lat", "start")
    for t in threads:
        t.join(120)
    samples.sort()
    ms = [s * 1000 for s in samples]
    return len(ms), statistics.median(ms), ms[int(len(ms) * 0.99) - 1]


def cpu(r):
    i = r.info("cpu")
    return i["used_cpu_sys"] + i["used_cpu_user"]


def keep_cost(server, n=100_000, conns=4, ttl=30_000, window=12):
    r = server.client()
    r.flushall()
    p = r.pipeline(transaction=False)
    for i in range(n):
        p.execute_command("LOCK.ACQUIRE", f"keep:{i}", "me", ttl)
        if i % 5000 == 4999:
            p.execute()
    p.execute()
    c0, t0 = cpu(r), time.time()
    time.sleep(window / 2)
    idle = (cpu(r) - c0) / (time.time() - t0)
    before = r.info("memory")["used_memory"]
    clients = [server.client() for _ in range(conns)]
    for j, c in enumerate(clients):
        p = c.pipeline(transaction=False)
        for i in range(j, n, conns):
            p.execute_command("LOCK.EXTEND", f"keep:{i}", "me", ttl, "KEEP")
        p.execute()
    per_binding = (r.info("memory")["used_memory"] - before) / n
    time.sleep(ttl / 3000 + 1)
    k0, c0, t0 = r.info("padlock")["padlock_keep_renewals"], cpu(r), time.time()
    time.sleep(window)
    rate = (r.info("padlock")["padlock_keep_renewals"] - k0) / (time.time() - t0)
    busy = (cpu(r) - c0) / (time.time() - t0)
    for c in clients:
        c.close()
    return rate, (busy - idle) / rate * 1e6, busy, per_binding


def rw_bytes_per_reader(server, n=10_000):
    r = server.client()
    r.flushall()
    before = r.info("memory")["used_memory"]
    p = r.pipeline(transaction=False)
    for i in range(n):
        p.execute_command("RWLOCK.ACQUIRE", "rw", f"holder-{i:08d}", "READ", 60000)
    p.execute()
    return (r.info("memory")["used_memory"] - before) / n, r.memory_usage("rw", samples=0) / n


def instructions(name, args, lua_sha_script=None):
    """Instructions the server spends in call() per request, under callgrind."""
    out = tempfile.mktemp(prefix="padlock-cg-")
    server = Server(extra=())
    port = server.port
    server.stop()
    proc = subprocess.Popen(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", "redis-server",
         "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--loadmodule", SO],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    import redis
    r = redis.Redis(port=port)
    for _ in range(300):
        try:
            r.ping()
            break
        except redis.ConnectionError:
            time.sleep(0.1)
    if lua_sha_script:
        sha = r.script_load(lua_sha_script)
        args = [sha if a == "SHA" else a for a in args]
    n = 20000
    subprocess.run(["redis-benchmark", "-p", str(port), "-n", str(n), "-c", "10", "-P", "16",
                    "-r", "10000", "-q", *args], capture_output=True, check=True)
    try:
        r.shutdown(nosave=True)
    except redis.ConnectionError:
        pass
    proc.wait(120)
    report = subprocess.run(["callgrind_annotate", "--inclusive=yes", out],
                            capture_output=True, text=True).stdout
    m = re.search(r"^\s*([\d,]+)\s.*\?\?\?:call \[", report, re.M)
    return int(m.group(1).replace(",", "")) / n if m else float("nan")


def main():
    server = Server()
    r = server.client()
    sha = r.script_load(LUA)
    rows = []
    for pipeline in (1, 16):
        base = bench(server, r, "set", ["SET", "lock:__rand_int__", "v", "NX", "PX", "5000"], pipeline)
        lua = bench(server, r, "evalsha", ["EVALSHA", sha, "1", "lock:__rand_int__", "5000", "holder"], pipeline)
        mine = bench(server, r, "lock.acquire", ["LOCK.ACQUIRE", "lock:__rand_int__", "holder", "5000"], pipeline)
        rows.append((pipeline, base, lua, mine))

    mem_set = memory(r, lambda p, i: p.set(f"lock:{i}", "holder", nx=True, px=60000))
    mem_lua = memory(r, lambda p, i: p.evalsha(sha, 1, f"lock:{i}", 60000, "holder"))
    mem_mine = memory(r, lambda p, i: p.execute_command("LOCK.ACQUIRE", f"lock:{i}", "holder", 60000))

    n, p50, p99 = handoff_latency(server)
    keep = keep_cost(server)
    rw = rw_bytes_per_reader(server)
    server.stop()

    ins = None
    if shutil.which("valgrind") and shutil.which("callgrind_annotate"):
        ins = (
            instructions("set", ["SET", "lock:__rand_int__", "v", "NX", "PX", "5000"]),
            instructions("evalsha", ["EVALSHA", "SHA", "1", "lock:__rand_int__", "5000", "holder"], LUA),
            instructions("lock.acquire", ["LOCK.ACQUIRE", "lock:__rand_int__", "holder", "5000"]),
        )

    print("| measure | SET NX PX | Lua (EVALSHA) | LOCK.ACQUIRE | LOCK.ACQUIRE vs SET NX | vs Lua |")
    print("| --- | --- | --- | --- | --- | --- |")
    for pipeline, base, lua, mine in rows:
        print(f"| req/s, 50 clients, -P {pipeline} | {base[0]:,.0f} | {lua[0]:,.0f} | {mine[0]:,.0f} "
              f"| {mine[0] / base[0]:.2f}x | {mine[0] / lua[0]:.2f}x |")
        print(f"| server usec/call, -P {pipeline} | {base[1]:.2f} | {lua[1]:.2f} | {mine[1]:.2f} "
              f"| {mine[1] / base[1]:.2f}x | {mine[1] / lua[1]:.2f}x |")
    if ins:
        print(f"| server instructions/call (callgrind) | {ins[0]:,.0f} | {ins[1]:,.0f} | {ins[2]:,.0f} "
              f"| {ins[2] / ins[0]:.2f}x | {ins[2] / ins[1]:.2f}x |")
    print(f"| bytes per lock (100k locks) | {mem_set:.0f} | {mem_lua:.0f} | {mem_mine:.0f} "
          f"| {mem_mine / mem_set:.2f}x | {mem_mine / mem_lua:.2f}x |")
    print()
    print(f"release-to-grant latency, 50 blocked waiters, {n} hand-offs: "
          f"p50 {p50:.3f} ms, p99 {p99:.3f} ms (client-observed, Python clients)")
    print(f"KEEP, 100,000 leases of 30 s on 4 connections: {keep[0]:,.0f} renewals/s, "
          f"{keep[1]:.1f} us server CPU per renewal ({keep[2] * 100:.1f}% of a core in all), "
          f"{keep[3]:.0f} bytes per binding")
    print(f"read-write lock, 10,000 readers: {rw[0]:.0f} bytes per reader (used_memory), "
          f"MEMORY USAGE says {rw[1]:.0f}")


if __name__ == "__main__":
    main()
