"""Rates as Kafka's metrics measure them: `SampledRate` and `TokenBucket`.

`SampledRate` is a windowed rate, as Kafka's metrics `Rate` over a `SampledStat` of sums (`WindowedSum`).

`samples` windows of `window_ms` each; a value goes into the current window, which is replaced by a new
one once it is `window_ms` old (the oldest window is reused). Windows older than `samples * window_ms`
are reset before measuring. The rate is the sum of the windows divided by the elapsed time since the
oldest window began, counted as at least `samples - 1` full windows (so a fresh sensor does not report
a huge rate after its first value).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class _Sample:
    start_ms: int
    value: float = 0.0


class SampledRate:
    def __init__(self, samples: int, window_ms: int) -> None:
        self.samples = samples
        self.window_ms = window_ms
        self._windows: list[_Sample] = []
        self._current = 0

    def record(self, value: float, now_ms: int) -> None:
        if not self._windows:
            self._windows.append(_Sample(now_ms))
        sample = self._windows[self._current]
        if now_ms - sample.start_ms >= self.window_ms:
            self._current = (self._current + 1) % self.samples
            if self._current >= len(self._windows):
                self._windows.append(_Sample(now_ms))
            else:
                self._windows[self._current] = _Sample(now_ms)
            sample = self._windows[self._current]
        sample.value += value

    def _purge(self, now_ms: int) -> None:
        expire = self.samples * self.window_ms
        for i, sample in enumerate(self._windows):
            if now_ms - sample.start_ms >= expire:
                self._windows[i] = _Sample(now_ms)

    def window_size_ms(self, now_ms: int) -> int:
        """Kafka's Rate.windowSize: the elapsed time the rate is measured over."""
        self._purge(now_ms)
        oldest = min((s.start_ms for s in self._windows), default=now_ms)
        elapsed = now_ms - oldest
        full_windows = elapsed // self.window_ms
        if full_windows < self.samples - 1:
            elapsed += (self.samples - 1 - full_windows) * self.window_ms
        return elapsed

    def total(self, now_ms: int) -> float:
        self._purge(now_ms)
        return sum(s.value for s in self._windows)

    def measure(self, now_ms: int) -> float:
        """Units per second."""
        window = self.window_size_ms(now_ms)
        return self.total(now_ms) / (window / 1000) if window > 0 else 0.0


class TokenBucket:
    """Kafka's metrics `TokenBucket` (KIP-599's controller mutation quota): tokens refill at `rate` per
    second up to a burst of `rate * (samples - 1) * window`; a recorded value takes tokens, and may take
    them below zero. A new bucket is full. The rate is passed in at each call (a quota may change)."""

    def __init__(self, samples: int, window_ms: int) -> None:
        self.samples = samples
        self.window_ms = window_ms
        self._tokens: float | None = None
        self._last_ms = 0

    def _refill(self, rate: float, now_ms: int) -> float:
        burst = rate * (self.samples - 1) * self.window_ms / 1000
        if self._tokens is None:
            self._tokens = burst
        elif now_ms > self._last_ms:
            self._tokens = min(burst, self._tokens + rate * (now_ms - self._last_ms) / 1000)
        else:
            self._tokens = min(burst, self._tokens)
        self._last_ms = max(self._last_ms, now_ms)
        return burst

    def tokens(self, rate: float, now_ms: int) -> float:
        self._refill(rate, now_ms)
        assert self._tokens is not None
        return self._tokens

    def record(self, value: float, rate: float, now_ms: int) -> None:
        burst = self._refill(rate, now_ms)
        assert self._tokens is not None
        self._tokens = min(burst, self._tokens - value)
