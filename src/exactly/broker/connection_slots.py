"""Connection slots: how many client connections the broker holds at once, across all its listeners.

The capacity is the smaller of Kafka's `max.connections` (dynamic; default 2147483647) and the share of
the open-file limit that is left for connections: the limit, less the segment files' budget
(`exactly.log.max.open.files`, a quarter of the limit by default; storage/file_handles.py), less a reserve
for the files the broker opens for a moment (indexes, checkpoints, snapshots, the metadata log) and
its own sockets: a tenth of the limit, at least 64. So partitions never take the descriptors that
connections need, and connections never take the ones partitions need: at an open-file limit of 20,000
the broker holds 13,000 connections beside 5,000 open segment files.

When every slot is taken the listeners accept nothing (exactly.broker.listener_server): new clients wait
in the listen backlog and are accepted as connections close, as Kafka's Acceptor waits for a slot. One
WARNING says so when it starts and one INFO line when accepting resumes.

Each listener may have its own limit too (`listener.name.<listener>.max.connections`, dynamic): that
listener alone stops accepting at it, the same way. And each client address may hold at most
`max.connections.per.ip` connections (or its `max.connections.per.ip.overrides` entry; both dynamic): a
connection beyond it is accepted and closed at once, with one INFO line, as Kafka's ConnectionQuotas
rejects it (the client sees its connection closed, the others from that address keep working).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import resource
import socket
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from exactly.quotas.connections import IpConnections, canonical_ip, per_ip_limit

if TYPE_CHECKING:
    from exactly.broker.config import BrokerConfig

log = logging.getLogger(__name__)

UNLIMITED = 2**31 - 1  # Kafka's default max.connections (Int.MaxValue)
MIN_RESERVE = 64


def descriptor_share(segment_budget: int, nofile: int | None = None) -> int:
    """The connections' share of the open-file limit `nofile` (the process's soft limit by default)."""
    if nofile is None:
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        nofile = UNLIMITED if soft == resource.RLIM_INFINITY else soft
    if nofile >= UNLIMITED:
        return UNLIMITED
    reserve = max(MIN_RESERVE, nofile // 10)
    return max(1, nofile - min(segment_budget, nofile) - reserve)


class ConnectionSlots:
    """Counts open connections against `capacity()` and each listener's `listener_capacity(name)` (read
    before every accept, so a dynamic `max.connections` or `listener.name.<l>.max.connections` applies to
    the next accept), and each client address's against `per_ip(address)` (quotas/connections.py). A
    listener waits for a free slot, accepts, asks `admit(address)` (False: close the new connection at
    once) and counts it with `opened(listener)` (listeners accepting at the same moment may each take the
    last broker-wide slot: the capacity is exceeded by at most the number of listeners less one)."""

    def __init__(
        self,
        capacity: Callable[[], int],
        clock: Callable[[], float] = time.monotonic,
        listener_capacity: Callable[[str], int] = lambda listener: UNLIMITED,
        per_ip: Callable[[str], int] = lambda address: UNLIMITED,
    ) -> None:
        self._capacity = capacity
        self._listener_capacity = listener_capacity
        self._clock = clock
        self.open = 0
        self.per_listener: dict[str, int] = {}
        self.per_ip = IpConnections(per_ip)
        self._freed = asyncio.Event()
        self._full_since: dict[str, float] = {}

    @property
    def capacity(self) -> int:
        return self._capacity()

    def _full(self, listener: str) -> str | None:
        """Why `listener` may not accept now (None: it may)."""
        if self.open >= self._capacity():
            return (
                f"{self.open} connections open, the most this broker holds (max.connections and the "
                "open-file limit's share for connections)"
            )
        held = self.per_listener.get(listener, 0)
        if held >= self._listener_capacity(listener):
            return f"{held} connections open on it, its listener.name.{listener.lower()}.max.connections"
        return None

    async def wait_for_slot(self, listener: str) -> None:
        while (why := self._full(listener)) is not None:
            if listener not in self._full_since:
                self._full_since[listener] = self._clock()
                log.warning("listener %s: %s; new connections wait until one closes", listener, why)
            self._freed.clear()
            await self._freed.wait()
        since = self._full_since.pop(listener, None)
        if since is not None:
            log.info("listener %s: accepting connections again after %.1f s", listener, self._clock() - since)

    def admit(self, address: str) -> bool:
        """Count a new connection from `address` against its per-address limit; False: it holds its limit
        already (Kafka's TooManyConnectionsException): the caller closes the connection."""
        return self.per_ip.try_open(address)

    def opened(self, listener: str = "") -> None:
        self.open += 1
        self.per_listener[listener] = self.per_listener.get(listener, 0) + 1

    def release(self, listener: str = "", address: str | None = None) -> None:
        self.open -= 1
        self.per_listener[listener] = self.per_listener.get(listener, 0) - 1
        if address is not None:
            self.per_ip.close(address)
        self._freed.set()


class IpLimits:
    """The per-address limit of the config in force: its `max.connections.per.ip.overrides` entry, else
    `max.connections.per.ip`. Host names in the overrides are resolved to their addresses once per
    overrides value (as Kafka's InetAddress.getByName when the config is applied); a name that does not
    resolve is logged and left out."""

    def __init__(self) -> None:
        self._source: Mapping[str, int] | None = None
        self._resolved: dict[str, int] = {}

    def limit(self, config: BrokerConfig, address: str) -> int:
        overrides = config.max_connections_per_ip_overrides
        if overrides is not self._source:
            self._source, self._resolved = overrides, _resolve(overrides)
        return per_ip_limit(config.max_connections_per_ip, self._resolved)(address)


def _resolve(overrides: Mapping[str, int]) -> dict[str, int]:
    out: dict[str, int] = {}
    for host, count in overrides.items():
        if canonical_ip(host) == host and _is_address(host):
            out[host] = count
            continue
        try:
            infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
        except OSError as e:
            log.warning(
                "max.connections.per.ip.overrides: cannot resolve %s (%s); its override is ignored", host, e
            )
            continue
        for info in infos:
            out[canonical_ip(str(info[4][0]))] = count
    return out


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
