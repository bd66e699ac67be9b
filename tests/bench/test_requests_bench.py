"""The pure parts of `exactly bench requests`: one measurement from injected CPU and wall clocks, and the
medians and spreads over rounds."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from exactly.bench.requests import Kind, Measurement, measure, summarize


def test_a_measurement_counts_only_the_timed_requests() -> None:
    calls: list[str] = []
    cpu = iter([(1.0, 0.5), (1.3, 0.6)])  # (user, system) before and after the timed requests
    clock = iter([10.0, 12.0])

    def request() -> None:
        calls.append("r")

    m = measure(Kind.METADATA, "exactly", request, 1000, 50, lambda: next(cpu), lambda: next(clock))
    assert len(calls) == 1050  # warm-up included, but outside the CPU readings
    assert m.requests == 1000
    assert m.us_per_request == pytest.approx(400.0)  # 0.4 s of CPU over 1000 requests
    assert m.user_us == pytest.approx(300.0)
    assert m.system_us == pytest.approx(100.0)
    assert m.per_second == pytest.approx(500.0)


def test_the_summary_is_the_median_and_spread_per_client_and_kind() -> None:
    rounds = [
        Measurement(Kind.API_VERSIONS, "exactly", 100, 1.0, user, 0.001) for user in (0.010, 0.004, 0.006)
    ] + [Measurement(Kind.PRODUCE, "confluent", 100, 2.0, 0.02, 0.0)]
    by = {(s.client, s.kind): s for s in summarize(rounds)}
    versions = by[("exactly", Kind.API_VERSIONS)]
    assert versions.rounds == 3
    assert versions.us == pytest.approx(70.0)
    assert versions.us_spread == pytest.approx((50.0, 110.0))
    assert versions.user_us == pytest.approx(60.0)
    assert versions.per_second == pytest.approx(100.0)
    assert by[("confluent", Kind.PRODUCE)].us == pytest.approx(200.0)
    assert [s.kind for s in summarize(rounds)] == [Kind.API_VERSIONS, Kind.PRODUCE]  # first-seen order
    assert "us/request" in str(versions)


@given(st.lists(st.floats(min_value=0.0, max_value=10.0), min_size=1, max_size=9))
def test_the_median_lies_within_the_spread(users: list[float]) -> None:
    ms = [Measurement(Kind.OFFSET_COMMIT, "exactly", 1000, 1.0, u, 0.0) for u in users]
    (summary,) = summarize(ms)
    lo, hi = summary.us_spread
    assert lo <= summary.us <= hi
    assert lo == pytest.approx(min(users) * 1000)
    assert hi == pytest.approx(max(users) * 1000)


def test_no_requests_is_not_a_division_by_zero() -> None:
    m = Measurement(Kind.METADATA, "exactly", 0, 0.0, 0.0, 0.0)
    assert all(x != x for x in (m.us_per_request, m.per_second))  # NaN
    assert list(itertools.islice(summarize([]), 1)) == []
