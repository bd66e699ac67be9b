"""Injected time (ARCHITECTURE invariant 6: no state machine reads the wall clock itself).

Everything that needs "now" takes a `Clock`. The broker passes `SystemClock`; tests pass `ManualClock` and
advance it explicitly.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def milliseconds(self) -> int:
        """Wall-clock time in milliseconds since the epoch (for timestamps stored on disk)."""
        ...

    def monotonic_ms(self) -> int:
        """A monotonic millisecond counter (for timeouts and deadlines)."""
        ...


class SystemClock:
    def milliseconds(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000


class ManualClock:
    """A clock that moves only when told to."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now = start_ms

    def milliseconds(self) -> int:
        return self._now

    def monotonic_ms(self) -> int:
        return self._now

    def advance(self, ms: int) -> None:
        if ms < 0:
            raise ValueError("a clock does not go backwards")
        self._now += ms
