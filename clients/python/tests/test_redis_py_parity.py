"""redis-py's `Lock` behaviour tests, re-expressed against `padlock.Lock`.
Each test names the redis-py test it follows; behaviours that differ on
purpose are listed in this folder's README and tested as they are here."""

import time

import pytest
import redis

from padlock import Lock, NotAcquiredError, NotHeldError


def test_lock(r):  # test_lock
    lock = Lock(r, "foo", ttl=10)
    assert lock.acquire(blocking=False)
    assert lock.info()["holder"] == lock.holder.encode()
    # Kept (`KEEP`): the key's own expiry is far away while bound, and the
    # lease is the ttl the lock gets once nothing keeps it.
    assert r.pttl("foo") > 1 << 51 and lock.info()["ttl"] == 10000
    lock.release()
    assert r.exists("foo") == 0


def test_lock_token(r):  # test_lock_token
    lock = Lock(r, "foo", holder="abc", ttl=10)
    lock.acquire()
    assert lock.info()["holder"] == b"abc" and lock.holder == "abc"


def test_locked_and_owned(r):  # test_locked, test_owned
    lock = Lock(r, "foo", ttl=10)
    assert not lock.locked() and not lock.owned()
    lock.acquire()
    assert lock.locked() and lock.owned()
    assert not Lock(r, "foo", ttl=10, holder="other").owned(), "another holder does not own it"
    lock.release()
    assert not lock.locked() and not lock.owned()


def test_owned_with_decoded_responses(server):  # test_owned_with_decoded_responses
    r = server.client(decode_responses=True)
    lock = Lock(r, "foo", ttl=10)
    assert lock.acquire() and lock.owned()
    lock.release()


def test_competing_locks(r):  # test_competing_locks
    # (redis-py draws a token per object; padlock's holder is per thread
    # unless named, so the competitors are named here.)
    lock1, lock2 = Lock(r, "foo", ttl=10, holder="1"), Lock(r, "foo", ttl=10, holder="2")
    assert lock1.acquire(blocking=False)
    assert lock2.acquire(blocking=False) is None
    lock1.release()
    assert lock2.acquire(blocking=False)
    assert lock1.acquire(blocking=False) is None
    lock2.release()


def test_timeout_and_float_timeout(r):  # test_timeout, test_float_timeout
    lock = Lock(r, "foo", ttl=9.5)
    lock.acquire()
    assert lock.info()["ttl"] == 9500
    lock.release()


def test_blocking_timeout(r):  # test_blocking_timeout
    lock1, lock2 = Lock(r, "foo", ttl=10, holder="1"), Lock(r, "foo", ttl=10, holder="2")
    assert lock1.acquire(blocking=False)
    start = time.monotonic()
    assert lock2.acquire(timeout=0.2) is None
    assert 0.2 <= time.monotonic() - start < 1.0
    lock1.release()


def test_context_manager(r):  # test_context_manager
    with Lock(r, "foo", ttl=10) as lock:
        assert lock.info()["holder"] == lock.holder.encode()
    assert r.exists("foo") == 0


def test_context_manager_raises_when_not_acquired(r):
    # test_context_manager_raises_when_locked_not_acquired
    Lock(r, "foo", ttl=10, holder="first").acquire()
    with pytest.raises(NotAcquiredError):
        with Lock(r, "foo", ttl=10, blocking_timeout=0.1, holder="second"):
            pass


def test_releasing_unlocked_lock_raises_error(r):  # test_releasing_unlocked_lock_raises_error
    lock = Lock(r, "foo", ttl=10)
    with pytest.raises(NotHeldError):
        lock.release()


def test_releasing_lock_no_longer_owned_raises_error(r):
    # test_releasing_lock_no_longer_owned_raises_error
    lock = Lock(r, "foo", ttl=10)
    lock.acquire()
    r.delete("foo")
    Lock(r, "foo", holder="someone-else", ttl=10).acquire()
    with pytest.raises(NotHeldError):
        lock.release()
    assert r.exists("foo") == 1, "the other holder's lock stays"


def test_reacquire_lock(r):  # test_reacquire_lock, test_extend_lock_replace_ttl
    lock = Lock(r, "foo", ttl=10, keep=False)
    lock.acquire()
    r.pexpire("foo", 5000)
    assert lock.renew()
    assert 8000 < r.pttl("foo") <= 10000
    lock.release()


def test_renewing_a_lock_no_longer_held(r):
    # test_reacquiring_unlocked_lock_raises_error,
    # test_extending_lock_no_longer_owned_raises_error: here renew() says False
    lock = Lock(r, "foo", ttl=10)
    assert not lock.renew()
    lock.acquire()
    r.delete("foo")
    assert not lock.renew()


def test_reentrant(r):  # differs: redis-py's Lock is not reentrant
    lock = Lock(r, "foo", ttl=10)
    f = lock.acquire()
    assert lock.acquire(blocking=False) == f
    lock.release()
    assert lock.locked()
    lock.release()
    assert not lock.locked()


def test_no_lease_without_ttl_is_not_offered(r):  # differs: timeout=None (no expiry)
    with pytest.raises(redis.ResponseError, match="ttl-ms"):
        Lock(r, "foo", ttl=10**9).acquire()
