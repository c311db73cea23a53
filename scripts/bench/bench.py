"""make bench: padlock against its baselines, side by side, on this machine.

1. Per command (scripts/bench/cost.py): instructions per call inside `call()`
   (callgrind) and requests per second at pipeline 16, each as a ratio to
   `SET key v NX PX` measured in the same run, on Redis 7.0 and 8.0, alone
   and with AOF on and a replica attached.
2. Contended: many processes, one lock. padlock's `LOCK.ACQUIRE ... BLOCK`
   against redis-py's `Lock` (with its defaults) and python-redis-lock:
   critical sections per second, per-worker min/max (fairness), waits.
3. Memory per lock, release-to-grant latency with 50 waiters, the cost of
   KEEP, bytes per reader of a read-write lock.

Writes docs/benchmarks.md (every table), docs/benchmarks.json (the
figures), docs/benchmarks.png (the chart; `bench.py --chart` draws it again
from the JSON) and the tables between the bench markers of README.md.
"""

import json
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import threading
import time

import redis

import pathlib
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # scripts/: harness, faultproxy
import cost
from harness import ROOT, Server

DOCS = ROOT / "docs"
README = ROOT / "README.md"
START, END = "<!-- bench:start -->", "<!-- bench:end -->"
# Notes written by hand in docs/benchmarks.md (what a run found, and why):
# a new run keeps them, after its tables.
NOTES_START, NOTES_END = "<!-- notes:start -->", "<!-- notes:end -->"


def kept_notes(path):
    """The hand-written notes block of `path`, markers included, or ""."""
    text = path.read_text() if path.exists() else ""
    a, b = text.find(NOTES_START), text.find(NOTES_END)
    return text[a:b + len(NOTES_END)] if 0 <= a < b else ""


def unpacked(which):
    return subprocess.run([str(ROOT / "scripts/redis8.sh"), which], capture_output=True, text=True,
                          check=True).stdout.strip().splitlines()[-1]


def servers():
    """(label, binary, with AOF + replica too)."""
    return [("Redis 7.0", "redis-server", True), ("Redis 8.0", unpacked("redis"), True),
            ("Valkey 9.1", unpacked("valkey91"), True)]


def per_command():
    """{(server, aof): (instructions, rps)} for every case."""
    out = {}
    for label, binary, with_aof in servers():
        for aof in (False, True) if with_aof else (False,):
            print(f"==> {label}{', AOF + replica' if aof else ''}: callgrind, then req/s", flush=True)
            out[(label, aof)] = (cost.instructions(binary, aof), cost.throughput(binary, aof))
    return out


# --- contended: many processes, one lock ---------------------------------

HOLD_S = 0.001


def _contender(kind, port, idx, seconds, q):
    r = redis.Redis(port=port)
    me = f"w{idx}"
    waits, done = [], 0
    if kind == "padlock":
        def acquire():
            while r.execute_command("LOCK.ACQUIRE", "hot", me, 10000, "BLOCK", 10000) is None:
                pass

        def release():
            r.execute_command("LOCK.RELEASE", "hot", me)
    elif kind == "redis-py Lock":
        lock = r.lock("hot", timeout=10)
        acquire, release = (lambda: lock.acquire(blocking=True)), lock.release
    else:
        import redis_lock
        lock = redis_lock.Lock(r, "hot", expire=10)
        acquire, release = (lambda: lock.acquire(blocking=True)), lock.release
    end = time.time() + seconds
    while time.time() < end:
        t0 = time.perf_counter()
        acquire()
        waits.append(time.perf_counter() - t0)
        time.sleep(HOLD_S)
        release()
        done += 1
    q.put((done, waits))


def contended(procs=8, seconds=8):
    rows = []
    for kind in ("padlock", "redis-py Lock", "python-redis-lock"):
        server = Server()
        q = mp.Queue()
        ps = [mp.Process(target=_contender, args=(kind, server.port, i, seconds, q)) for i in range(procs)]
        for p in ps:
            p.start()
        results = [q.get(timeout=seconds + 60) for _ in ps]
        for p in ps:
            p.join(30)
        server.stop()
        counts = [c for c, _ in results]
        waits = sorted(w * 1000 for _, ws in results for w in ws)
        rows.append({
            "lock": kind, "sections_per_s": sum(counts) / seconds,
            "fairness": min(counts) / max(counts) if max(counts) else 0.0,
            "p50_ms": statistics.median(waits), "p99_ms": waits[int(len(waits) * 0.99) - 1],
            # Percentiles pool every worker's waits, so a worker that an
            # unfair lock starves weighs as little as its few acquires;
            # its wait shows here.
            "max_ms": waits[-1],
        })
        print(f"    {kind}: {rows[-1]}", flush=True)
    return rows


# --- memory, hand-off latency, KEEP, readers -------------------------------

KEYS = 100_000


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
    released_at, samples, lock = {}, [], threading.Lock()

    def worker(i):
        c = server.client()
        for _ in range(rounds):
            c.execute_command("LOCK.ACQUIRE", "lat", f"w{i}", 60000, "BLOCK", 0)
            got = time.perf_counter()
            with lock:
                samples.append(got - released_at["t"])
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
    ms = sorted(s * 1000 for s in samples)
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
    return rate, busy - idle, busy, per_binding


def rw_bytes_per_reader(n=10_000):
    # A server of its own: on one that ran the KEEP runs, memory freed
    # meanwhile (their connections' buffers) once made this negative.
    server = Server()
    try:
        r = server.client()
        before = r.info("memory")["used_memory"]
        p = r.pipeline(transaction=False)
        for i in range(n):
            p.execute_command("RWLOCK.ACQUIRE", "rw", f"holder-{i:08d}", "READ", 60000)
        p.execute()
        return (r.info("memory")["used_memory"] - before) / n, r.memory_usage("rw", samples=0) / n
    finally:
        server.stop()


def extras():
    server = Server()
    r = server.client()
    sha = r.script_load(cost.LUA)
    mem = {
        "SET NX PX": memory(r, lambda p, i: p.set(f"lock:{i}", "holder", nx=True, px=60000)),
        "Lua (EVALSHA)": memory(r, lambda p, i: p.evalsha(sha, 1, f"lock:{i}", 60000, "holder")),
        "LOCK.ACQUIRE": memory(r, lambda p, i: p.execute_command("LOCK.ACQUIRE", f"lock:{i}", "holder", 60000)),
        "SEM.ACQUIRE": memory(r, lambda p, i: p.execute_command("SEM.ACQUIRE", f"s:{i}", "holder", 3, 60000)),
        "RWLOCK.ACQUIRE": memory(r, lambda p, i: p.execute_command("RWLOCK.ACQUIRE", f"rw:{i}", "holder", "WRITE", 60000)),
    }
    lat = handoff_latency(server)
    keep = keep_cost(server)
    server.stop()
    return mem, lat, keep, rw_bytes_per_reader()


# --- output --------------------------------------------------------------

CONFIGS = [("Redis 7.0", False), ("Redis 7.0", True), ("Redis 8.0", False), ("Redis 8.0", True),
           ("Valkey 9.1", False), ("Valkey 9.1", True)]

# What `ID request-id` adds: (with it, the same command without it, the
# target ratio).
ID_PAIRS = [
    ("LOCK.ACQUIRE ID", "LOCK.ACQUIRE", 1.15),
    ("LOCK.ACQUIRE, reentrant ID", "LOCK.ACQUIRE, reentrant", 1.15),
    ("SEM.ACQUIRE ID", "SEM.ACQUIRE", 1.15),
    ("RWLOCK.ACQUIRE ID", "RWLOCK.ACQUIRE", 1.15),
    ("LOCK.RELEASE ID, acquired with ID", "LOCK.RELEASE", 1.25),
    ("LOCK.RELEASE ID", "LOCK.RELEASE", 1.25),
    ("LOCK.RELEASE, inner ID", "LOCK.RELEASE, inner", 1.25),
    ("SEM.RELEASE ID", "SEM.RELEASE", 1.25),
]


def config_name(label, aof):
    return f"{label}{' + AOF + replica' if aof else ''}"


def tables(pc, cont):
    names = [c[0] for c in cost.CASES]
    head = "| command | " + " | ".join(config_name(*c) for c in CONFIGS) + " |"
    sep = "| --- |" + " --- |" * len(CONFIGS)
    lines = ["**Instructions per call** inside `call()` (callgrind), and the ratio to "
             "`SET NX PX` on the same server. Lower is better.", "", head, sep]
    for n in names:
        cells = [f"{pc[c][0][n]:,.0f} ({pc[c][0][n] / pc[c][0][cost.BASE]:.2f}x)" for c in CONFIGS]
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    lines += ["", "**Requests per second** at pipeline 16 (8 connections, 200,000 commands, "
              "each on its own key), and the ratio to `SET NX PX` in the same run. Higher is better.",
              "", head, sep]
    for n in names:
        cells = [f"{pc[c][1][n]:,.0f} ({pc[c][1][n] / pc[c][1][cost.BASE]:.2f}x)" for c in CONFIGS]
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    lines += ["", "**What `ID` adds**: instructions per call with `ID request-id` over the same "
              "command without it, same server, same run (the target beside each).", "",
              "| command | target | " + " | ".join(config_name(*c) for c in CONFIGS) + " |",
              "| --- | --- |" + " --- |" * len(CONFIGS)]
    for with_id, without, target in ID_PAIRS:
        if all(with_id in pc[c][0] and without in pc[c][0] for c in CONFIGS):
            cells = [f"{pc[c][0][with_id] / pc[c][0][without]:.2f}x" for c in CONFIGS]
            lines.append(f"| {with_id} / {without} | ≤ {target:.2f}x | " + " | ".join(cells) + " |")
    lines += ["", f"**Contended:** 8 processes, one lock, a {HOLD_S * 1000:.0f} ms critical section, "
              "8 s each, Redis 7.0. Fairness is the fewest critical sections of one "
              "worker over the most.", "",
              "| lock | critical sections/s | fairness (min/max) | wait p50 | wait p99 | longest wait |",
              "| --- | --- | --- | --- | --- | --- |"]
    for row in cont:
        longest = f"{row['max_ms']:,.2f} ms" if "max_ms" in row else "-"
        lines.append(f"| {row['lock']} | {row['sections_per_s']:,.0f} | {row['fairness']:.2f} "
                     f"| {row['p50_ms']:.2f} ms | {row['p99_ms']:.2f} ms | {longest} |")
    return "\n".join(lines)


def summary(pc, cont, at_scale=None):
    """The README's short table: the headline ratios of the run."""
    ins = {c: pc[c][0] for c in CONFIGS if c in pc}
    rows = ["| measure | padlock | baseline | ratio |", "| --- | --- | --- | --- |"]
    for cfg in CONFIGS:
        if cfg not in ins:
            continue
        for name in ("LOCK.ACQUIRE", "LOCK.RELEASE"):
            rows.append(f"| {name}, instructions per call, {config_name(*cfg)} | "
                        f"{ins[cfg][name]:,.0f} | `SET NX PX` {ins[cfg][cost.BASE]:,.0f} | "
                        f"{ins[cfg][name] / ins[cfg][cost.BASE]:.2f}x |")
    r70 = ins.get(("Redis 7.0", False))
    if r70:
        # What padlock's own clients send: every changing command with an
        # id, and a release of a hold they took with one.
        for name, measured, without in (
                ("LOCK.ACQUIRE ID", "LOCK.ACQUIRE ID", "LOCK.ACQUIRE"),
                ("LOCK.ACQUIRE KEEP ID", "LOCK.ACQUIRE KEEP ID", "LOCK.ACQUIRE"),
                ("LOCK.RELEASE ID", "LOCK.RELEASE ID, acquired with ID", "LOCK.RELEASE"),
                ("SEM.RELEASE ID", "SEM.RELEASE ID", "SEM.RELEASE")):
            if measured in r70 and without in r70:
                rows.append(f"| {name} (as the clients send it), instructions per call, Redis 7.0 | "
                            f"{r70[measured]:,.0f} | {without} without `ID`{' or `KEEP`' if 'KEEP' in name else ''} "
                            f"{r70[without]:,.0f} | {r70[measured] / r70[without]:.2f}x |")
        lua = next(n for n in r70 if n.startswith("Lua"))
        rows.append(f"| acquire, instructions per call, Redis 7.0 | {r70['LOCK.ACQUIRE']:,.0f} | "
                    f"Redisson's Lua script {r70[lua]:,.0f} | {r70['LOCK.ACQUIRE'] / r70[lua]:.2f}x |")
    for row in cont:
        rows.append(f"| contended (8 processes, one lock, 1 ms inside): {row['lock']} | "
                    f"{row['sections_per_s']:,.0f} sections/s | fairness {row['fairness']:.2f} | "
                    f"wait p99 {row['p99_ms']:.1f} ms"
                    + (f", longest {row['max_ms']:,.1f} ms |" if "max_ms" in row else " |"))
    return "\n".join(rows + at_scale_rows(at_scale or {}))


def at_scale_rows(at_scale):
    """The hot key, declared waits and KEEP lines of the README's table."""
    rows = []
    for x in at_scale.get("hot", []):
        if x.get("skipped"):
            continue
        rows.append(f"| one hot key, {x['n']:,} waiters: server µs per queued waiter | "
                    f"{x['lock_us']:.1f} | `BLPOP` {x['list_us']:.1f} | "
                    f"{x['lock_us'] / max(x['list_us'], 0.01):.1f}x |")
        rows.append(f"| one hot key, {x['n']:,} waiters: PING p99 while they queue | "
                    f"{x['lock_p99']:.1f} ms | `BLPOP` {x['list_p99']:.1f} ms | "
                    f"{x['lock_p99'] / max(x['list_p99'], 0.01):.1f}x |")
        if "mail_us" in x:
            rows.append(f"| one hot key, {x['n']:,} `MAILBOX` requests from one pipeline: server µs "
                        f"per queued request | {x['mail_us']:.1f} | `BLPOP` waiter {x['list_us']:.1f} | "
                        f"{x['mail_us'] / max(x['list_us'], 0.01):.1f}x |")
            rows.append(f"| one hot key, {x['n']:,} `MAILBOX` requests from one pipeline: PING p99 "
                        f"while they queue | {x['mail_p99']:.1f} ms | target 5 ms | "
                        f"{x['mail_p99'] / 5:.2f}x |")
    wf = at_scale.get("waitfor", [])
    if wf:
        first, last = wf[0], wf[-1]
        rows.append(f"| `LOCK.WAITFOR` with {last['edges']:,} edges elsewhere, µs per call | "
                    f"{last['waitfor']:.2f} | with {first['edges']:,} edges {first['waitfor']:.2f} | "
                    f"{last['waitfor'] / first['waitfor']:.2f}x |")
        for x in wf:
            rows.append(f"| `LOCK.GRAPH` (COUNT 10,000) with {x['edges']:,} edges | "
                        f"{x['graph_ms']:.1f} ms | target: a few ms | |")
    for x in at_scale.get("keep", []):
        if x["leases"] != 20_000:
            continue
        rows.append(f"| `KEEP`, 20,000 leases of 1 s: server CPU | {x['cpu'] * 100:.1f}% of a core "
                    f"| target 5% | {x['cpu'] / 0.05:.2f}x |")
        rows.append(f"| `KEEP`, 20,000 leases of 1 s: AOF growth | {x['aof'] / 1000:,.0f} KB/s "
                    f"| target 50 KB/s | {x['aof'] / 50_000:.2f}x |")
    return rows


#: The rows of `summary` the README shows; docs/benchmarks.md has them all.
HEADLINE = (
    "| LOCK.ACQUIRE, instructions per call, Redis 7.0 |",
    "| LOCK.RELEASE, instructions per call, Redis 7.0 |",
    "| LOCK.ACQUIRE, instructions per call, Redis 7.0 + AOF + replica |",
    "| LOCK.ACQUIRE ID (as the clients send it)",
    "| acquire, instructions per call, Redis 7.0 |",
    "| contended (8 processes, one lock, 1 ms inside): padlock |",
    "| contended (8 processes, one lock, 1 ms inside): redis-py Lock |",
    "| one hot key, 10,000 waiters: server µs per queued waiter |",
    "| `KEEP`, 20,000 leases of 1 s: server CPU |",
)
SUMMARY_START, SUMMARY_END = "<!-- summary:start -->", "<!-- summary:end -->"


def headline(table):
    """The README's few rows of the summary table."""
    lines = table.split("\n")
    return "\n".join(lines[:2] + [r for r in lines[2:] if r.startswith(HEADLINE)])


def summary_block(pc, cont, at_scale=None):
    return (f"{SUMMARY_START}\n\n**Summary**: the headline ratios of the run (the README "
            f"shows a few of them).\n\n{summary(pc, cont, at_scale)}\n\n{SUMMARY_END}")


def readme(pc, cont, stamp, at_scale=None):
    text = README.read_text()
    if START in text and END in text:
        a, b = text.index(START) + len(START), text.index(END)
        README.write_text(text[:a] + f"\n<!-- written by make bench on {stamp} -->\n\n"
                          + headline(summary(pc, cont, at_scale))
                          + "\n\nEvery table, this one in full, is in "
                          "[docs/benchmarks.md](docs/benchmarks.md).\n\n"
                          "![make bench](docs/benchmarks.png)\n\n" + text[b:])
    md = DOCS / "benchmarks.md"
    if md.exists():
        # The summary in full, at the top of docs/benchmarks.md.
        doc = md.read_text()
        block = summary_block(pc, cont, at_scale)
        if SUMMARY_START in doc and SUMMARY_END in doc:
            a, b = doc.index(SUMMARY_START), doc.index(SUMMARY_END) + len(SUMMARY_END)
            doc = doc[:a] + block + doc[b:]
        else:
            head, sep, rest = doc.partition("\n\n**Instructions per call**")
            doc = head + "\n\n" + block + sep + rest
        md.write_text(doc)


def chart(pc, cont, path, at_scale=None):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [c[0] for c in cost.CASES if c[0] != cost.BASE]
    hot = [x for x in (at_scale or {}).get("hot", []) if not x.get("skipped")]
    # The per-command panels each take the full width (26 commands, six
    # servers each: side by side their labels ran into one another); the
    # contended and hot-key panels share the last row.
    fig = plt.figure(figsize=(16, 15))
    grid = fig.add_gridspec(3, 2, height_ratios=[1.25, 1.25, 1])
    per_command = (fig.add_subplot(grid[0, :]), fig.add_subplot(grid[1, :]))
    contended = fig.add_subplot(grid[2, 0] if hot else grid[2, :])
    # A run from before a configuration was added has no figures for it.
    configs = [c for c in CONFIGS if c in pc]
    names = [n for n in names if all(n in pc[c][0] for c in configs)]
    width = 0.8 / len(configs)
    for ax, idx, title in ((per_command[0], 0, "instructions per call vs SET NX PX (lower is better)"),
                           (per_command[1], 1, "requests/s at -P 16 vs SET NX PX (higher is better)")):
        for j, c in enumerate(configs):
            vals = [pc[c][idx][n] / pc[c][idx][cost.BASE] for n in names]
            ax.bar([i + (j - (len(configs) - 1) / 2) * width for i in range(len(names))], vals, width,
                   label=config_name(*c))
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels([n.replace(" (EVALSHA)", "") for n in names], rotation=30, ha="right",
                           rotation_mode="anchor", fontsize=8)
        ax.set_xlim(-0.6, len(names) - 0.4)
        ax.set_title(title, fontsize=10)
    per_command[0].legend(fontsize=8, ncols=len(configs) // 2 or 1, loc="upper right")
    contended.bar([r["lock"] for r in cont], [r.get("max_ms", r["p99_ms"]) for r in cont],
                  color=["C0", "C3", "C2"])
    contended.set_yscale("log")
    contended.yaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
    contended.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    contended.set_title("contended: longest wait, ms (lower is better)", fontsize=10)
    contended.tick_params(axis="x", labelsize=8)
    if hot:
        waiters = fig.add_subplot(grid[2, 1])
        xs = range(len(hot))
        waiters.bar([i - 0.2 for i in xs], [x["lock_us"] for x in hot], 0.4, label="LOCK.ACQUIRE BLOCK")
        waiters.bar([i + 0.2 for i in xs], [x["list_us"] for x in hot], 0.4, label="BLPOP")
        waiters.set_xticks(list(xs))
        waiters.set_xticklabels([f"{x['n']:,} waiters" for x in hot], fontsize=8)
        waiters.set_title("one hot key: µs per queued waiter", fontsize=10)
        # Room above the bars for the legend.
        waiters.set_ylim(0, 1.3 * max(max(x["lock_us"], x["list_us"]) for x in hot))
        waiters.legend(fontsize=8, loc="upper left", ncols=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def save(pc, cont, at_scale=None):
    data = {"per_command": [[label, aof, ins, rps] for (label, aof), (ins, rps) in pc.items()],
            "contended": cont, "at_scale": at_scale}
    (DOCS / "benchmarks.json").write_text(json.dumps(data, indent=1) + "\n")


def saved():
    """(per command, contended, at scale: the hot key, declared waits and
    KEEP rows, or None from a run before they were saved)."""
    data = json.loads((DOCS / "benchmarks.json").read_text())
    pc = {(label, aof): (ins, rps) for label, aof, ins, rps in data["per_command"]}
    return pc, data["contended"], data.get("at_scale")


def script_tables(script, label, where=""):
    """The Markdown tables a benchmark script prints, each `### title`
    becoming a bold `label — title` line (with `where` after it)."""
    out = subprocess.run([str(ROOT / script)], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    # A title may follow what a library logged on the same line.
    out = "\n".join(ln[ln.index("### "):] if "### " in ln else ln for ln in out.splitlines())
    lines = [ln.strip() for ln in out.splitlines() if ln.strip().startswith(("|", "###")) or not ln.strip()]
    body = "\n".join(lines).strip()
    return "\n".join(f"**{label} — {ln[4:]}**{where}" if ln.startswith("### ") else ln for ln in body.splitlines())


def java_vs_redisson():
    """clients/java's benchmark (scripts/bench/java-bench.sh): padlock's Java client
    against Redisson, Spring Integration's RedisLockRegistry and ShedLock's
    Redis provider, in one JVM on one server."""
    return script_tables("scripts/bench/java-bench.sh", "Java client")


def split_java_rows(tables):
    """The Java run's tables, and apart from them its rows of the
    clients' uncontended table (`| Java (driver) | ...`)."""
    rows = [ln for ln in tables.splitlines() if ln.startswith("| Java (")]
    return "\n".join(ln for ln in tables.splitlines() if not ln.startswith("| Java (")).strip(), rows


def go_vs_redsync():
    """clients/go's benchmark (scripts/bench/go-bench.sh): padlock's Go client on
    both drivers, redsync v4 and bsm/redislock in one process on one
    server."""
    return script_tables("scripts/bench/go-bench.sh", "Go client vs redsync and bsm/redislock",
                         " (Redis 7.0, one process; `scripts/bench/go-bench.sh`)")


def main():
    if sys.argv[1:] == ["--chart"]:
        # Draws the chart again from the last run's figures.
        pc, cont, at_scale = saved()
        chart(pc, cont, DOCS / "benchmarks.png", at_scale)
        return 0
    if sys.argv[1:] == ["--readme"]:
        # Writes the README's summary again from the last run's figures.
        pc, cont, at_scale = saved()
        # The day of the run the figures come from (a clone's files are
        # all as new as the clone).
        import re
        found = re.search(r"Written by `make bench` on (\d{4}-\d\d-\d\d)", (DOCS / "benchmarks.md").read_text())
        stamp = found.group(1) if found else "an earlier run"
        readme(pc, cont, stamp, at_scale)
        return 0
    subprocess.run(["cargo", "build", "--release", "--example", "load"], cwd=ROOT, check=True)
    pc = per_command()
    print("==> contended", flush=True)
    cont = contended()
    DOCS.mkdir(exist_ok=True)
    save(pc, cont)
    print("==> memory, hand-off latency, KEEP, readers", flush=True)
    mem, lat, keep, rw = extras()
    print("==> one hot key", flush=True)
    import hotkey
    hot_rows = hotkey.rows([1000, 5000, 10000])
    print("==> declared waits and KEEP at scale", flush=True)
    import scale
    at_scale = {"hot": hot_rows, "waitfor": scale.waitfor_rows(), "keep": scale.keep_rows(),
                "idle": scale.idle_rows()}
    save(pc, cont, at_scale)
    hot = (hotkey.formatted(hot_rows) + "\n\n" + scale.waitfor_formatted(at_scale["waitfor"])
           + "\n\n" + scale.keep_formatted(at_scale["keep"])
           + "\n\n" + scale.idle_formatted(at_scale["idle"]))

    print("==> one waiter's whole cost: BLPOP, BLOCK, MAILBOX", flush=True)
    import waitcost
    waiters = waitcost.formatted(waitcost.measure("redis-server", 2000), 2000)

    print("==> 10,000 waiters through the clients", flush=True)
    import clientwaits
    waiters += "\n\n" + clientwaits.formatted(clientwaits.measure(10000))
    print("==> 10,000 waiters on 100 slots of a 3-master cluster", flush=True)
    import clusterwaits
    waiters += "\n\n" + clusterwaits.formatted(clusterwaits.measure(10000, 100))
    # The Java run's interleaved uncontended rows join the other clients'.
    print("==> the Java client against Redisson", flush=True)
    java, java_rows = split_java_rows(java_vs_redisson())
    print("==> uncontended acquire + release through the clients", flush=True)
    import uncontended
    waiters += "\n\n" + uncontended.formatted(uncontended.measure(3000), 3000)
    waiters += "".join("\n" + r for r in java_rows)
    waiters += "\n\nThe Python rows in instructions the client process runs per pair (callgrind):\n\n"
    waiters += uncontended.instructions()
    print("==> 1,000 holds and 1,000 waiters through the Python clients", flush=True)
    import holdcost
    waiters += "\n\n" + holdcost.formatted(1000, holdcost.run(1000))

    print("==> the Go client against redsync and bsm/redislock", flush=True)
    java += "\n\n" + go_vs_redsync()

    print("==> a hand-off's cost and memory per request-id", flush=True)
    import handoff
    import idmemory
    handed, ids = handoff.measure("redis-server"), idmemory.measure("redis-server")

    table = tables(pc, cont) + "\n\n" + hot + "\n\n" + waiters + "\n\n" + java
    more = [
        "", "**Bytes per key** (100,000 keys, used_memory):", "",
        "| " + " | ".join(mem) + " |", "|" + " --- |" * len(mem),
        "| " + " | ".join(f"{v:.0f}" for v in mem.values()) + " |", "",
        f"Release-to-grant latency, 50 blocked waiters, {lat[0]} hand-offs: p50 {lat[1]:.3f} ms, "
        f"p99 {lat[2]:.3f} ms (at Python clients).",
        f"KEEP, 100,000 leases of 30 s bound on 4 connections: {keep[0]:,.0f} lease writes/s "
        f"while bound, {keep[1] * 100:.1f}% of a core above the idle server "
        f"({keep[2] * 100:.1f}% in all), {keep[3]:.0f} bytes per binding.",
        f"Read-write lock with 10,000 readers: {rw[0]:.0f} bytes per reader "
        f"(`MEMORY USAGE` says {rw[1]:.0f}).",
        f"A release that grants a `MAILBOX` + `KEEP` waiter, both with `ID`: {handed:,.0f} "
        "instructions inside `call()` (Redis 7.0; `scripts/bench/handoff.py`).",
        f"Request-ids (ids of 30 bytes): {ids['held']:.0f} bytes per id of a held key; "
        f"{ids['freed_per_key']:.0f} bytes per freed key with its two ids; one holder's 16 ids "
        f"on one key {ids['sixteen']:,} bytes in all (`MEMORY USAGE` of the key: "
        f"{ids['memory_usage_key']}, ids are kept beside it).",
    ]
    DOCS.mkdir(exist_ok=True)
    stamp = time.strftime("%Y-%m-%d")
    notes = kept_notes(DOCS / "benchmarks.md")
    (DOCS / "benchmarks.md").write_text(
        f"# Benchmarks\n\nWritten by `make bench` on {stamp} ({os.cpu_count()} cores).\n\n"
        + table + "\n" + "\n".join(more) + "\n\n![chart](benchmarks.png)\n"
        + (f"\n{notes}\n" if notes else ""))
    chart(pc, cont, DOCS / "benchmarks.png", at_scale)
    readme(pc, cont, stamp, at_scale)
    print(table)
    print("\n".join(more))
    return 0


if __name__ == "__main__":
    sys.exit(main())
