"""valkey-glide (the `valkey-glide` package, the client Valkey recommends) as
the driver of the asyncio classes: `padlock.aio.glide(GlideClient, config)`
(or `GlideClusterClient`) stands where a `redis.asyncio` client would.

padlock makes the glide clients it needs from your configuration, each
shaped as the redis-py connection the asyncio classes drive (`send_command`,
`read_response`, `disconnect`): one shared per event loop, and one per wait
while it waits. They speak RESP2 and take glide's longest request timeout
(glide's own, 250 ms by default, would abandon server-side waits): padlock
times every call itself. In a cluster a command goes to the primary of its
(first) key's slot. (Glide's asyncio `close()` closes the socket at once,
which drops a server-side wait; its Node client does not, see the
TypeScript client's `glide.ts`.)"""

from __future__ import annotations

import copy
from typing import Any, Optional, Sequence

import redis

#: glide's longest request timeout (ms, a signed 32-bit int).
LONGEST_MS = 2**31 - 1


def _route_key(args: Sequence[Any]) -> Optional[Any]:
    """The key a command routes by: after `numkeys` for the multi-key
    commands, the first argument otherwise."""
    name = str(args[0]).upper() if args else ""
    at = 2 if name in ("LOCK.MACQUIRE", "LOCK.MRELEASE") else 1
    return args[at] if len(args) > at else None


def _arg(a: Any) -> Any:
    return a if isinstance(a, (bytes, str)) else str(a)


class Glide:
    """A glide client class and its configuration, for padlock's asyncio
    classes and `graph`/`top`."""

    def __init__(self, factory: Any, config: Any) -> None:
        import glide

        self.factory = factory
        self.cluster = factory.__name__ == "GlideClusterClient"
        self._glide = glide
        cfg = copy.copy(config)
        cfg.protocol = glide.ProtocolVersion.RESP2
        cfg.request_timeout = LONGEST_MS
        self.config = cfg

    async def create(self) -> Any:
        return await self.factory.create(self.config)

    def route(self, key: Optional[Any]) -> Any:
        if not self.cluster or key is None:
            return None
        g = self._glide
        return g.SlotKeyRoute(g.SlotType.PRIMARY, key if isinstance(key, str) else bytes(key).decode())

    async def run(self, client: Any, args: Sequence[Any]) -> Any:
        """One command on `client` (in a cluster, on the primary of its
        key), glide's errors as redis-py's."""
        g = self._glide
        cmd = [_arg(a) for a in args]
        try:
            if self.cluster:
                return await client.custom_command(cmd, self.route(_route_key(args)))
            return await client.custom_command(cmd)
        except g.TimeoutError as e:
            raise redis.TimeoutError(str(e)) from None
        except (g.ConnectionError, g.ClosingError) as e:
            raise redis.ConnectionError(str(e)) from None
        except g.RequestError as e:
            raise redis.ResponseError(str(e)) from None

    def connection(self) -> "GlideConnection":
        return GlideConnection(self)

    async def execute_command(self, *args: Any) -> Any:
        """A one-off command (`info`, `graph`, ...) on a client of its own."""
        conn = self.connection()
        try:
            await conn.send_command(*args)
            return await conn.read_response()
        finally:
            await conn.disconnect()

    async def exists(self, *keys: Any) -> int:
        return sum([int(await self.execute_command("EXISTS", k)) for k in keys])


class GlideConnection:
    """One glide client, driven as a redis-py connection."""

    def __init__(self, owner: Glide) -> None:
        self._owner = owner
        self._client: Any = None
        self._args: Sequence[Any] = ()

    async def send_command(self, *args: Any) -> None:
        if self._client is None:
            self._client = await self._owner.create()
        self._args = args

    async def read_response(self) -> Any:
        return await self._owner.run(self._client, self._args)

    async def disconnect(self) -> None:
        client, self._client = self._client, None
        if client is None:
            return
        try:
            await client.close()
        except Exception:  # noqa: BLE001 - closing an already failed client
            pass
