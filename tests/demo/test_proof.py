"""The demo's proofs: the window comparison finds every kind of difference, and pandas' aggregation is
the one the output is checked against."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

from exactly.demo.proof import by_key, carrier_delays, compare, means_equal, pandas_windows
from exactly.demo.windows import WindowAggregate, WindowKey


def window(carrier: str, hour: int, flights: int, departures: int, mean: float | None) -> WindowAggregate:
    return WindowAggregate(
        WindowKey(carrier, "JFK", f"2013-01-01T{hour:02d}:00:00Z"), flights, departures, mean
    )


EXPECTED = by_key([window("UA", 10, 3, 3, 4.0), window("AA", 10, 2, 1, -3.5), window("B6", 11, 1, 0, None)])


def test_equal_windows_in_any_order_pass() -> None:
    result = compare("same", EXPECTED, reversed(list(EXPECTED.values())))
    assert result.passed
    assert (result.expected_windows, result.actual_records) == (3, 3)
    assert result.describe() == "3 windows, all equal"


def test_a_duplicated_window_fails() -> None:
    result = compare(
        "dup", EXPECTED, [*EXPECTED.values(), EXPECTED[WindowKey("UA", "JFK", "2013-01-01T10:00:00Z")]]
    )
    assert not result.passed
    assert (result.duplicates, result.missing, result.extra) == (1, 0, 0)
    assert result.examples == ("UA|JFK|2013-01-01T10:00:00Z written 2 times",)


def test_missing_and_extra_windows_fail() -> None:
    actual = [w for w in EXPECTED.values() if w.key.carrier != "AA"] + [window("DL", 12, 1, 1, 0.0)]
    result = compare("missing", EXPECTED, actual)
    assert not result.passed
    assert (result.missing, result.extra) == (1, 1)
    assert "AA|JFK|2013-01-01T10:00:00Z missing" in result.examples
    assert "DL|JFK|2013-01-01T12:00:00Z not expected" in result.examples


@pytest.mark.parametrize(
    ("change", "counts", "means"),
    [
        ({"flights": 4}, 1, 0),  # a flight counted twice (or an aborted one counted)
        ({"departures": 2}, 1, 0),
        ({"mean_dep_delay": 4.0 * (1 + 1e-8)}, 0, 1),
        ({"mean_dep_delay": None}, 0, 1),
    ],
)
def test_other_figures_fail(change: dict[str, object], counts: int, means: int) -> None:
    key = WindowKey("UA", "JFK", "2013-01-01T10:00:00Z")
    actual = [dataclasses.replace(w, **change) if w.key == key else w for w in EXPECTED.values()]  # type: ignore[arg-type]
    result = compare("figures", EXPECTED, actual)
    assert not result.passed
    assert (result.count_mismatches, result.mean_mismatches) == (counts, means)


def test_means_are_equal_to_1e9_relative_and_null_only_with_null() -> None:
    assert means_equal(20.0, 20.0 * (1 + 5e-10))
    assert not means_equal(20.0, 20.0 * (1 + 2e-9))
    assert means_equal(None, None)
    assert not means_equal(0.0, None)


def test_nothing_expected_is_not_a_pass() -> None:
    assert not compare("empty", {}, []).passed


def test_the_reference_must_not_repeat_a_window() -> None:
    with pytest.raises(ValueError, match="twice"):
        by_key([window("UA", 10, 1, 1, 1.0), window("UA", 10, 1, 1, 1.0)])


def test_pandas_windows_count_flights_and_departures_and_average_the_delay_without_excluded_rows() -> None:
    at = pd.Timestamp
    frame = pd.DataFrame(
        {
            "carrier": ["UA", "UA", "UA", "UA", "AA", "AA"],
            "origin": ["EWR", "EWR", "EWR", "EWR", "JFK", "JFK"],
            "dep_delay": [2.0, 4.0, None, 100.0, None, None],
            "scheduled_departure": [
                at("2013-01-01T10:15Z"),
                at("2013-01-01T10:59Z"),
                at("2013-01-01T10:30Z"),
                at("2013-01-01T10:45Z"),  # excluded below
                at("2013-01-01T11:00Z"),
                at("2013-01-01T11:05Z"),
            ],
        },
        index=[10, 11, 12, 13, 14, 15],
    )
    windows = pandas_windows(frame, excluded_ids=[13])
    assert windows == {
        WindowKey("UA", "EWR", "2013-01-01T10:00:00Z"): WindowAggregate(
            WindowKey("UA", "EWR", "2013-01-01T10:00:00Z"), 3, 2, 3.0
        ),
        WindowKey("AA", "JFK", "2013-01-01T11:00:00Z"): WindowAggregate(
            WindowKey("AA", "JFK", "2013-01-01T11:00:00Z"), 2, 0, None
        ),
    }


def test_carrier_delays_weigh_each_window_by_its_departures() -> None:
    delays = carrier_delays([window("UA", 10, 3, 3, 4.0), window("UA", 11, 1, 1, 8.0), *EXPECTED.values()])
    assert [(d.carrier, d.departures) for d in delays] == [("UA", 7), ("AA", 1)]
    assert delays[0].mean_dep_delay == pytest.approx((4.0 * 3 + 8.0 + 4.0 * 3) / 7)
    assert delays[1].mean_dep_delay == -3.5
