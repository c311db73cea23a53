"""A hold's renewal and loss, for `padlock.aio` (and, generated from this
file by `unasync.py` as `_sync_watch.py`, for `padlock.sync`): the shared
watcher's rounds, reads while the server keeps the lease, renewals, and
what a loss does."""

from __future__ import annotations

import contextlib
import os
import warnings
import weakref
from typing import Any, Optional

import redis

from . import _asyncio_runtime as rt
from ._async_hold import HoldCore
from ._common import LockLostError
from ._holders import COUNTS
from ._retry import CONNECTION_ERRORS, Verdict, verdict


class Hold(HoldCore):
    """A hold with its watching: renewed (or read, while the server keeps
    its lease) every third of the ttl by the shared watcher."""

    async def _acquire(self, blocking: bool, timeout: Optional[float]) -> Any:
        """`_grant`, reported only once it is held. A grant made while the
        keeper was replaced (killed, timed out) is renewed there before it
        is reported; when the server says it is gone, or no renewal got
        through (its lease unknown: it may have run out), it is given back
        and waited for again: `acquire()` never answers a grant that `held`
        denies."""
        end = None if timeout is None else rt.now() + timeout
        while True:
            reply = await self._grant(blocking, None if end is None else max(0.0, end - rt.now()))
            if reply is None or self._depth != 1 or not self.renews or self.held:
                return reply
            if self._depth:
                with contextlib.suppress(Exception):
                    await self.release()
            if not blocking or (end is not None and rt.now() >= end):
                return None

    def _heard_lost(self, why: str) -> None:
        """The server mailed this hold's loss (`LOST <why>`): the watcher
        marks it lost at once."""
        if self._depth == 0 or self._stopped:
            return
        self._mailed_lost = why
        rt.scheduler().add(self, rt.now(), self._gen)

    def _start_watcher(self) -> None:
        # The watcher holds the hold weakly: a hold dropped unreleased is
        # collected, and then stops renewing (and its binding ends).
        self._stopped = False
        self._gen += 1
        rt.scheduler().add(self, rt.now() + self._interval(), self._gen)
        if self._finalizer is None:
            self._finalizer = weakref.finalize(self, rt.collected, self._box)

    def _watches(self, gen: int) -> bool:
        """Whether rounds added as `gen` still watch this hold: the watcher
        drops the others in bulk, instead of waking for each."""
        return not self._stopped and gen == self._gen

    async def _watch_once(self, gen: int) -> Optional[float]:
        """One round of the shared watcher: when the next is due
        (`rt.now()` time), or None when this hold needs no more (or a later
        acquire watches it)."""
        if self._stopped or gen != self._gen:
            return None
        async with self._watching:
            self._round = rt.current()
            try:
                if self._stopped:
                    return None
                if self._past_max_hold(rt.now()):
                    # No renewal past `max_hold`: the lease runs out, and
                    # the hold is lost like any other.
                    if rt.now() < self._lease_until:
                        return self._lease_until
                    await self._mark_lost()
                    return None
                if self._mailed_lost is not None:
                    await self._mark_lost()
                    return None
                try:
                    renewed = await self._look() if self._bound else await self.renew()
                except rt.Cancelled:
                    raise
                except Exception:  # noqa: BLE001 - the watcher must never die silently
                    renewed = False
                if not renewed and not self._stopped:
                    await self._mark_lost()
                    return None
                return None if self._stopped else rt.now() + self._interval()
            finally:
                self._round = None

    def _past_max_hold(self, now: float) -> bool:
        """Whether one more renewal would carry the lease past `max_hold`."""
        if self.max_hold is None:
            return False
        return now + self.ttl_ms / 1000.0 > self._held_since + self.max_hold

    async def renew(self) -> bool:
        """Resets the lease now (and rebinds `KEEP`). False when the hold is
        lost or was never held: any error but a lost hold is retried until
        the lease may have run out."""
        return await self._renew()

    async def _renew(self, until: Optional[float] = None) -> bool:
        """`renew`, retried until `until` instead (a grant just made)."""
        if self._depth == 0 or self.lost.is_set():
            return False
        start = rt.now()
        deadline = self._lease_until if until is None else until
        m = await self._source.mailman() if self.keep else None
        for args in self._extend_cmds():
            cmd: list[Any] = args + ["KEEP"] if self.keep else args
            if m is not None:
                cmd += ["MAILBOX", m.box(args[1])]
            try:
                try:
                    await self._send(lambda _: cmd, "renew", deadline)
                except redis.ResponseError as e:
                    if m is None or not self._source.no_mailbox(e):
                        raise
                    cmd = cmd[:-2]  # an older server: watched by reads
                    await self._send(lambda _: cmd, "renew", deadline)
                if self.keep and not self._bound:
                    # Answered to a resend: bound where the first sending went
                    # (a connection since replaced). Once more, a new request.
                    await self._send(lambda _: cmd, "renew", deadline)
            except Exception as e:
                # Unless the server said the hold is gone, its lease may
                # still be bound: `_mark_lost` then ends the binding.
                self._unsure = verdict(e, "renew") is not Verdict.LOST
                return False
        self._lease_until = start + self.ttl_ms / 1000.0
        return True

    async def stop_renewing(self) -> None:
        """Stops renewing this hold (redis-semaphore's `stopRefresh`): its
        lease then runs out a ttl after the last renewal unless `renew()` is
        called by hand, and `held` turns False then. A lease the server
        kept (`KEEP`) is first bound to a connection made for it, which is
        then closed: the server stops keeping it, and it runs out a ttl from
        now. Until the next fresh acquire."""
        if self._depth == 0 or not self.renews:
            return
        self._resume = (self.renews, self.keep)
        self.renews = self.keep = False
        self._stopped = True
        async with self._watching:  # a round under way ends first
            if self._box[0] is None:
                return
            start = rt.now()
            try:
                for args in self._extend_cmds():
                    cmd: list[Any] = args + ["KEEP"]
                    await self._send(lambda _: cmd, "renew", self._lease_until, wait=True)
            except Exception as e:
                if verdict(e, "renew") is Verdict.LOST:
                    await self._mark_lost()
                else:
                    # Still bound on the shared connection, maybe: replaced.
                    await self._give_back(clean=False)
                return
            self._lease_until = start + self.ttl_ms / 1000.0
            await self._give_back()

    async def _look(self) -> bool:
        """The watcher's round while the server keeps the lease: a read,
        no write. Held: the lease left is known again. A connection that
        failed on the way is replaced and the lease bound to the new one
        (`renew`)."""
        start = rt.now()
        if self._mailbound and self._mailman is not None:
            # Bound there, no loss mailed since: kept a ttl past that.
            self._lease_until = max(self._lease_until, self._mailman.fresh() + self.ttl_ms / 1000.0)
            if self._lease_until > start + self._interval():
                return True  # known to last past the next round
            return await self.renew()
        if not self._mailbound and await self._source.mailman() is not None:
            return await self.renew()  # binds with the mailbox: no reads from now on
        try:
            replies = [await self._call(cmd, max(0.05, self._lease_until - start))
                       for cmd in self._look_cmds()]
        except CONNECTION_ERRORS:
            return await self.renew()
        except redis.ResponseError as e:
            # Another type under the key: lost. Anything else (a read not
            # allowed): the renewal writes instead.
            return False if str(e).startswith("WRONGTYPE") else await self.renew()
        left = self._lease_left(replies)
        if left is None:
            return False
        self._lease_until = start + left / 1000.0
        # A kept lease never has much less than two thirds of its ttl left
        # (the server renews it every third): less, and its binding is gone
        # (a connection the driver replaced on its own, as glide does).
        return await self.renew() if left < self.ttl_ms / 2 else True

    async def _release_rest(self) -> None:
        """The server counts holds this client does not (taken by a caller
        that shares the holder, or before a resend without `ID`): released
        too, with a warning, so that nothing stays held past `release()`."""
        warnings.warn(f"{self.key}: {self.holder} held more than this client took; released all",
                      RuntimeWarning, stacklevel=3)
        await self._end(clean=await self._release_all(self._release_cmd(), 64))

    async def _clear_leftover(self) -> None:
        """Before a fresh take: a hold of this holder left over
        (`COUNTS.left_over`) is released until none is left, at most 16
        times (the rest runs out with its lease); NOTHELD: none was."""
        left = COUNTS.leftover(self.key, self.holder)
        if left is not None:
            await self._release_all(left, 16)

    async def _release_all(self, cmd: list[Any], tries: int) -> bool:
        """Sends `cmd`, one release, until the server holds none of it
        (True), an error, or `tries` sendings."""
        for _ in range(tries):
            try:
                if self._released_all(await self._send(lambda _: cmd, "release", rt.now() + 1.0)):
                    return True
            except Exception:
                return False
        return False

    async def _mark_lost(self) -> None:
        if self._depth:
            COUNTS.gave(self.key, self.holder, self._ref, self._depth)
            if self._unsure:
                COUNTS.left_over(self.key, self.holder, self._release_cmd(), self.ttl_ms / 1000.0)
        self._depth = 0
        self._stopped = True
        # Nothing is held any more: nothing of it may stay bound (unless the
        # server said it was gone, the shared connection is replaced).
        await self._give_back(clean=not self._unsure)
        self._unsure = False
        self.lost.set()
        if self.on_lost is not None:
            rt.call_lost(self.on_lost, self)
        if self.cancel_on_loss and self._guarded is not None and not self._guarded.done():  # aio
            self._guarded.cancel()  # aio

    def check(self) -> None:
        """Raises `LockLostError` when the hold was lost."""
        if self.lost.is_set():
            raise LockLostError(f"{self.holder} lost its hold")

    @property
    def held(self) -> bool:
        """True while the lease cannot have run out: never after a loss, and
        never past the last successful renewal's send time plus the ttl."""
        return (self._depth > 0 and self._pid == os.getpid() and not self.lost.is_set()
                and self._mailed_lost is None and rt.now() < self._lease_until)


