"""Live rates for the console: per-second rates of counters that only grow (records appended, bytes in and
out), from the samples the console takes when a page is asked for.

`Rates.observe(now_ms, counters)` keeps, per key, the samples of the last `window_ms` (at least two apart
by `min_gap_ms`, so that polling pages many times a second does not shrink the window to noise); the
rate of a key is (newest - oldest) / elapsed over what is kept. A counter that went down (a partition
truncated and refilled, a deleted topic made again) restarts its samples. A key not observed for a
window is forgotten. Time is passed in: nothing here reads a clock.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Mapping

__all__ = ["Rates"]


class Rates:
    def __init__(self, window_ms: int = 10_000, min_gap_ms: int = 500) -> None:
        self.window_ms = window_ms
        self.min_gap_ms = min_gap_ms
        self._samples: dict[Hashable, deque[tuple[int, float]]] = {}

    def observe(self, now_ms: int, counters: Mapping[Hashable, float]) -> None:
        for key, value in counters.items():
            samples = self._samples.get(key)
            if samples is None:
                self._samples[key] = deque([(now_ms, value)])
                continue
            if value < samples[-1][1]:
                samples.clear()
            if samples and now_ms - samples[-1][0] < self.min_gap_ms:
                samples[-1] = (samples[-1][0], value)  # the newest value, at the slot's time
            else:
                samples.append((now_ms, value))
            while len(samples) > 2 and now_ms - samples[1][0] >= self.window_ms:
                samples.popleft()
        for key in [k for k, s in self._samples.items() if now_ms - s[-1][0] > self.window_ms]:
            del self._samples[key]

    def rate(self, key: Hashable) -> float:
        """Per second over the kept samples; 0 with fewer than two."""
        samples = self._samples.get(key)
        if samples is None or len(samples) < 2:
            return 0.0
        (t0, v0), (t1, v1) = samples[0], samples[-1]
        return (v1 - v0) * 1000 / (t1 - t0) if t1 > t0 else 0.0
