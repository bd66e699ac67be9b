"""A timed round's timeline: per-second bytes of every client summed; warm-up and tail not measured."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from exactly.bench.timeline import Timeline


def test_clients_summed_and_only_measured_seconds_counted() -> None:
    start = 1_000
    a = {999: 5, 1000: 1_000_000, 1001: 2_000_000, 1002: 3_000_000, 1003: 4_000_000, 1004: 7}
    b = {1001: 1_000_000, 1003: 1_000_000, 1005: 9}
    t = Timeline.of(start, 1, 3, [a, b])
    assert (t.measured_from, t.measured_to) == (1001, 1004)
    assert t.measured_bytes == 3_000_000 + 3_000_000 + 5_000_000
    assert t.mb_s == 11 / 3
    assert t.per_second() == [(0, 1.0), (1, 3.0), (2, 3.0), (3, 5.0)]
    assert t.measured_mb_s() == [3.0, 3.0, 5.0]


def test_idle_seconds_are_zero_not_missing() -> None:
    t = Timeline.of(50, 2, 4, [{53: 1_000_000}])
    assert t.per_second() == [(0, 0.0), (1, 0.0), (2, 0.0), (3, 1.0), (4, 0.0), (5, 0.0)]
    assert t.mb_s == 0.25


def test_no_measured_seconds() -> None:
    assert math.isnan(Timeline.of(0, 1, 0, []).mb_s)


@given(
    st.integers(0, 10),
    st.integers(1, 30),
    st.lists(st.dictionaries(st.integers(-5, 50), st.integers(0, 10**9), max_size=40), max_size=4),
)
def test_the_rate_is_the_mean_of_the_measured_seconds(
    warmup: int, seconds: int, clients: list[dict[int, int]]
) -> None:
    t = Timeline.of(0, warmup, seconds, clients)
    assert len(t.per_second()) == warmup + seconds
    assert math.isclose(sum(t.measured_mb_s()) / seconds, t.mb_s, rel_tol=1e-12, abs_tol=1e-12)
    everything = sum(b for c in clients for b in c.values())
    assert t.measured_bytes <= everything
    assert sum(b for _, b in t.counts) == everything


def test_a_rounds_broker_cores_line_up_with_its_seconds() -> None:
    from exactly.bench.cpu import CpuSample
    from exactly.bench.rounds import TimedRound

    timeline = Timeline.of(100, 1, 2, [{100: 10**9, 101: 2 * 10**9, 102: 2 * 10**9}])
    # sampled just after each epoch second; the broker uses 0.5 core, then 1 core once measured
    cpu = [CpuSample(100.01, 0.0), CpuSample(101.01, 0.5), CpuSample(102.01, 1.5), CpuSample(103.01, 2.5),
           CpuSample(104.01, 2.6)]  # fmt: skip
    done = TimedRound(timeline, tuple(cpu), (), 5_000_000)
    assert done.cores_per_second() == [(0, 0.5), (1, 1.0), (2, 1.0)]  # the tail after the round dropped
    assert done.broker_cpu_s == 2.0
    assert done.cpu_s_per_gb == 0.5
    assert done.mb_s == 2000.0
