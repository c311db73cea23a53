"""Holds and waits of many threads (or asyncio tasks) while the server
kills the client's connections at random: the keeper with the holds bound
to it and the waits queued on it, the mailbox reader, the application's
own. Some sections last longer than the lease, so a hold lives only
through the client binding it again after each kill.

What must hold throughout: never more holders than a key allows while each
of them still says `held` (a hold may be lost in such a storm, but then
it must not say `held`); fences rising in the order the holds began; no
acquire or release that fails for a killed connection; and at the end the
server holds and queues nothing."""

import asyncio
import os
import random
import threading
import time
from dataclasses import dataclass, field

import redis.asyncio

import padlock.aio
from padlock.sync import Lock, Semaphore

from conftest import wait_for

SECONDS = float(os.environ.get("PADLOCK_STORM_SECONDS", "5"))
WORKERS = 6
LOCKS = ("a", "b")
LIMIT = 2
TTL = 0.5
#: The share of sections held past the lease (through the rebinding).
LONG = 0.1


def cap(key):
    return LIMIT if key == "s" else 1


def others(r, me, kinds):
    """The ids of the server's connections of `kinds` but `me`."""
    out = []
    for kind in kinds:
        for line in r.execute_command("CLIENT", "LIST", "TYPE", kind).decode().splitlines():
            fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
            if fields["id"] != str(me):
                out.append(fields["id"])
    return out


def storm(r, stop, kills, kinds):
    """Kills one of the other connections every 20-120 ms."""
    rng = random.Random(7)
    me = r.client_id()
    while not stop.is_set():
        time.sleep(rng.uniform(0.02, 0.12))
        ids = others(r, me, kinds)
        if ids:
            r.execute_command("CLIENT", "KILL", "ID", rng.choice(ids))
            kills.append(1)


@dataclass
class Checker:
    """Sections as they begin and end, and what they said at their end."""

    guard: threading.Lock = field(default_factory=threading.Lock)
    inside: dict = field(default_factory=lambda: {k: set() for k in (*LOCKS, "s")})
    last_fence: dict = field(default_factory=lambda: {k: 0 for k in LOCKS})
    crowds: list = field(default_factory=list)  # (key, sections inside at once)
    held_at_end: dict = field(default_factory=dict)
    problems: list = field(default_factory=list)
    sections: int = 0
    lost: int = 0

    def enter(self, key, fence, held=True):
        with self.guard:
            self.sections += 1
            n = self.sections
            if fence is not None:
                if fence <= self.last_fence[key]:
                    self.problems.append(f"{key}: fence {fence} after {self.last_fence[key]}")
            if not held:
                self.problems.append(f"{key}: acquire answered a grant that `held` denies")
                self.last_fence[key] = max(self.last_fence[key], fence)
            self.inside[key].add(n)
            if len(self.inside[key]) > cap(key):
                self.crowds.append((key, frozenset(self.inside[key])))
            return n

    def taken(self, key, hold, got):
        """An acquire's answer (its reply, or what it raised): the
        section's number, or None when it got nothing (a finding)."""
        if got is None or isinstance(got, Exception):
            self.problems.append(f"acquire {key}: {got!r}")
            return None
        return self.enter(key, None if key == "s" else got, hold.held)

    def given_back(self, key, hold, failed):
        """A release that raised while the hold still said `held`."""
        if failed is not None and hold.held:
            self.problems.append(f"release {key}: {failed!r}")

    def leave(self, key, n, held):
        with self.guard:
            self.inside[key].discard(n)
            self.held_at_end[n] = held
            self.lost += not held

    def verdict(self):
        """Each crowd had at most `cap` sections that still said `held` at
        their end (saying it then means it held all along)."""
        for key, crowd in self.crowds:
            still = [n for n in crowd if self.held_at_end.get(n, True)]
            if len(still) > cap(key):
                self.problems.append(f"{key}: {len(still)} holders said held at once")
        return self.problems


def work(rng):
    return rng.uniform(TTL * 1.2, TTL * 1.8) if rng.random() < LONG else rng.uniform(0, 0.004)


def run_storm(server, r, body, kinds=("normal",)):
    """`body` while connections of `kinds` are killed (`pubsub` too: a
    cluster's tracking connections)."""
    stop = threading.Event()
    kills: list[int] = []
    killer = threading.Thread(target=storm, args=(server.client(), stop, kills, kinds))
    killer.start()
    try:
        check = body()
    finally:
        stop.set()
        killer.join(5)
    assert not check.verdict(), check.problems[:10]
    assert len(kills) > 10, "the storm killed connections"
    assert check.sections > 20, check.sections
    print(f"sections {check.sections}, lost {check.lost}, kills {len(kills)}")
    # Nothing is left held or queued once every section released.
    # (Key by key: in a cluster they are in different slots.)
    assert wait_for(lambda: sum(r.exists(k) for k in (*LOCKS, "s")) == 0), [r.execute_command("LOCK.INFO", k)
                                                                           for k in LOCKS]
    assert wait_for(lambda: r.info("padlock")["padlock_mailbox_waiters"] == 0)


def thread_storm(server, r, client, kinds=("normal",)):
    """WORKERS threads on `client` through a storm."""
    check = Checker()
    deadline = time.time() + SECONDS

    def worker(n):
        rng = random.Random(n)
        while time.time() < deadline:
            key = rng.choice((*LOCKS, "s"))
            hold = Semaphore(client, key, LIMIT, ttl=TTL) if key == "s" else Lock(client, key, ttl=TTL)
            try:
                got = hold.acquire(timeout=10)
            except Exception as e:  # noqa: BLE001 - every failure is a finding
                got = e
            if (at := check.taken(key, hold, got)) is None:
                continue
            time.sleep(work(rng))
            check.leave(key, at, hold.held)
            failed = None
            try:
                hold.release()
            except Exception as e:  # noqa: BLE001
                failed = e
            check.given_back(key, hold, failed)

    def body():
        workers = [threading.Thread(target=worker, args=(n,)) for n in range(WORKERS)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(SECONDS + 30)
        assert not any(w.is_alive() for w in workers), "a worker hung"
        return check

    run_storm(server, r, body, kinds)


def task_storm(server, r, make_client, kinds=("normal",)):
    """WORKERS asyncio tasks on the client `make_client()` returns (and
    closes, `aclose`, if it can) through a storm."""
    check = Checker()

    async def main():
        client = make_client()
        deadline = time.time() + SECONDS

        async def worker(n):
            rng = random.Random(100 + n)
            while time.time() < deadline:
                key = rng.choice((*LOCKS, "s"))
                hold = (padlock.aio.Semaphore(client, key, LIMIT, ttl=TTL) if key == "s"
                        else padlock.aio.Lock(client, key, ttl=TTL))
                got = await asyncio.gather(hold.acquire(timeout=10), return_exceptions=True)
                if (at := check.taken(key, hold, got[0])) is None:
                    continue
                await asyncio.sleep(work(rng))
                check.leave(key, at, hold.held)
                failed = (await asyncio.gather(hold.release(), return_exceptions=True))[0]
                check.given_back(key, hold, failed)

        await asyncio.wait_for(asyncio.gather(*(worker(n) for n in range(WORKERS))), SECONDS + 30)
        if hasattr(client, "aclose"):
            await client.aclose()
        return check

    run_storm(server, r, lambda: asyncio.run(main()), kinds)


def test_threads_through_a_storm_of_killed_connections(server, r):
    client = server.client()
    thread_storm(server, r, client)
    client.close()


def test_tasks_through_a_storm_of_killed_connections(server, r):
    task_storm(server, r, lambda: redis.asyncio.Redis(port=server.port))
