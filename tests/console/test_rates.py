"""Live rates from counters sampled when pages are asked for (time passed in)."""

from __future__ import annotations

from exactly.console.rates import Rates


def test_rate_over_the_window() -> None:
    rates = Rates(window_ms=10_000, min_gap_ms=500)
    for second in range(0, 21):
        rates.observe(second * 1000, {"a": second * 100})
    assert rates.rate("a") == 100.0


def test_one_sample_has_no_rate_and_unknown_keys_are_zero() -> None:
    rates = Rates()
    rates.observe(0, {"a": 5})
    assert rates.rate("a") == 0.0
    assert rates.rate("b") == 0.0


def test_polls_closer_than_the_gap_do_not_shrink_the_window() -> None:
    rates = Rates(window_ms=10_000, min_gap_ms=500)
    rates.observe(0, {"a": 0})
    for ms in range(1000, 3001, 100):
        rates.observe(ms, {"a": ms})  # 1000 per second
    assert 900 <= rates.rate("a") <= 1100


def test_a_counter_that_went_down_restarts() -> None:
    rates = Rates()
    rates.observe(0, {"a": 1000})
    rates.observe(1000, {"a": 2000})
    rates.observe(2000, {"a": 10})
    assert rates.rate("a") == 0.0
    rates.observe(3000, {"a": 110})
    assert rates.rate("a") == 100.0


def test_keys_not_seen_for_a_window_are_forgotten() -> None:
    rates = Rates(window_ms=1000)
    rates.observe(0, {"a": 0})
    rates.observe(600, {"a": 60})
    rates.observe(5000, {"b": 1})
    assert rates.rate("a") == 0.0
