"""The commands of each kind of hold, shared by the blocking and the
asyncio flavours: what to send to acquire, renew and release, and what the
replies mean. The flavours only run them."""

from __future__ import annotations

from typing import Any, Optional, Sequence

from ._common import as_map, as_str, block_args


class Commands:
    key: str
    holder: str
    ttl_ms: int
    _depth: int

    def _acquire_cmd(self, blocking: bool, timeout: Optional[float]) -> list[Any]:
        raise NotImplementedError

    def _extend_cmds(self) -> list[list[Any]]:
        raise NotImplementedError

    def _release_cmd(self) -> list[Any]:
        raise NotImplementedError

    def _released_all(self, reply: Any) -> bool:
        raise NotImplementedError

    def _took(self, reply: Any) -> Any:
        """What `acquire` returns for a grant's reply."""
        raise NotImplementedError

    def _look_cmds(self) -> list[list[Any]]:
        """Reads that tell whether the hold still lives (for a lease the
        server keeps with `KEEP`: no write needed to check on it)."""
        return [[self._info_cmd, self.key]]

    _info_cmd = "LOCK.INFO"

    def _lease_left(self, replies: list[Any]) -> Optional[int]:
        """The lease left (ms) by those reads; None when not held."""
        left: Optional[int] = None
        for raw in replies:
            ms = self._one_left(as_map(raw))
            if ms is None:
                return None
            left = ms if left is None else min(left, ms)
        return left

    def _one_left(self, info: dict[str, Any]) -> Optional[int]:
        if as_str(info.get("holder", b"")) != self.holder:
            return None
        return int(info.get("ttl", 0))


class LockCommands(Commands):
    fence: Optional[int] = None

    def _acquire_cmd(self, blocking: bool, timeout: Optional[float]) -> list[Any]:
        return ["LOCK.ACQUIRE", self.key, self.holder, self.ttl_ms, *block_args(blocking, timeout)]

    def _extend_cmds(self) -> list[list[Any]]:
        return [["LOCK.EXTEND", self.key, self.holder, self.ttl_ms]]

    def _release_cmd(self) -> list[Any]:
        return ["LOCK.RELEASE", self.key, self.holder]

    def _released_all(self, reply: Any) -> bool:
        return int(reply) == 0

    def _took(self, reply: Any) -> int:
        self.fence = int(reply)
        return self.fence


def _holder_left(info: dict[str, Any], holder: str) -> Optional[int]:
    """A holder's lease left in a `SEM.INFO`/`RWLOCK.INFO` reply (its
    entry's last field), None when it is not among the holders."""
    raw = info.get("holders") or []
    pairs = raw.items() if isinstance(raw, dict) else zip(raw[::2], raw[1::2])
    for h, entry in pairs:
        if as_str(h) == holder:
            return int(entry[-1])
    return None


class SemaphoreCommands(Commands):
    limit: int
    permits: int
    _info_cmd = "SEM.INFO"

    def _one_left(self, info: dict[str, Any]) -> Optional[int]:
        return _holder_left(info, self.holder)

    def _acquire_cmd(self, blocking: bool, timeout: Optional[float]) -> list[Any]:
        return ["SEM.ACQUIRE", self.key, self.holder, self.limit, self.ttl_ms,
                "PERMITS", self.permits, *block_args(blocking, timeout)]

    def _extend_cmds(self) -> list[list[Any]]:
        return [["SEM.EXTEND", self.key, self.holder, self.ttl_ms, "PERMITS", self.permits]]

    def _release_cmd(self) -> list[Any]:
        return ["SEM.RELEASE", self.key, self.holder, "PERMITS", self.permits]

    def _released_all(self, reply: Any) -> bool:
        return int(reply) == 0

    def _took(self, reply: Any) -> int:
        return int(reply)


class MultiLockCommands(Commands):
    keys: Sequence[str]
    fences: Optional[list[int]] = None

    def _look_cmds(self) -> list[list[Any]]:
        return [["LOCK.INFO", k] for k in self.keys]

    def _acquire_cmd(self, blocking: bool, timeout: Optional[float]) -> list[Any]:
        return ["LOCK.MACQUIRE", len(self.keys), *self.keys, self.holder, self.ttl_ms,
                *block_args(blocking, timeout)]

    def _extend_cmds(self) -> list[list[Any]]:
        return [["LOCK.EXTEND", k, self.holder, self.ttl_ms] for k in self.keys]

    def _release_cmd(self) -> list[Any]:
        return ["LOCK.MRELEASE", len(self.keys), *self.keys, self.holder]

    def _released_all(self, reply: Any) -> bool:
        return all(int(c) == 0 for c in reply)

    def _took(self, reply: Any) -> list[int]:
        self.fences = [int(f) for f in reply]
        return self.fences


class RwCommands(Commands):
    mode: str
    fence: Optional[int] = None
    _info_cmd = "RWLOCK.INFO"

    def _one_left(self, info: dict[str, Any]) -> Optional[int]:
        return _holder_left(info, self.holder)

    def _acquire_cmd(self, blocking: bool, timeout: Optional[float]) -> list[Any]:
        return ["RWLOCK.ACQUIRE", self.key, self.holder, self.mode, self.ttl_ms,
                *block_args(blocking, timeout)]

    def _extend_cmds(self) -> list[list[Any]]:
        return [["RWLOCK.EXTEND", self.key, self.holder, self.ttl_ms]]

    def _release_cmd(self) -> list[Any]:
        return ["RWLOCK.RELEASE", self.key, self.holder, self.mode]

    def _released_all(self, reply: Any) -> bool:
        # Counted per mode here: the reply counts the holder's holds of both.
        return self._depth == 0

    def _took(self, reply: Any) -> int:
        self.fence = int(reply)
        return self.fence
