"""Python clients for padlock, the Redis module of native distributed locks.

Blocking: `from padlock import Lock, Semaphore, MultiLock, ReadWriteLock`.
asyncio: `from padlock.aio import Lock, ...` (same names, awaitable).
"""

from ._common import (
    DeadlockError,
    Edge,
    Hot,
    LockLostError,
    NotAcquiredError,
    NotHeldError,
    PadlockError,
    Replicas,
    new_holder,
    to_dot,
)
from ._holders import current_holder, holder_scope
from .sync import Lock, MultiLock, ReadWriteLock, RwHold, Semaphore, glide, graph, top

__all__ = [
    "DeadlockError",
    "Edge",
    "Hot",
    "Lock",
    "LockLostError",
    "MultiLock",
    "NotAcquiredError",
    "NotHeldError",
    "PadlockError",
    "ReadWriteLock",
    "Replicas",
    "RwHold",
    "Semaphore",
    "current_holder",
    "glide",
    "graph",
    "holder_scope",
    "new_holder",
    "to_dot",
    "top",
]
