# aio {
"""asyncio clients on `redis.asyncio` (`Redis` or `RedisCluster`) or on
valkey-glide (`glide(GlideClient, config)`, see `_glide`): the classes of
`padlock.sync`, awaitable, with `async with`.

This file is the one source of both flavours: `sync.py` is generated from
it (`clients/python/unasync.py`, which drops `async`/`await` and the lines
marked `# aio`, turns `#sync|` lines into code, and puts `_shared` for
`_ashared`). What differs between threads and an event loop (time, locks,
the watcher, the connections) lives in `_ashared` and `_shared`, under the
same names.

The holds of an event loop share one watcher task and, per server, one
connection of padlock's own (`_ashared`), which carries their commands and
`KEEP` bindings; a wait runs on a connection made for it and is bound on
the shared one once granted. When a hold turns out lost, `lost` is set,
`on_lost` is called, and the task that entered `async with` is cancelled
(unless `cancel_on_loss=False`): the guarded work stops, and the block ends
with `LockLostError`.
"""
# aio }
#sync| """Blocking clients on redis-py (`redis.Redis` or `redis.RedisCluster`) or
#sync| valkey-glide-sync (`glide(GlideClient, config)`, see `_glide`).
#sync|
#sync| Generated from `aio.py` by `clients/python/unasync.py`: edit that file.
#sync|
#sync| The holds of a process share one watcher thread and, per server, one
#sync| connection of padlock's own (`_shared`): acquires, renewals, reads and
#sync| releases go through it, and `KEEP` leases are bound to it. A wait runs on a
#sync| connection made for it, with a timeout longer than the wait, and its grant
#sync| is then bound to the shared connection. Every third of the ttl the watcher
#sync| checks each hold (a read while the server keeps the lease, a renewal
#sync| otherwise) and binds it again after the shared connection was replaced;
#sync| when a hold turns out lost, `lost` is set and `on_lost` is called (on a
#sync| thread of its own).
#sync| """

from __future__ import annotations

import contextlib
import os
import warnings
import weakref
from typing import Any, Callable, Optional, Sequence

import redis

from . import _ashared as rt
from ._common import (
    Edge,
    Hot,
    LockLostError,
    NotAcquiredError,
    NotHeldError,
    as_map,
    as_str,
    is_try_again,
    parse_graph,
    parse_top,
    to_ms,
    translate,
)
from ._holders import COUNTS, current_holder
from ._kinds import Commands, LockCommands, MultiLockCommands, RwCommands, SemaphoreCommands
from ._retry import (
    CONNECTION_ERRORS,
    Verdict,
    is_unknown_option,
    lost_message,
    pause,
    request_id,
    verdict,
    with_id,
)


class _Hold(Commands):
    """The life of one hold: acquire, renew, release, notice loss."""
    cancel_on_loss = True  # aio

    def __init__(
        self,
        client: Any,
        route_key: str,
        holder: Optional[str],
        ttl: float,
        keep: bool,
        on_lost: Optional[Callable[["_Hold"], None]],
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
        self._source = rt.Source(client, route_key)
        self._client = self._source.client
        # The keeper while the server may keep this hold's lease bound to
        # it, in a box a finalizer can reach without the hold (a hold
        # collected unreleased ends its binding: see `rt.collected`).
        self._box: list[Any] = [None]
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

    def _heard_lost(self, why: str) -> None:
        """The server mailed this hold's loss (`LOST <why>`): the watcher
        marks it lost at once."""
        if self._depth == 0 or self._stopped:
            return
        self._mailed_lost = why
        rt.scheduler().add(self, rt.now(), self._gen)

    async def _send(self, make: Callable[[Optional[float]], list[Any]], phase: str,
                    deadline: Optional[float], wait: bool = False) -> Any:
        """One changing request, with one request-id, sent until it is
        answered or `deadline` (`rt.now()` time; None: no end) passes.
        `make` builds the arguments from the seconds left."""
        rid = request_id() if self._ids else None
        attempt = 0
        while True:
            left = None if deadline is None else max(0.0, deadline - rt.now())
            # A wait may take its BLOCK timeout and then some (no driver
            # timeout may abandon a wait the server still holds); anything
            # else at most the time left.
            limit = (rt.FOREVER if left is None else left + 5.0) if wait else (
                None if left is None else max(left, 0.05))
            try:
                return await self._call(with_id(make(left), rid), limit, wait)
            except Exception as e:
                if rid is not None and is_unknown_option(e):
                    self._ids, rid = False, None
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
        self._own_process()
        if self._depth == 0 and self._resume is not None:
            (self.renews, self.keep), self._resume = self._resume, None
        if self._depth == 0 and self._own_holder is None:
            self.holder = current_holder()
        if self._depth == 0:
            self._mailed_lost = None
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
                    await rt.take_back(self._keeper, self._last_wait, self._release_cmd(), e)
                    await self._give_back()
                raise
        if reply is None:
            if self._depth == 0:
                await self._give_back()
            return None
        self._depth += 1
        COUNTS.took(self.key, self.holder)
        self._lease_until = start + ttl
        if self._depth == 1:
            self.lost.clear()
            self._held_since = start
            if self.renews:
                self._start_watcher()
        if self.renews and blocking and not (self._granted_bound and self._bound) and (
                self.keep or self._lease_until - rt.now() < ttl * 2 / 3):
            # Granted after a wait: bound now (`KEEP`), and the lease known
            # from a send time only once renewed.
            try:
                await self.renew()
            except BaseException:
                # Cancelled (interrupted) right after the grant: the caller
                # hears "not acquired", so nothing of it may stay held.
                with contextlib.suppress(Exception):
                    await self.release()
                raise
        return reply

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
            await self._end(clean=v is Verdict.LOST)
            if v is Verdict.LOST and not isinstance(e, NotHeldError):
                raise NotHeldError(lost_message(self.key, self.holder, e)) from None
            raise
        self._depth = max(0, self._depth - 1)
        others = COUNTS.gave(self.key, self.holder)
        if self._released_all(reply):
            await self._end()
        elif self._depth == 0 and others:
            # Other objects of this holder still hold the key: this one is
            # done, its connection closed so that no lease stays bound to
            # it (theirs renew and bind their own).
            await self._end(clean=False)
        elif self._depth == 0:
            await self._release_rest()

    async def _release_rest(self) -> None:
        """The server counts holds this client does not (taken by a caller
        that shares the holder, or before a resend without `ID`): released
        too, with a warning, so that nothing stays held past `release()`."""
        warnings.warn(f"{self.key}: {self.holder} held more than this client took; released all",
                      RuntimeWarning, stacklevel=3)
        for _ in range(64):
            try:
                reply = await self._send(lambda _: self._release_cmd(), "release", rt.now() + 1.0)
            except Exception:
                break
            if self._released_all(reply):
                await self._end()
                return
        await self._end(clean=False)

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
            COUNTS.gave(self.key, self.holder, self._depth)
        self._depth = 0
        self._stopped = True
        if self._round is not None and self._round != rt.current():
            async with self._watching:  # a round under way ends first
                pass
        await self._give_back(clean)

    # -- renewal and loss ------------------------------------------------------
    def _start_watcher(self) -> None:
        # The watcher holds the hold weakly: a hold dropped unreleased is
        # collected, and then stops renewing (and its binding ends).
        self._stopped = False
        self._gen += 1
        rt.scheduler().add(self, rt.now() + self._interval(), self._gen)
        if self._finalizer is None:
            self._finalizer = weakref.finalize(self, rt.collected, self._box)

    def _interval(self) -> float:
        return max(self.ttl_ms / 3000.0, 0.001)

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
        if self._depth == 0 or self.lost.is_set():
            return False
        start = rt.now()
        m = await self._source.mailman() if self.keep else None
        for args in self._extend_cmds():
            cmd: list[Any] = args + ["KEEP"] if self.keep else args
            if m is not None:
                cmd += ["MAILBOX", m.mailbox]
            try:
                try:
                    await self._send(lambda _: cmd, "renew", self._lease_until)
                except redis.ResponseError as e:
                    if m is None or not self._source.no_mailbox(e):
                        raise
                    cmd = cmd[:-2]  # an older server: watched by reads
                    await self._send(lambda _: cmd, "renew", self._lease_until)
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

    async def _mark_lost(self) -> None:
        if self._depth:
            COUNTS.gave(self.key, self.holder, self._depth)
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


class Lock(LockCommands, _Hold):
    """A reentrant lock with a lease and a fencing token.

    >>> async with Lock(r, "job:1", ttl=30) as lock:
    ...     await do_work(fence=lock.fence)
    """

    def __init__(
        self,
        client: Any,
        key: str,
        *,
        ttl: float = 30.0,
        holder: Optional[str] = None,
        keep: bool = True,
        renew: bool = True,
        max_hold: Optional[float] = None,
        blocking_timeout: Optional[float] = None,
        on_lost: Optional[Callable[[_Hold], None]] = None,
        cancel_on_loss: bool = True,  # aio
    ) -> None:
        _Hold.__init__(self, client, key, holder, ttl, keep, on_lost, renew, max_hold)
        self.cancel_on_loss = cancel_on_loss  # aio
        self.blocking_timeout = blocking_timeout
        self.key = key

    async def acquire(self, blocking: bool = True, timeout: Optional[float] = None) -> Optional[int]:
        """The fence, or None when not acquired (without `blocking`, or when
        `timeout` seconds passed). Waits server-side, first come first
        served; -TRYAGAIN of a restart grace is retried until `timeout`."""
        reply = await self._acquire(blocking, timeout)
        return None if reply is None else self._took(reply)

    async def locked(self) -> bool:
        """Whether anyone holds the key."""
        return bool(await self._client.exists(self.key))

    async def owned(self) -> bool:
        """Whether this holder holds it, as the server sees it now."""
        return as_str((await self.info()).get("holder", b"")) == self.holder

    async def info(self) -> dict[str, Any]:
        return as_map(await self._client.execute_command("LOCK.INFO", self.key))

    async def __aenter__(self) -> "Lock":
        await self._enter()
        return self

    async def __aexit__(self, t: Any, exc: Optional[BaseException], tb: Any) -> None:
        await self._exit(exc)


class Semaphore(SemaphoreCommands, _Hold):
    """Counting semaphore: up to `limit` permits across holders, each
    holder with its own lease."""

    def __init__(
        self,
        client: Any,
        key: str,
        limit: int,
        *,
        permits: int = 1,
        ttl: float = 30.0,
        holder: Optional[str] = None,
        keep: bool = True,
        renew: bool = True,
        max_hold: Optional[float] = None,
        blocking_timeout: Optional[float] = None,
        on_lost: Optional[Callable[[_Hold], None]] = None,
        cancel_on_loss: bool = True,  # aio
    ) -> None:
        _Hold.__init__(self, client, key, holder, ttl, keep, on_lost, renew, max_hold)
        self.cancel_on_loss = cancel_on_loss  # aio
        self.blocking_timeout = blocking_timeout
        self.key, self.limit, self.permits = key, limit, permits

    async def acquire(self, blocking: bool = True, timeout: Optional[float] = None) -> Optional[int]:
        """The permits this holder now holds, or None."""
        reply = await self._acquire(blocking, timeout)
        return None if reply is None else self._took(reply)

    async def info(self) -> dict[str, Any]:
        return as_map(await self._client.execute_command("SEM.INFO", self.key))

    async def __aenter__(self) -> "Semaphore":
        await self._enter()
        return self

    async def __aexit__(self, t: Any, exc: Optional[BaseException], tb: Any) -> None:
        await self._exit(exc)


class MultiLock(MultiLockCommands, _Hold):
    """Several locks taken all at once or not at all (`LOCK.MACQUIRE`). In a
    cluster the keys must share a hash tag."""

    def __init__(
        self,
        client: Any,
        keys: Sequence[str],
        *,
        ttl: float = 30.0,
        holder: Optional[str] = None,
        keep: bool = True,
        renew: bool = True,
        max_hold: Optional[float] = None,
        blocking_timeout: Optional[float] = None,
        on_lost: Optional[Callable[[_Hold], None]] = None,
        cancel_on_loss: bool = True,  # aio
    ) -> None:
        _Hold.__init__(self, client, keys[0], holder, ttl, keep, on_lost, renew, max_hold)
        self.cancel_on_loss = cancel_on_loss  # aio
        self.blocking_timeout = blocking_timeout
        self.keys = list(keys)
        self.key = self.keys[0]

    async def acquire(self, blocking: bool = True, timeout: Optional[float] = None) -> Optional[list[int]]:
        """The fences, one per key, or None."""
        reply = await self._acquire(blocking, timeout)
        return None if reply is None else self._took(reply)

    async def __aenter__(self) -> "MultiLock":
        await self._enter()
        return self

    async def __aexit__(self, t: Any, exc: Optional[BaseException], tb: Any) -> None:
        await self._exit(exc)


class RwHold(RwCommands, _Hold):
    """One mode (`READ` or `WRITE`) of a `ReadWriteLock`."""

    def __init__(self, rw: "ReadWriteLock", mode: str) -> None:
        _Hold.__init__(self, rw._client, rw.key, rw._own_holder, rw.ttl, rw.keep, rw.on_lost,
                       rw.renews, rw.max_hold)
        self.cancel_on_loss = rw.cancel_on_loss  # aio
        self.blocking_timeout = rw.blocking_timeout
        self.key, self.mode = rw.key, mode

    async def acquire(self, blocking: bool = True, timeout: Optional[float] = None) -> Optional[int]:
        """The holder's fence, or None."""
        reply = await self._acquire(blocking, timeout)
        return None if reply is None else self._took(reply)

    async def __aenter__(self) -> "RwHold":
        await self._enter()
        return self

    async def __aexit__(self, t: Any, exc: Optional[BaseException], tb: Any) -> None:
        await self._exit(exc)


class ReadWriteLock:
    """A fair read-write lock: `async with rw.read(): ...`,
    `async with rw.write(): ...`. Both modes belong to one holder, so a
    reader may upgrade (`write()` while reading: granted once it is the
    only reader) or downgrade."""

    def __init__(
        self,
        client: Any,
        key: str,
        *,
        ttl: float = 30.0,
        holder: Optional[str] = None,
        keep: bool = True,
        renew: bool = True,
        max_hold: Optional[float] = None,
        blocking_timeout: Optional[float] = None,
        on_lost: Optional[Callable[[_Hold], None]] = None,
        cancel_on_loss: bool = True,  # aio
    ) -> None:
        self._client, self.key, self.ttl = client, key, ttl
        self._own_holder = holder
        self.keep, self.on_lost = keep, on_lost
        self.cancel_on_loss = cancel_on_loss  # aio
        self.renews, self.max_hold = renew, max_hold
        self.blocking_timeout = blocking_timeout
        self._read = RwHold(self, "READ")
        self._write = RwHold(self, "WRITE")

    @property
    def holder(self) -> str:
        """`holder=`, or the caller's context's (see `Lock`)."""
        return self._own_holder or current_holder()

    def read(self) -> RwHold:
        return self._read

    def write(self) -> RwHold:
        return self._write

    async def info(self) -> dict[str, Any]:
        return as_map(await rt.node(self._client, self.key).execute_command("RWLOCK.INFO", self.key))


def glide(factory: Any, config: Any) -> rt.Driver:
    """valkey-glide as the driver: `factory` is `glide.GlideClient` or
    `glide.GlideClusterClient` (`glide_sync`'s for the blocking classes),
    `config` its configuration (addresses, credentials, TLS, ...). Pass the
    result where a redis-py client goes: padlock makes the glide clients it
    needs from it (see `_glide`)."""
    return rt.Driver(factory, config)


async def graph(client: Any) -> list[Edge]:
    """`LOCK.GRAPH` as data (of one node; in a cluster, of each node you ask)."""
    return parse_graph(await client.execute_command("LOCK.GRAPH"))


async def top(client: Any, count: int = 10) -> list[Hot]:
    """`LOCK.TOP`: the keys with the most waiters right now, most first
    (of one node; in a cluster, of each node you ask)."""
    return parse_top(await client.execute_command("LOCK.TOP", "COUNT", count))
