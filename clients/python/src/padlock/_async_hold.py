"""The life of one hold of `padlock.aio` (and, generated from this file by
`unasync.py` as `_sync_hold.py`, of `padlock.sync`): the acquire with its
resends, the wait, the release; what threads and an event loop do
differently comes from the runtime (`rt`)."""

from __future__ import annotations

import contextlib
import logging
import os
import weakref
from typing import Any, Callable, Optional, Sequence

import redis

from . import _asyncio_mail as mail
from . import _asyncio_runtime as rt
from ._common import LockLostError, NotAcquiredError, NotHeldError, Replicas, is_moved, is_try_again, to_ms, translate
from ._holders import COUNTS, current_holder
from ._kinds import Commands
from ._retry import (
    CONNECTION_ERRORS, MAX_MOVES, Verdict, is_unknown_option, lost_message, pause, request_id, verdict, with_id,
)


class HoldCore(Commands):
    """The life of one hold up to its watching: acquire, release, the
    calls that carry them. `_async_watch.Hold` adds the renewal and loss."""
    cancel_on_loss = True  # aio
    #: Grants that wait for replicas (`replicas=`; see `Replicas`).
    replicas: Optional[Replicas] = None
    _giving_back = False

    def __init__(
        self,
        client: Any,
        route_key: str,
        holder: Optional[str],
        ttl: float,
        keep: bool,
        on_lost: Optional[Callable[[Any], None]],
        renew: bool = True,
        max_hold: Optional[float] = None,
    ) -> None:
        # Without `holder=`, the caller's context's (see `_holders`), taken
        # again at each fresh acquire.
        self._own_holder = holder
        self.holder = holder or current_holder()
        # The process whose hold this object tracks: a forked child's copy
        # of it holds nothing (see `_own_process`).
        self._pid = os.getpid()
        self.ttl_ms = to_ms(ttl)
        self.renews = renew
        self.max_hold = max_hold
        # A lease the server keeps (`KEEP`) would outlive both bounds.
        self.keep = keep and renew and max_hold is None
        self._held_since = 0.0
        self.on_lost = on_lost
        self.lost = rt.Event()
        self._source = mail.Source(client, route_key)
        self._client = self._source.client
        # The keeper while the server may keep this hold's lease bound to
        # it, in a box a finalizer can reach without the hold (a hold
        # collected unreleased ends its binding: see `rt.collected`).
        self._box: list[Any] = [None]
        self._ref = weakref.ref(self)  # how COUNTS knows this object
        self._finalizer: Optional[weakref.finalize] = None
        self._io = rt.Lock()
        self._keeper: Optional[rt.Keeper] = None
        self._stopped = True
        # The watcher's round of this hold while one runs (what runs it),
        # and a lock it holds meanwhile: `_end` waits for it.
        self._round: Any = None
        self._watching = rt.Lock()
        self._gen = 0
        self._guarded: Any = None
        self._depth = 0
        # When the lease may run out at the earliest: the send time of the
        # latest request that set it, plus the ttl.
        self._lease_until = 0.0
        self._ids = True
        # The keeper's epoch when this hold's lease was bound to it (`KEEP`):
        # while it is still the keeper's, the server renews the lease and
        # the watcher only reads.
        self._bound_epoch = -1
        # The keeper's epoch its latest write of this hold went out on: a
        # `WAIT` there counts from it (`_on_replicas`).
        self._written_epoch = -1
        # The binding names the mailbox (`KEEP MAILBOX`): its loss is mailed
        # (`_heard_lost`), and the mailman's one PING per interval is all
        # its watching costs. The request-ids it may be mailed under, and
        # the loss heard (its why) until the watcher's round takes it.
        self._mailbound = False
        self._loss_ids: list[str] = []
        self._mailman: Any = None
        self._mailed_lost: Optional[str] = None
        self._granted_bound = False
        # The latest wait sent (its request-id in it): what an acquire cut
        # short takes back.
        self._last_wait: Optional[list[Any]] = None
        self._unsure = False
        # `stop_renewing` turned renewal off until the next fresh acquire:
        # what `renews` and `keep` were.
        self._resume: Optional[tuple[bool, bool]] = None

    @property
    def _bound(self) -> bool:
        return self._keeper is not None and self._bound_epoch == self._keeper.epoch

    # -- the connections --------------------------------------------------------
    async def _call(self, args: Sequence[Any], limit: Optional[float] = None, wait: bool = False) -> Any:
        """One command, waiting for its reply at most `limit` seconds: a wait
        (`wait`) on a connection of its own, closed after it; anything else
        on the shared connection, whose `KEEP` bindings it then carries."""
        async with self._io:
            try:
                if self._keeper is None:
                    self._keeper = await self._source.keeper()
                k = self._keeper
                if "KEEP" in args and (wait or "MAILBOX" in args):
                    # Watched before it is sent: a loss is never mailed
                    # to nobody.
                    await self._watch_losses(args[args.index("ID") + 1] if "ID" in args else None)
                if not wait:
                    reply, epoch = await k.call(args, limit)
                    self._written_epoch = epoch
                    if "KEEP" in args:
                        self._bound_epoch = epoch
                        self._box[0] = k
                        self._mailbound = "MAILBOX" in args
                    return reply
                self._last_wait = list(args)
                reply, on = await self._source.wait(args, limit, self._release_cmd())
                # Granted at once on the keeper: bound there with the
                # mailbox already (a grant mailed later binds again).
                self._granted_bound = on is not None and reply is not None and "KEEP" in args
                if self._granted_bound and on is not None:
                    self._bound_epoch, self._box[0], self._mailbound = on, k, True
                    self._written_epoch = on
                return reply
            except redis.ResponseError as e:
                raise translate(e) from None

    async def _watch_losses(self, rid: Optional[str]) -> None:
        m = await self._source.mailman()
        if m is None or rid is None:
            return
        self._mailman = m
        m.watch(rid, self, self._interval())
        self._loss_ids.append(rid)
        keep = 2 * len(self._extend_cmds())
        if len(self._loss_ids) > keep:
            # Only the latest bindings' ids can still be mailed (those of
            # the round before stay while a resend may be under way).
            m.unwatch(self._loss_ids[:-keep])
            del self._loss_ids[:-keep]

    async def _send(self, make: Callable[[Optional[float]], list[Any]], phase: str,
                    deadline: Optional[float], wait: bool = False) -> Any:
        """One changing request, with one request-id, sent until it is
        answered or `deadline` (`rt.now()` time; None: no end) passes.
        `make` builds the arguments from the seconds left."""
        rid = request_id() if self._ids else None
        attempt = moves = 0
        while True:
            left = None if deadline is None else max(0.0, deadline - rt.now())
            # A wait may take its BLOCK timeout and then some (no driver
            # timeout may abandon a wait the server still holds); anything
            # else at most the time left.
            limit = (rt.FOREVER if left is None else left + 5.0) if wait else (
                None if left is None else max(left, 0.05))
            try:
                reply = await self._call(with_id(make(left), rid), limit, wait)
                if attempt:
                    # A resend may be answered from the server's memory of an
                    # earlier sending, which bound nothing (`KEEP`) here.
                    self._bound_epoch, self._granted_bound = -1, False
                return reply
            except Exception as e:
                if rid is not None and is_unknown_option(e):
                    self._ids, rid = False, None
                    continue
                if is_moved(e) and self._source.cluster and moves < MAX_MOVES:
                    moves += 1  # resharded: sent there with its id (`_moved`)
                    await self._moved()
                    continue
                if verdict(e, phase) is not Verdict.RESEND or (rid is None and phase != "renew"):
                    # Without an id (an older server) only a renewal is
                    # safe to send twice.
                    raise
                p = pause(attempt, rt.now(), deadline)
                if p is None:
                    raise
                attempt += 1
                await rt.sleep(p)

    async def _moved(self) -> None:
        """Resharded: the next request goes to the key's new owner, where nothing is bound yet."""
        async with self._io:
            await self._source.moved()
            if self._mailman is not None:
                self._mailman.unwatch(self._loss_ids)
            self._keeper, self._mailman, self._loss_ids, self._client = None, None, [], self._source.client
            self._bound_epoch, self._granted_bound, self._mailbound = -1, False, False

    async def _give_back(self, clean: bool = True) -> None:
        """The hold is over. Unless nothing of it can still be bound
        (`clean`), the shared connection is replaced, so that no `KEEP`
        lease of it stays kept (the other holds bind again)."""
        async with self._io:
            self._bound_epoch = -1
            self._mailbound = False
            if self._mailman is not None:
                self._mailman.unwatch(self._loss_ids)
            self._loss_ids = []
            kept, self._box[0] = self._box[0], None
            if not clean and kept is not None:
                await kept.reset()

    def _own_process(self) -> None:
        """A hold object a forked child inherited: the parent's hold stays
        the parent's, so here it starts empty (no depth, no keeper, no
        watcher, a holder of this process's context)."""
        if self._pid == os.getpid():
            return
        self._pid = os.getpid()
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        self._depth = 0
        self._box = [None]
        self._keeper = None
        self._io = rt.Lock()
        self._watching = rt.Lock()
        self._round = None
        self._gen += 1
        self._stopped = True
        self.lost = rt.Event()
        self._bound_epoch = -1
        self._mailbound = False
        self._loss_ids = []
        self._mailman = None
        self._mailed_lost = None
        self._lease_until = 0.0
        if self._own_holder is None:
            self.holder = current_holder()

    # -- acquire / release -----------------------------------------------------
    async def _acquire(self, blocking: bool, timeout: Optional[float]) -> Any:
        return await self._grant(blocking, timeout)  # (`_async_watch.Hold`: once held)

    async def _grant(self, blocking: bool, timeout: Optional[float]) -> Any:
        self._own_process()
        if self._depth == 0 and self._resume is not None:
            (self.renews, self.keep), self._resume = self._resume, None
        if self._depth == 0 and self._own_holder is None:
            self.holder = current_holder()
        if self._depth == 0:
            self._mailed_lost = None
            if COUNTS.any_left:
                await self._clear_leftover()
        start = rt.now()
        ttl = self.ttl_ms / 1000.0
        if blocking:
            deadline = None if timeout is None else start + timeout
        else:
            deadline = start + ttl

        def make(left: Optional[float]) -> list[Any]:
            # `KEEP` on a wait too: the server refuses a ttl below its floor
            # before the wait starts, never after a grant. The wait's own
            # connection closes when it ends, so its grant is bound again
            # below, on the shared connection.
            args = self._acquire_cmd(blocking, left)
            return args + ["KEEP"] if self.keep else args

        self._last_wait = None
        while True:
            try:
                reply = await self._send(make, "acquire" if blocking else "try", deadline, wait=blocking)
                break
            except Exception as e:
                if self.keep and not self._ids and is_unknown_option(e):
                    # An older server: the watcher renews instead.
                    self.keep = False
                    continue
                if self._depth == 0:
                    await self._give_back(clean=not isinstance(e, CONNECTION_ERRORS))
                if blocking and is_try_again(e):
                    return None
                raise
            except BaseException as e:
                # Cut short (Ctrl-C, a cancelled task) anywhere after the
                # wait was sent: nothing stays held that the caller does not
                # know of.
                if self._depth == 0 and self._last_wait is not None and self._keeper is not None:
                    await mail.take_back(self._keeper, self._last_wait, self._release_cmd(), e)
                    await self._give_back()
                raise
        if reply is None:
            if self._depth == 0:
                await self._give_back()
            return None
        self._depth += 1
        COUNTS.took(self.key, self.holder, self._ref)
        self._lease_until = start + ttl
        if self._depth == 1:
            self.lost.clear()
            self._held_since = start
            if self.renews:
                self._start_watcher()
        if self.renews and blocking and not (self._granted_bound and self._bound) and (
                self.keep or self._lease_until - rt.now() < ttl * 2 / 3):
            # Granted after a wait: bound now (`KEEP`), and the lease known
            # from a send time only once renewed: tried for a ttl (a second
            # at least) within the timeout, not just until the lease's lower
            # bound, long past after a wait.
            until = rt.now() + max(ttl, 1.0)
            try:
                await self._renew(until if deadline is None else min(until, deadline))
            except BaseException:
                # Cancelled (interrupted) right after the grant: the caller
                # hears "not acquired", so nothing of it may stay held.
                with contextlib.suppress(Exception):
                    await self.release()
                raise
        if self._depth == 1 and not await self._on_replicas("acquire"):
            return None
        return reply

    async def _on_replicas(self, what: str) -> bool:
        """Whether enough replicas have the grant (or the release) just
        made (see `Replicas`); a grant short of them is given back, unless
        the user chose "warn"."""
        want = self.replicas
        if want is None or self._giving_back:
            return True
        got, why = 0, "no connection to ask on"
        try:
            if what == "acquire" and (self._keeper is None or self._written_epoch != self._keeper.epoch):
                # Granted on another connection (mailed, or before a
                # reconnect): a write here after the grant, which WAIT
                # counts from.
                await self._renew()
            k = self._keeper
            if k is not None:
                got = want.counted([(await k.call(cmd, want.timeout + rt.TIMEOUT))[0]
                                    for cmd in want.wait_commands()])
                why = f"{got} of {want.count} replicas had it within {want.timeout}s"
        except (redis.RedisError, OSError) as e:
            got, why = 0, f"the replicas could not be asked ({e})"
        if got >= want.count:
            return True
        log = logging.getLogger("padlock")
        if what == "release" or want.on_shortfall == "warn":
            log.warning("%s of %s by %s: %s", what, self.key, self.holder, why)
            return True
        log.warning("%s: granted to %s, but %s: released", self.key, self.holder, why)
        self._giving_back = True
        try:
            with contextlib.suppress(Exception):
                await self.release()
        finally:
            self._giving_back = False
        return False

    async def release(self) -> None:
        """Gives back one hold. `NotHeldError` when it was lost (or never
        held); a connection error once the release could not be sent before
        the lease may have run out (the connection is closed: the server
        frees the key at the lease's end)."""
        self._own_process()
        if self._depth == 0:
            raise NotHeldError(f"{self.key}: not held by {self.holder}")
        deadline = max(self._lease_until, rt.now() + 1.0)
        try:
            reply = await self._send(lambda _: self._release_cmd(), "release", deadline)
        except Exception as e:
            v = verdict(e, "release")
            if v is not Verdict.LOST:
                COUNTS.left_over(self.key, self.holder, self._release_cmd(), self.ttl_ms / 1000.0)
            await self._end(clean=v is Verdict.LOST)
            if v is Verdict.LOST and not isinstance(e, NotHeldError):
                raise NotHeldError(lost_message(self.key, self.holder, e)) from None
            raise
        self._depth = max(0, self._depth - 1)
        others = COUNTS.gave(self.key, self.holder, self._ref)
        if self._released_all(reply):
            await self._on_replicas("release")
            await self._end()
        elif self._depth == 0 and others:
            # Other objects of this holder still hold the key: this one is
            # done, its connection closed so that no lease stays bound to
            # it (theirs renew and bind their own).
            await self._end(clean=False)
        elif self._depth == 0:
            await self._release_rest()

    async def _release_rest(self) -> None:
        raise NotImplementedError  # `_async_watch.Hold`

    async def _clear_leftover(self) -> None:
        raise NotImplementedError  # `_async_watch.Hold`

    blocking_timeout: Optional[float] = None

    async def _enter(self) -> None:
        reply = await self._acquire(True, self.blocking_timeout)
        if reply is None:
            raise NotAcquiredError(f"{self.key}: not acquired within {self.blocking_timeout} s")
        self._took(reply)
        self._guarded = rt.current()

    async def _exit(self, exc: Optional[BaseException]) -> None:
        """Leaving a `with` block: release; a hold lost on the way raises
        `LockLostError` unless the block raised already (or was cancelled
        because of the loss)."""
        self._guarded = None
        lost = self.lost.is_set()
        if self._depth > 0:
            try:
                await self.release()
            except NotHeldError:
                lost = True
        if lost and (exc is None or isinstance(exc, rt.Cancelled)):
            raise LockLostError(f"{self.key}: the hold was lost while the work went on") from exc

    async def _end(self, clean: bool = True) -> None:
        if self._depth:
            COUNTS.gave(self.key, self.holder, self._ref, self._depth)
        self._depth = 0
        self._stopped = True
        if self._round is not None and self._round != rt.current():
            async with self._watching:  # a round under way ends first
                pass
        await self._give_back(clean)

    def _interval(self) -> float:
        return max(self.ttl_ms / 3000.0, 0.001)

    def _start_watcher(self) -> None:
        raise NotImplementedError  # `_async_watch.Hold`

    async def _renew(self, until: Optional[float] = None) -> bool:
        raise NotImplementedError  # `_async_watch.Hold`
