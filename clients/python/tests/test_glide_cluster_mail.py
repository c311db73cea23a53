"""Issue 39 on valkey-glide's cluster client: waits and losses through a
mailbox per slot, heard of through client tracking on one redis-py
connection per node, beside a standalone glide keeper per node. Three
masters, keys of many slots on each: at most two connections of padlock's
per node, whatever the number of waits and holds."""

import asyncio
import os
import threading
import time

import pytest
import redis

glide_sync = pytest.importorskip("glide_sync")
glide_async = pytest.importorskip("glide")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

from conftest import Server, wait_for  # noqa: E402
from padlock import Lock, aio, glide  # noqa: E402
from padlock._slots import key_slot  # noqa: E402

KEYS = [f"gmail:{i}" for i in range(30)]


@pytest.fixture
def three():
    """Three masters, a third of the slots each."""
    nodes = [Server(extra=["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"]) for _ in range(3)]
    cs = [n.client() for n in nodes]
    for i, c in enumerate(cs):
        c.execute_command("CLUSTER", "ADDSLOTSRANGE", i * 5462, min(16383, i * 5462 + 5461))
    for c in cs[1:]:
        c.execute_command("CLUSTER", "MEET", "127.0.0.1", nodes[0].port)
    assert wait_for(lambda: all(b"cluster_state:ok" in c.execute_command("CLUSTER", "INFO")
                                and b"cluster_known_nodes:3" in c.execute_command("CLUSTER", "INFO")
                                for c in cs), 10)
    yield nodes, cs
    for c in cs:
        c.close()
    for n in nodes:
        n.stop()


def owner(cs, key):
    slot = key_slot(key)
    return cs[min(2, slot // 5462)]


def waiting(cs, keys=KEYS):
    total = 0
    for k in keys:
        raw = owner(cs, k).execute_command("LOCK.INFO", k)
        total += int(dict(zip(raw[::2], raw[1::2]))[b"waiters"]) if raw else 0
    return total


def conns(cs):
    return [len(c.client_list()) for c in cs]


def served(cs, name):
    return sum(int(c.info("commandstats").get(f"cmdstat_{name}", {"calls": 0})["calls"]) for c in cs)


def test_glide_cluster_waits_share_two_connections_per_node(three):
    nodes, cs = three
    assert {id(owner(cs, k)) for k in KEYS} == {id(c) for c in cs}, "keys on every node"
    g = glide(glide_sync.GlideClusterClient,
              glide_sync.GlideClusterClientConfiguration([glide_sync.NodeAddress("127.0.0.1", nodes[0].port)]))
    base = conns(cs)
    holders = [Lock(g, k, ttl=5, holder="owner") for k in KEYS]
    for h in holders:
        assert h.acquire(blocking=False) is not None
    got: dict[int, int] = {}

    def wait(i: int) -> None:
        lock = Lock(g, KEYS[i % len(KEYS)], ttl=5)
        fence = lock.acquire(timeout=20)
        if fence is not None:
            got[i] = fence
            lock.release()

    threads = [threading.Thread(target=wait, args=(i,)) for i in range(90)]
    for t in threads:
        t.start()
    assert wait_for(lambda: waiting(cs) == 90, 15)
    extra = [n - b for n, b in zip(conns(cs), base)]
    assert all(e <= 2 for e in extra), f"a keeper and a tracking connection per node: {extra}"
    # A wait that times out hears so through its slot's mailbox too.
    assert Lock(g, KEYS[0], ttl=5, holder="other").acquire(timeout=0.2) is None
    for h in holders:
        h.release()
    for t in threads:
        t.join(20)
    assert len(got) == 90, "every wait was granted through its slot's mailbox"
    assert served(cs, "lmpop") > 0 and served(cs, "blmpop") == 0
    # A hold's loss is mailed and heard at once, with no reads.
    lock = Lock(g, KEYS[7], ttl=6)
    assert lock.acquire() is not None
    time.sleep(0.3)
    for c in cs:
        c.config_resetstat()
    owner(cs, KEYS[7]).delete(KEYS[7])
    assert wait_for(lambda: lock.lost.is_set(), 1.5), "the loss was mailed and heard"
    assert not lock.held and served(cs, "lock.info") == 0
    assert all(n - b <= 2 for n, b in zip(conns(cs), base))


def test_glide_cluster_idle_holds_cost_pings_not_rounds(three):
    nodes, cs = three
    g = glide(glide_sync.GlideClusterClient,
              glide_sync.GlideClusterClientConfiguration([glide_sync.NodeAddress("127.0.0.1", nodes[1].port)]))
    locks = [Lock(g, f"gidle:{i}", ttl=0.9) for i in range(150)]
    for lock in locks:
        assert lock.acquire(blocking=False) is not None
    time.sleep(1.5)  # every hold's first round: bound with its slot's mailbox
    for c in cs:
        c.config_resetstat()
    time.sleep(1.5)
    assert served(cs, "lock.extend") < 30, "kept leases are not renewed one by one"
    assert served(cs, "lock.info") == 0
    assert all(lock.held for lock in locks)
    for lock in locks:
        lock.release()


def test_asyncio_glide_cluster_waits_and_losses(three):
    nodes, cs = three

    async def main() -> None:
        cfg = glide_async.GlideClusterClientConfiguration([glide_async.NodeAddress("127.0.0.1", nodes[2].port)])
        g = aio.glide(glide_async.GlideClusterClient, cfg)
        base = conns(cs)
        holders = [aio.Lock(g, k, ttl=5, holder="owner") for k in KEYS]
        # The first as `with` takes it: a blocking acquire, bound with its
        # slot's mailbox at once (a try is bound there at its first round).
        assert await holders[0].acquire() is not None
        for h in holders[1:]:
            assert await h.acquire(blocking=False) is not None

        async def wait(i: int) -> int:
            lock = aio.Lock(g, KEYS[i % len(KEYS)], ttl=5)
            fence = await lock.acquire(timeout=20)
            assert fence is not None
            await lock.release()
            return fence

        tasks = [asyncio.create_task(wait(i)) for i in range(150)]
        for _ in range(600):
            if waiting(cs) == 150:
                break
            await asyncio.sleep(0.025)
        assert waiting(cs) == 150
        extra = [n - b for n, b in zip(conns(cs), base)]
        assert all(e <= 2 for e in extra), f"a keeper and a tracking connection per node: {extra}"
        for h in holders[1:]:
            await h.release()
        # A loss, heard from the slot's mailbox while the others wait.
        owner(cs, KEYS[0]).delete(KEYS[0])
        for _ in range(60):
            if holders[0].lost.is_set():
                break
            await asyncio.sleep(0.025)
        assert holders[0].lost.is_set()
        assert len(await asyncio.gather(*tasks)) == 150
        assert served(cs, "blmpop") == 0
        assert all(n - b <= 2 for n, b in zip(conns(cs), base))

    asyncio.run(main())


def test_tracking_settings_follow_the_glide_configuration():
    from padlock._glide_nodes import TrackingPool, tracking_kwargs

    g = glide_sync
    plain = g.GlideClusterClientConfiguration([g.NodeAddress("h", 1)],
                                              credentials=g.ServerCredentials("pw", "user"), client_name="app")
    kw = tracking_kwargs(plain)
    assert kw == {"username": "user", "password": "pw", "client_name": "app"}
    pool = TrackingPool("10.0.0.1", 7000, kw)
    assert pool.connection_class is redis.Connection and pool.connection_kwargs["host"] == "10.0.0.1"
    tls = g.GlideClusterClientConfiguration(
        [g.NodeAddress("h", 1)], use_tls=True,
        advanced_config=g.AdvancedGlideClusterClientConfiguration(
            tls_config=g.TlsAdvancedConfiguration(use_insecure_tls=True)))
    pool = TrackingPool("h", 1, tracking_kwargs(tls) or {})
    assert pool.connection_class is redis.SSLConnection
    assert pool.connection_kwargs["ssl_cert_reqs"] == "none"
    # What redis-py cannot be given: IAM, client certificates as bytes.
    pem = g.GlideClusterClientConfiguration(
        [g.NodeAddress("h", 1)], use_tls=True,
        advanced_config=g.AdvancedGlideClusterClientConfiguration(
            tls_config=g.TlsAdvancedConfiguration(client_cert_pem=b"x", client_key_pem=b"y")))
    assert tracking_kwargs(pem) is None
    d = glide(g.GlideClusterClient, pem)
    assert not d.tracks(), "such a cluster waits on a connection of its own, as before"


@pytest.fixture
def tls_cluster(tmp_path):
    """A one-node cluster on TLS only, with a password: certificates made
    with `openssl` for a CA of the test's own."""
    import shutil
    import subprocess

    from harness import SO, free_port

    if shutil.which("openssl") is None:
        pytest.skip("no openssl to make certificates with")
    d = str(tmp_path)

    def ssl(*args):
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)

    ssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
        "-subj", "/CN=padlock-test-ca")
    ssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "srv.key", "-out", "srv.csr", "-subj", "/CN=127.0.0.1")
    (tmp_path / "ext").write_text("subjectAltName=IP:127.0.0.1\n")
    ssl("x509", "-req", "-in", "srv.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial", "-out",
        "srv.crt", "-days", "2", "-extfile", "ext")
    port = free_port(cluster=True)
    binary = os.environ.get("PADLOCK_SERVER") or shutil.which("redis-server")
    proc = subprocess.Popen(
        [binary, "--port", "0", "--tls-port", str(port), "--bind", "127.0.0.1", "--dir", d, "--save", "",
         "--tls-cert-file", "srv.crt", "--tls-key-file", "srv.key", "--tls-ca-cert-file", "ca.crt",
         "--tls-auth-clients", "no", "--tls-cluster", "yes", "--cluster-enabled", "yes",
         "--requirepass", "s3cret", "--loadmodule", SO],
        cwd=d, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    admin = redis.Redis(port=port, password="s3cret", ssl=True, ssl_ca_certs=str(tmp_path / "ca.crt"))
    try:
        assert wait_for(lambda: _answers(admin), 10), "the TLS server did not start"
        admin.execute_command("CLUSTER", "ADDSLOTSRANGE", 0, 16383)
        assert wait_for(lambda: b"cluster_state:ok" in admin.execute_command("CLUSTER", "INFO"), 10)
        yield port, (tmp_path / "ca.crt").read_bytes(), admin
    finally:
        admin.close()
        proc.kill()
        proc.wait()


def _answers(r):
    try:
        return r.ping()
    except redis.RedisError:
        return False


def test_glide_cluster_over_tls_with_a_password(tls_cluster):
    """The tracking connection follows glide's TLS (its root certificates)
    and credentials: a wait is mailed, not held on a connection."""
    port, ca, admin = tls_cluster
    g = glide_sync
    cfg = g.GlideClusterClientConfiguration(
        [g.NodeAddress("127.0.0.1", port)], use_tls=True, credentials=g.ServerCredentials("s3cret"),
        advanced_config=g.AdvancedGlideClusterClientConfiguration(
            tls_config=g.TlsAdvancedConfiguration(root_pem_cacerts=ca)))
    d = glide(g.GlideClusterClient, cfg)
    assert d.tracks()
    first = Lock(d, "tls:k", ttl=5, holder="first")
    assert first.acquire() is not None
    got: list[int] = []
    second = Lock(d, "tls:k", ttl=5, holder="second")
    t = threading.Thread(target=lambda: got.append(second.acquire(timeout=10)))
    t.start()
    assert wait_for(lambda: admin.info("padlock")["padlock_mailbox_waiters"] == 1, 5)
    first.release()
    t.join(10)
    assert got and got[0] is not None
    stats = admin.info("commandstats")
    assert "cmdstat_subscribe" in stats and "cmdstat_lmpop" in stats, "heard through tracking, over TLS"
    second.release()


def test_many_tasks_at_once_fetch_the_slot_map_once(cluster_server):
    r = cluster_server.client()
    r.config_resetstat()

    async def main() -> None:
        cfg = glide_async.GlideClusterClientConfiguration([glide_async.NodeAddress("127.0.0.1", cluster_server.port)])
        g = aio.glide(glide_async.GlideClusterClient, cfg)

        async def one(i: int) -> None:
            lock = aio.Lock(g, f"once:{i}", ttl=5)
            assert await lock.acquire(blocking=False) is not None
            await lock.release()

        await asyncio.gather(*(one(i) for i in range(200)))

    asyncio.run(main())
    # The fetch's own glide cluster client asks too, as it connects.
    slots = r.info("commandstats").get("cmdstat_cluster|slots", {"calls": 0})["calls"]
    assert slots <= 3, f"one fetch for 200 tasks, not {slots} CLUSTER SLOTS"
    r.close()
