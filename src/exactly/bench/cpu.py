"""CPU accounting of a broker process: what the benchmark report divides by bytes and by commits.

A broker's throughput on a shared, loaded machine moves with the load; the CPU time the broker process
itself spends per unit of work moves much less, so the report prints it beside every throughput: CPU
seconds per GB produced or read, CPU milliseconds per committed transaction.

The source is Linux's `/proc/<pid>/stat` (proc(5)): one line,

    pid (comm) state ppid ... utime stime cutime cstime ...

where `comm` may hold spaces and parentheses (so the fields are counted after the LAST `)`), and
`utime` / `stime` (fields 14 and 15, counted from 1 with pid) are the clock ticks the process (all its
threads) spent in user and kernel mode; `SC_CLK_TCK` ticks make a second (100 on Linux). Children's
ticks (`cutime`, `cstime`) count only once they are reaped, so they are not used: the brokers measured
here (`exactly serve`, Tansu) do their work in one process.

`CpuMeter` reads a process's CPU seconds through an injected reader and clock, so the accounting is
tested without a process; `per_second` turns its samples into a time series of cores used.
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

GB = 1e9


def parse_stat_cpu(text: str, ticks_per_second: int) -> float:
    """utime + stime, in seconds, of one `/proc/<pid>/stat` line."""
    _, sep, rest = text.rpartition(")")
    if not sep:
        raise ValueError(f"not a /proc/<pid>/stat line: {text[:60]!r}")
    fields = rest.split()
    # rest starts at field 3 (state): utime is field 14 -> index 11, stime field 15 -> index 12.
    if len(fields) < 13:
        raise ValueError(f"a /proc/<pid>/stat line with {len(fields) + 2} fields, not >= 15")
    return (int(fields[11]) + int(fields[12])) / ticks_per_second


def read_proc_stat(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text()


def process_cpu_seconds(pid: int) -> float:
    """utime + stime of a live process, in seconds."""
    return parse_stat_cpu(read_proc_stat(pid), os.sysconf("SC_CLK_TCK"))


@dataclass(frozen=True, slots=True)
class CpuSample:
    at: float  # the clock's time (seconds)
    cpu_seconds: float  # the process's utime + stime so far


class CpuMeter:
    """Samples one process's CPU seconds; `read` and `clock` are injected (the real ones by default)."""

    def __init__(
        self,
        pid: int,
        read: Callable[[int], str] = read_proc_stat,
        clock: Callable[[], float] | None = None,
        ticks_per_second: int | None = None,
    ) -> None:
        import time

        self.pid = pid
        self._read = read
        self._clock = clock or time.time
        self._ticks = ticks_per_second or os.sysconf("SC_CLK_TCK")

    def sample(self) -> CpuSample:
        return CpuSample(self._clock(), parse_stat_cpu(self._read(self.pid), self._ticks))


def cpu_between(first: CpuSample, last: CpuSample) -> float:
    """CPU seconds the process used between two samples."""
    return last.cpu_seconds - first.cpu_seconds


def per_gb(cpu_seconds: float, nbytes: float) -> float:
    """CPU seconds per GB (1e9 bytes); NaN when no bytes moved or the CPU is unknown."""
    if nbytes <= 0 or math.isnan(cpu_seconds):
        return math.nan
    return cpu_seconds / (nbytes / GB)


def per_commit_ms(cpu_seconds: float, commits: int) -> float:
    """CPU milliseconds per commit; NaN when nothing committed or the CPU is unknown."""
    if commits <= 0 or math.isnan(cpu_seconds):
        return math.nan
    return cpu_seconds * 1e3 / commits


def per_second(samples: Sequence[CpuSample]) -> list[tuple[float, float]]:
    """(time of the later sample, cores used since the one before) for each consecutive pair."""
    out = []
    for before, after in itertools.pairwise(samples):
        span = after.at - before.at
        if span > 0:
            out.append((after.at, (after.cpu_seconds - before.cpu_seconds) / span))
    return out


def window_cpu(samples: Sequence[CpuSample], start: float, end: float, slack: float = 0.5) -> float:
    """CPU seconds used in [start, end], between the samples nearest to each end (NaN when no sample is
    within `slack` seconds of an end)."""
    if not samples:
        return math.nan
    first = min(samples, key=lambda s: abs(s.at - start))
    last = min(samples, key=lambda s: abs(s.at - end))
    if abs(first.at - start) > slack or abs(last.at - end) > slack or last.at <= first.at:
        return math.nan
    return cpu_between(first, last)
