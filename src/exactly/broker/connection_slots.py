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
"""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from collections.abc import Callable

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
    """Counts open connections against `capacity()` (read before every accept, so a dynamic
    `max.connections` applies to the next accept). A listener waits for a free slot, accepts, and counts
    the new connection with `opened()` (listeners accepting at the same moment may each take the last
    slot: the capacity is exceeded by at most the number of listeners less one)."""

    def __init__(self, capacity: Callable[[], int], clock: Callable[[], float] = time.monotonic) -> None:
        self._capacity = capacity
        self._clock = clock
        self.open = 0
        self._freed = asyncio.Event()
        self._full_since: float | None = None

    @property
    def capacity(self) -> int:
        return self._capacity()

    async def wait_for_slot(self, listener: str) -> None:
        while self.open >= self._capacity():
            if self._full_since is None:
                self._full_since = self._clock()
                log.warning(
                    "listener %s: %d connections open, the most this broker holds (max.connections and the "
                    "open-file limit's share for connections); new connections wait until one closes",
                    listener,
                    self.open,
                )
            self._freed.clear()
            await self._freed.wait()
        if self._full_since is not None:
            log.info(
                "listener %s: accepting connections again after %.1f s",
                listener,
                self._clock() - self._full_since,
            )
            self._full_since = None

    def opened(self) -> None:
        self.open += 1

    def release(self) -> None:
        self.open -= 1
        self._freed.set()
