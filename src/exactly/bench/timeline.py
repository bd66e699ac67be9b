"""A throughput round as a time series: bytes moved in each wall-clock second, warm-up then measured.

The report's produce and consume rounds run for a fixed time, not a fixed record count: every client
process starts at the same epoch second `start`, the first `warmup` seconds are not measured
(connections, producer ids, the broker's first allocations, the page cache), the next `seconds` are.
Each client counts the bytes it had acknowledged (produce: delivery reports) or received (consume) per
epoch second `int(time.time())`; the round's `Timeline` is the sum over its clients:

    second since start:  0 .. warmup-1 | warmup .. warmup+seconds-1 | later (the flush after the end)
                         not measured   | measured                   | not measured

so a round's MB/s is the measured seconds' bytes over `seconds`, and its per-second series is a time
series with `warmup + seconds` points (the CSV keeps them all; the plot shades the warm-up).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

MB = 1e6


@dataclass(frozen=True, slots=True)
class Timeline:
    start: int  # epoch second the round's clients started
    warmup: int  # seconds not measured
    seconds: int  # seconds measured, after the warm-up
    counts: tuple[tuple[int, int], ...]  # (epoch second, bytes in it), sorted, from every client

    @staticmethod
    def of(start: int, warmup: int, seconds: int, per_client: Iterable[Mapping[int, int]]) -> Timeline:
        """Sum the clients' per-second byte counts into one timeline."""
        total: Counter[int] = Counter()
        for counts in per_client:
            total.update(counts)
        return Timeline(start, warmup, seconds, tuple(sorted(total.items())))

    @property
    def measured_from(self) -> int:
        return self.start + self.warmup

    @property
    def measured_to(self) -> int:
        """The first epoch second after the measured ones."""
        return self.start + self.warmup + self.seconds

    @property
    def measured_bytes(self) -> int:
        return sum(b for t, b in self.counts if self.measured_from <= t < self.measured_to)

    @property
    def mb_s(self) -> float:
        return self.measured_bytes / self.seconds / MB if self.seconds > 0 else math.nan

    def per_second(self) -> list[tuple[int, float]]:
        """(second since start, MB/s) for every second of warm-up and measurement (0 when idle)."""
        by_second = dict(self.counts)
        return [(i, by_second.get(self.start + i, 0) / MB) for i in range(self.warmup + self.seconds)]

    def measured_mb_s(self) -> list[float]:
        """The MB/s of each measured second."""
        return [v for i, v in self.per_second() if i >= self.warmup]
