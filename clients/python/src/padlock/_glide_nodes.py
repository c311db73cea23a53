"""A glide cluster, node by node. In a cluster padlock keeps, per primary
node, a standalone glide client of its own (the keeper: its commands and
`KEEP` bindings, told apart by `CLIENT ID` like any glide connection) and
one redis-py connection that hears of the process's mailboxes on that node
through client tracking (`_slots`): glide never hands a tracking
invalidation to the application (RESP3 pushes are dropped, and its pub/sub
needs RESP3), and redis-py, which padlock depends on anyway, does.

The tracking connection is made from the glide configuration: address,
username and password, client name, TLS (with glide's root certificates or
its insecure mode, and client certificates given as files). A configuration
it cannot be made from (IAM authentication, client certificates given as
bytes) leaves the cluster as before: a wait on a glide connection of its
own while it waits, holds watched by reads."""

from __future__ import annotations

import copy
from typing import Any, Optional

import redis
import redis.asyncio

def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


class SlotMap:
    """Which primary (host, port) serves each slot, from `CLUSTER SLOTS`:
    fetched at the first lookup, and again after a node answered `MOVED`
    (as redis-py's cluster client refreshes its own)."""

    def __init__(self) -> None:
        self.ranges: list[tuple[int, int, str, int]] = []
        self.fresh = False

    def stale(self) -> bool:
        return not self.fresh

    def load(self, reply: Any, seed_host: str) -> None:
        """`CLUSTER SLOTS`' reply; a primary that does not know its own
        address (an empty host) is at the host padlock first reached."""
        ranges = []
        for row in reply or []:
            start, end, primary = int(row[0]), int(row[1]), row[2]
            host = _text(primary[0]) or seed_host
            if host == "?":
                host = seed_host
            ranges.append((start, end, host, int(primary[1])))
        self.ranges = sorted(ranges)
        self.fresh = True

    def find(self, slot: int) -> Optional[tuple[str, int]]:
        for start, end, host, port in self.ranges:
            if start <= slot <= end:
                return host, port
        return None

    def forget(self) -> None:
        self.fresh = False


def node_config(cluster_cfg: Any, host: str, port: int, g: Any) -> Any:
    """A standalone client's configuration for one node of the cluster
    `cluster_cfg` describes: its credentials, TLS, name, timeouts."""
    adv = getattr(cluster_cfg, "advanced_config", None)
    node_adv = None
    if adv is not None:
        node_adv = g.AdvancedGlideClientConfiguration(
            connection_timeout=adv.connection_timeout, tls_config=adv.tls_config)
    resolve = getattr(cluster_cfg, "address_resolver", None)
    if resolve is not None:
        host, port = resolve(host, port)
    return g.GlideClientConfiguration(
        [g.NodeAddress(host, port)],
        use_tls=cluster_cfg.use_tls,
        credentials=cluster_cfg.credentials,
        request_timeout=cluster_cfg.request_timeout,
        reconnect_strategy=cluster_cfg.reconnect_strategy,
        client_name=cluster_cfg.client_name,
        protocol=cluster_cfg.protocol,
        advanced_config=node_adv,
    )


def tracking_kwargs(cfg: Any) -> Optional[dict[str, Any]]:
    """redis-py connection settings (but the address) matching a glide
    configuration, or None when they cannot match it."""
    kw: dict[str, Any] = {}
    cred = getattr(cfg, "credentials", None)
    if cred is not None:
        if getattr(cred, "iam_config", None) is not None:
            return None
        kw["username"], kw["password"] = cred.username, cred.password
    if getattr(cfg, "client_name", None):
        kw["client_name"] = cfg.client_name
    if cfg.use_tls:
        kw["ssl"] = True
        tls = getattr(getattr(cfg, "advanced_config", None), "tls_config", None)
        if tls is not None:
            if tls.client_cert_pem is not None or tls.client_key_pem is not None:
                return None
            if tls.use_insecure_tls:
                kw["ssl_cert_reqs"], kw["ssl_check_hostname"] = "none", False
            if tls.root_pem_cacerts is not None:
                kw["ssl_ca_data"] = _text(tls.root_pem_cacerts)
            if tls.client_cert_path is not None:
                kw["ssl_certfile"] = str(tls.client_cert_path)
            if tls.client_key_path is not None:
                kw["ssl_keyfile"] = str(tls.client_key_path)
    return kw


class TrackingPool:
    """What the blocking mailman reads of a pool: the tracking connection's
    class and settings for one node."""

    def __init__(self, host: str, port: int, kw: dict[str, Any]) -> None:
        kw = copy.copy(kw)
        ssl = kw.pop("ssl", False)
        self.connection_class: Any = redis.SSLConnection if ssl else redis.Connection
        self.connection_kwargs = {"host": host, "port": port, **kw}


def async_tracking(host: str, port: int, kw: dict[str, Any]) -> Any:
    """An asyncio tracking connection's maker for one node."""
    kw = copy.copy(kw)
    ssl = kw.pop("ssl", False)
    cls: Any = redis.asyncio.SSLConnection if ssl else redis.asyncio.Connection

    async def make(**override: Any) -> Any:
        return cls(**{"host": host, "port": port, **kw, **override})

    return make
