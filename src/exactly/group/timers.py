"""Named deadlines as data (Kafka's `CoordinatorTimer`, without threads).

`schedule(key, deadline)` sets or moves the deadline of `key`; `cancel(key)` drops it; `pop_due(now)`
pops the earliest key whose deadline is <= now (`due(now)`: all of them, earliest first). Nothing runs
by itself: the coordinator's `tick` asks for the due keys and acts on them, and the broker's shell
sleeps until `next_deadline()`. A heap with lazy deletion keeps every operation O(log n).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Hashable
from typing import Generic, TypeVar

__all__ = ["Timers"]

K = TypeVar("K", bound=Hashable)


class Timers(Generic[K]):
    """Deadlines keyed by `K` (the coordinator's keys are the typed values of `deadlines.py`)."""

    def __init__(self) -> None:
        self._deadlines: dict[K, tuple[int, int]] = {}  # key -> (deadline, sequence)
        self._heap: list[tuple[int, int, K]] = []
        self._seq = itertools.count()

    def __len__(self) -> int:
        return len(self._deadlines)

    def __contains__(self, key: K) -> bool:
        return key in self._deadlines

    def keys(self) -> list[K]:
        """Every scheduled key (no order)."""
        return list(self._deadlines)

    def deadline(self, key: K) -> int | None:
        entry = self._deadlines.get(key)
        return None if entry is None else entry[0]

    def schedule(self, key: K, deadline: int) -> None:
        entry = (deadline, next(self._seq))
        self._deadlines[key] = entry
        heapq.heappush(self._heap, (entry[0], entry[1], key))
        if len(self._heap) > 64 and len(self._heap) > 4 * len(self._deadlines):
            self._compact()

    def cancel(self, key: K) -> None:
        self._deadlines.pop(key, None)

    def next_deadline(self) -> int | None:
        heap = self._heap
        while heap:
            deadline, seq, key = heap[0]
            if self._deadlines.get(key) == (deadline, seq):
                return deadline
            heapq.heappop(heap)
        return None

    def due(self, now: int) -> list[K]:
        out: list[K] = []
        heap = self._heap
        while heap and heap[0][0] <= now:
            deadline, seq, key = heapq.heappop(heap)
            if self._deadlines.get(key) == (deadline, seq):
                del self._deadlines[key]
                out.append(key)
        return out

    def pop_due(self, now: int) -> K | None:
        """The earliest key whose deadline is <= now (removed), or None."""
        heap = self._heap
        while heap and heap[0][0] <= now:
            deadline, seq, key = heapq.heappop(heap)
            if self._deadlines.get(key) == (deadline, seq):
                del self._deadlines[key]
                return key
        return None

    def _compact(self) -> None:
        self._heap = [(d, s, k) for k, (d, s) in self._deadlines.items()]
        heapq.heapify(self._heap)
