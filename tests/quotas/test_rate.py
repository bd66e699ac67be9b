"""Kafka's sampled Rate (windows, minimum measuring window, expiry) and TokenBucket."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from exactly.quotas.rate import SampledRate, TokenBucket


def test_a_fresh_rate_is_measured_over_samples_minus_one_windows() -> None:
    rate = SampledRate(samples=11, window_ms=1000)
    rate.record(10_000, 0)
    assert rate.window_size_ms(0) == 10_000
    assert rate.measure(0) == pytest.approx(1000.0)
    assert rate.measure(500) == pytest.approx(10_000 / 10.5)


def test_windows_roll_and_old_ones_expire() -> None:
    rate = SampledRate(samples=2, window_ms=1000)
    rate.record(1000, 0)
    rate.record(1000, 1500)  # a second window starts at 1500
    assert rate.total(1500) == 2000
    assert rate.window_size_ms(1500) == 1500
    rate.record(500, 3000)  # replaces the window from 0
    assert rate.total(3000) == 1500
    assert rate.window_size_ms(3000) == 1500
    # Long after, every window is reset: nothing left, measured over the minimum window.
    assert rate.total(10_000) == 0
    assert rate.measure(10_000) == 0.0
    assert rate.window_size_ms(10_000) == 1000


def test_token_bucket_starts_full_refills_at_the_rate_and_goes_below_zero() -> None:
    bucket = TokenBucket(samples=11, window_ms=1000)
    assert bucket.tokens(2.0, 0) == pytest.approx(20.0)  # burst: 2/s over 10 windows of 1 s
    bucket.record(25, 2.0, 0)
    assert bucket.tokens(2.0, 0) == pytest.approx(-5.0)
    assert bucket.tokens(2.0, 1_500) == pytest.approx(-2.0)  # 1.5 s at 2/s
    assert bucket.tokens(2.0, 100_000) == pytest.approx(20.0)  # never above the burst
    assert bucket.tokens(1.0, 100_000) == pytest.approx(10.0)  # a lower quota: a lower burst
    bucket.record(-100, 1.0, 100_000)  # nor above it by a negative value
    assert bucket.tokens(1.0, 100_000) == pytest.approx(10.0)


@given(st.lists(st.tuples(st.integers(0, 5_000), st.integers(0, 50)), max_size=30))
def test_token_bucket_is_the_burst_less_what_was_taken_plus_the_refill(steps: list[tuple[int, int]]) -> None:
    bucket = TokenBucket(samples=3, window_ms=1000)
    rate, now, model = 4.0, 0, 8.0
    for elapsed, taken in steps:
        now += elapsed
        model = min(8.0, model + rate * elapsed / 1000)
        bucket.record(taken, rate, now)
        model = min(8.0, model - taken)
        assert bucket.tokens(rate, now) == pytest.approx(model)
