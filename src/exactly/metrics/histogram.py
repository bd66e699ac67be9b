"""A latency histogram with fixed bucket bounds, cheap enough for the request path.

Prometheus' histogram is cumulative (`le` buckets each count every observation at or below their
bound); here each bucket counts only its own range, so an observation is one `bisect` and two
additions, and `cumulative()` sums them when a scrape reads the histogram. Observations are in the
histogram's own unit (milliseconds for Kafka's *TimeMs request histograms, seconds for exactly's own).

Not locked: on the event loop nothing runs concurrently with an observation. A histogram observed from
threads (fsync, by the flusher's threads) is given a lock (`locked=True`).
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Sequence

__all__ = ["MS_BUCKETS", "SECONDS_BUCKETS", "Histogram"]

# Kafka request times, in ms: sub-millisecond to the longest long-poll (Fetch max.wait, JoinGroup)
MS_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10_000, 30_000)
# fsync and event-loop lag, in seconds
SECONDS_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)


class Histogram:
    __slots__ = ("_lock", "bounds", "count", "counts", "sum")

    def __init__(self, bounds: Sequence[float] = MS_BUCKETS, *, locked: bool = False) -> None:
        if list(bounds) != sorted(bounds) or len(set(bounds)) != len(bounds):
            raise ValueError("bucket bounds must be strictly increasing")
        self.bounds = tuple(bounds)
        self.counts = [0] * (len(self.bounds) + 1)  # the last: above every bound (+Inf)
        self.count = 0
        self.sum = 0.0
        self._lock = threading.Lock() if locked else None

    def observe(self, value: float) -> None:
        i = bisect.bisect_left(self.bounds, value)
        if self._lock is None:
            self.counts[i] += 1
            self.count += 1
            self.sum += value
            return
        with self._lock:
            self.counts[i] += 1
            self.count += 1
            self.sum += value

    def cumulative(self) -> list[tuple[float, int]]:
        """Prometheus buckets: (upper bound, observations at or below it), +Inf last."""
        counts = list(self.counts)  # one copy: a thread observing meanwhile changes the next scrape only
        out: list[tuple[float, int]] = []
        running = 0
        for bound, n in zip((*self.bounds, float("inf")), counts, strict=True):
            running += n
            out.append((bound, running))
        return out
