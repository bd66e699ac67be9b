"""The broker's CPU accounting: utime+stime parsed from /proc/<pid>/stat, per GB, per commit, per second."""

from __future__ import annotations

import math
import os
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from exactly.bench.cpu import (
    CpuMeter,
    CpuSample,
    parse_stat_cpu,
    per_commit_ms,
    per_gb,
    per_second,
    process_cpu_seconds,
    window_cpu,
)


def stat_line(pid: int, comm: str, utime: int, stime: int) -> str:
    # pid (comm) state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt utime stime ...
    rest = ["S", "1", "1", "1", "0", "-1", "4194560", "100", "0", "0", "0", str(utime), str(stime)]
    return f"{pid} ({comm}) " + " ".join([*rest, "7", "8", "20", "0", "3", "0", "12345"]) + "\n"


def test_utime_plus_stime_in_seconds() -> None:
    assert parse_stat_cpu(stat_line(42, "python", 250, 50), 100) == 3.0


def test_a_command_name_with_spaces_and_parentheses() -> None:
    line = stat_line(7, "exactly (serve) 1 2 3", 1000, 1)
    assert parse_stat_cpu(line, 100) == pytest.approx(10.01)


@given(
    st.integers(1, 4_000_000),
    st.text(alphabet=" ()abcXYZ019-_:/.", max_size=15),  # comm: spaces and parentheses included
    st.integers(0, 2**40),
    st.integers(0, 2**40),
    st.sampled_from([100, 250, 1000]),
)
def test_any_stat_line(pid: int, comm: str, utime: int, stime: int, ticks: int) -> None:
    assert parse_stat_cpu(stat_line(pid, comm, utime, stime), ticks) == (utime + stime) / ticks


def test_not_a_stat_line() -> None:
    with pytest.raises(ValueError, match="stat"):
        parse_stat_cpu("no parenthesis here", 100)
    with pytest.raises(ValueError, match="fields"):
        parse_stat_cpu("1 (x) S 1 2", 100)


def test_this_process_cpu_grows_while_it_works() -> None:
    before = process_cpu_seconds(os.getpid())
    deadline = time.monotonic() + 30
    while process_cpu_seconds(os.getpid()) < before + 0.05:  # spin until the kernel has counted it
        assert time.monotonic() < deadline
        sum(range(10_000))
    assert process_cpu_seconds(os.getpid()) >= before + 0.05


def test_meter_reads_through_the_injected_reader_and_clock() -> None:
    ticks = iter([100, 350])
    now = iter([1000.0, 1002.0])
    meter = CpuMeter(9, read=lambda pid: stat_line(pid, "b", next(ticks), 0), clock=lambda: next(now),
                     ticks_per_second=100)  # fmt: skip
    first, second = meter.sample(), meter.sample()
    assert (first, second) == (CpuSample(1000.0, 1.0), CpuSample(1002.0, 3.5))
    assert per_second([first, second]) == [(1002.0, 1.25)]


def test_per_gb_and_per_commit() -> None:
    assert per_gb(2.5, 5e9) == 0.5
    assert per_commit_ms(0.3, 1000) == pytest.approx(0.3)
    assert math.isnan(per_gb(1.0, 0))
    assert math.isnan(per_gb(math.nan, 1e9))
    assert math.isnan(per_commit_ms(1.0, 0))


def test_window_cpu_uses_the_samples_nearest_each_end() -> None:
    samples = [CpuSample(100.0 + i + 0.01, float(i * i)) for i in range(20)]
    # [103, 113): the samples at 103.01 (9 s) and 113.01 (169 s)
    assert window_cpu(samples, 103, 113) == 160.0
    assert math.isnan(window_cpu(samples, 90, 113))  # no sample near the start
    assert math.isnan(window_cpu([], 0, 1))
