"""Memory per remembered request-id, for `make bench` (issue: request-ids
nearly free). The module's allocations go through Redis' allocator, so
`used_memory` counts them: N locks taken with `ID` against N without, on
one server, then the same keys released with `ID` (their ids then
remembered as freed, `INFO padlock`'s `padlock_request_ids_freed`), and a
holder sending 16 ids to one key (`max-ids-per-holder`'s default).

    python scripts/bench/idmemory.py [server-binary] [n]
"""

import sys

import pathlib
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # scripts/: harness
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from cost import Node, load
from harness import server_and_count

N = 100_000


def used(r):
    return r.info("memory")["used_memory"]


def measure(binary, n=N):
    m = Node(binary)
    r = m.r
    try:
        out = {}
        base = used(r)
        load(m.port, ["LOCK.ACQUIRE", "p:{i}", "holder", "600000"], n)
        plain = used(r) - base
        base = used(r)
        load(m.port, ["LOCK.ACQUIRE", "k:{i}", "holder", "600000", "ID", "0123456789abcdef01234567:{i}"], n)
        with_id = used(r) - base
        out["held"] = (with_id - plain) / n
        load(m.port, ["LOCK.RELEASE", "k:{i}", "holder", "ID", "0123456789abcdef01234567:r{i}"], n)
        # The keys are gone; what stays is each freed key's group, its two
        # ids (the acquire's and the release's).
        out["freed_per_key"] = (used(r) - base) / n
        out["freed_ids"] = r.info("padlock").get("padlock_request_ids_freed", 0)
        r.flushall()
        base = used(r)
        for i in range(16):
            r.execute_command("LOCK.ACQUIRE", "one", "holder", 600000, "ID", f"0123456789abcdef01234567:{i}")
        out["sixteen"] = used(r) - base
        out["memory_usage_key"] = r.memory_usage("one")
        return out
    finally:
        m.stop()


def main():
    binary, n = server_and_count(sys.argv[1:], N)
    o = measure(binary, n)
    print(f"per id remembered for a held key: {o['held']:.0f} B")
    print(f"per freed key (two ids, its group): {o['freed_per_key']:.0f} B; ids of freed keys: {o['freed_ids']}")
    print(f"one key, one holder, 16 ids: {o['sixteen']} B in all; MEMORY USAGE of the key: {o['memory_usage_key']} B")


if __name__ == "__main__":
    main()
