"""Kafka's sampled Rate: windows, minimum measuring window, expiry."""

from __future__ import annotations

import pytest

from exactly.quotas.rate import SampledRate


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
