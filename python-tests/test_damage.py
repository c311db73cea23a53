"""Damaged persisted data: RESTORE payloads and RDB files whose padlock
values were changed, cut short, grown or given absurd lengths (with a valid
checksum, so Redis hands them to the module) are refused or load as a
consistent value; the server never dies."""

import random
import struct

import pytest
import redis

_TABLE = []
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ 0x95AC9329AC4BC9B5 if _c & 1 else _c >> 1
    _TABLE.append(_c)


def crc64(data, crc=0):
    """CRC-64/Jones as Redis computes it for DUMP payloads and RDB files."""
    for b in data:
        crc = _TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc


def test_crc64_matches_redis():
    assert crc64(b"123456789") == 0xE9C6D914C4B8D9CA


def seal(body, version):
    """A DUMP payload: body, RDB version, CRC-64 of both."""
    data = body + version
    return data + struct.pack("<Q", crc64(data))


def mutate(rng, body):
    kind = rng.randrange(5)
    b = bytearray(body)
    if kind == 0:  # bytes changed
        for _ in range(rng.randint(1, 4)):
            b[rng.randrange(len(b))] = rng.randrange(256)
    elif kind == 1:  # cut short
        del b[rng.randrange(1, len(b)):]
    elif kind == 2:  # bytes inserted
        pos = rng.randrange(1, len(b) + 1)
        b[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 6)))
    elif kind == 3:  # a length or integer blown up (RDB 32/64-bit length forms)
        pos = rng.randrange(10, len(b))
        big = rng.choice([b"\x80\xff\xff\xff\xff", b"\x81" + b"\xff" * 8,
                          b"\x81\x7f" + b"\xff" * 7, b"\x80\x40\x00\x00\x00"])
        b[pos:pos + 1] = big
    else:  # a field's opcode or small value swapped
        pos = rng.randrange(10, len(b))
        b[pos] = rng.choice([0, 1, 2, 3, 4, 5, 0x40, 0x80, 0xC0, 0xFF])
    return bytes(b)


def check_consistent(r, key):
    """A value that loaded answers like any other of its kind."""
    t = r.type(key).decode()
    if t == "pdlk-lock":
        info = r.execute_command("LOCK.INFO", key)
        d = dict(zip(info[::2], info[1::2])) if info else {}
        assert d.get(b"count", 1) >= 1 and d.get(b"fence", 1) >= 1
        assert len(d.get(b"holder", b"x")) >= 1
        r.execute_command("LOCK.RELEASE", key, d.get(b"holder", b"x")) if d else None
    elif t == "pdlk-sema":
        info = r.execute_command("SEM.INFO", key)
        if info:
            d = dict(zip(info[::2], info[1::2]))
            holders = d[b"holders"]
            permits = [v[0] for v in holders[1::2]]
            assert all(p >= 1 for p in permits)
            assert d[b"used"] == sum(permits)
        r.execute_command("SEM.ACQUIRE", key, "probe", 1, 1000)
    elif t == "pdlk-rwlk":
        info = r.execute_command("RWLOCK.INFO", key)
        if info:
            d = dict(zip(info[::2], info[1::2]))
            holds = d[b"holders"][1::2]
            assert all(v[0] + v[1] >= 1 and v[2] >= 1 for v in holds)
            writers = [v for v in holds if v[1] > 0]
            assert not writers or len(holds) == 1, "a writer is alone"
        r.execute_command("RWLOCK.ACQUIRE", key, "probe", "READ", 1000)
    r.delete(key)


@pytest.mark.parametrize("kind", ["lock", "sem", "rwlock"])
def test_damaged_restore_payloads_never_crash(server, r, kind):
    if kind == "lock":
        r.execute_command("LOCK.ACQUIRE", "src", "holder-one", 100000)
        r.execute_command("LOCK.ACQUIRE", "src", "holder-one", 100000)
    elif kind == "rwlock":
        for i in range(3):
            r.execute_command("RWLOCK.ACQUIRE", "src", f"h{i}", "READ", 100000 + i)
        r.execute_command("RWLOCK.ACQUIRE", "src", "h1", "READ", 100000)
    else:
        for i, n in enumerate([2, 1, 3]):
            r.execute_command("SEM.ACQUIRE", "src", f"h{i}", 10, 100000 + i, "PERMITS", n)
    payload = r.dump("src")
    body, version = payload[:-10], payload[-10:-8]
    assert r.restore("copy", 0, seal(body, version)) == b"OK", "the sealing itself is right"
    r.delete("copy")
    rng = random.Random({"lock": 7, "sem": 8, "rwlock": 9}[kind])
    refused = loaded = 0
    for i in range(2500):
        bad = seal(mutate(rng, body), version)
        try:
            r.restore("k", 0, bad, replace=True)
            loaded += 1
            check_consistent(r, "k")
        except redis.ResponseError as e:
            refused += 1
            assert "ERR" in str(e) or "Bad data format" in str(e), str(e)
            assert r.exists("k") == 0, "a refused payload leaves nothing behind"
        if i % 500 == 0:
            assert server.alive()
    assert server.alive()
    assert r.ping()
    assert refused > 1000, (refused, loaded)
    info = r.info("padlock")
    gauges = info["padlock_locks"] + info["padlock_semaphores"] + info["padlock_rwlocks"]
    assert gauges == 1, "only src is left"


def test_specific_bad_values_are_refused(r):
    r.execute_command("LOCK.ACQUIRE", "src", "HOLDERX", 100000)
    payload = r.dump("src")
    body, version = payload[:-10], payload[-10:-8]
    i = body.index(b"HOLDERX") + len(b"HOLDERX")
    assert body[i:i + 2] == b"\x02\x01", "count follows the holder"
    zero_count = body[:i] + b"\x02\x00" + body[i + 2:]
    with pytest.raises(redis.ResponseError):
        r.restore("k", 0, seal(zero_count, version))
    empty_holder = body.replace(b"\x05\x07HOLDERX", b"\x05\x00")
    with pytest.raises(redis.ResponseError):
        r.restore("k", 0, seal(empty_holder, version))
    assert r.exists("k") == 0
    assert r.info("padlock")["padlock_locks"] == 1


def test_damaged_value_in_rdb_file_is_refused_with_a_log_line(make_server):
    s = make_server()
    r = s.client()
    r.execute_command("LOCK.ACQUIRE", "k", "HOLDERX", 100000)
    r.save()
    s.stop()
    rdb = s.dir / "dump.rdb"
    data = bytearray(rdb.read_bytes())
    i = data.index(b"HOLDERX") + len(b"HOLDERX")
    assert data[i:i + 2] == b"\x02\x01"
    data[i + 1] = 0  # reentry count 0
    data[-8:] = struct.pack("<Q", crc64(bytes(data[:-8])))
    rdb.write_bytes(bytes(data))
    s.proc = __import__("subprocess").Popen(s.argv(), stdout=-3, stderr=-2)
    code = s.proc.wait(20)
    s.proc = None
    log = s.log.read_text(errors="replace")
    assert "refused a damaged pdlk-lock value: reentry count out of range" in log
    print(log[-3000:])
    assert code >= 0, f"an exit, not an abort or a signal (got {code})"
    assert "Guru Meditation" not in log and "REDIS BUG REPORT" not in log
