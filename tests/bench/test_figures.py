"""Figures carry their noise: the spread of the per-round values each median summarises, printed beside
it in every table."""

from __future__ import annotations

import math
import statistics

from hypothesis import given
from hypothesis import strategies as st

from exactly.bench.figures import (
    NO_SPREAD,
    Figure,
    Sheet,
    figure_table,
    percentile,
    spread_of,
    with_spread,
)
from exactly.bench.plan import figure

finite = st.floats(-1e9, 1e9, allow_nan=False)


@given(st.lists(finite, min_size=1, max_size=50))
def test_spread_orders_and_counts(values: list[float]) -> None:
    s = spread_of(values)
    assert s.n == len(values)
    assert s.low == min(values)
    assert s.high == max(values)
    assert s.low <= s.q1 <= s.q3 <= s.high
    assert s.low <= s.median <= s.high
    assert s.median == statistics.median(values)


def test_nan_is_ignored_and_nothing_is_no_spread() -> None:
    assert spread_of([math.nan, 2.0, 4.0]).n == 2
    assert spread_of([math.nan]) is NO_SPREAD
    assert spread_of([]).text() == ""


def test_text() -> None:
    assert spread_of([210.0, 240.0, 220.0]).text() == "210.0 to 240.0 (n=3, ±7%)"
    assert spread_of([5.0]).text() == "n=1"
    assert spread_of([-1.0, 1.0]).text() == "-1.000 to 1.000 (n=2)"  # median 0: no ±


def test_sheet_statistics_carry_the_spread_of_rounds() -> None:
    sheet = Sheet("x")
    for r, v in enumerate([100.0, 130.0, 110.0]):
        sheet.add("mb_s", [v], "MB/s", run=r)
    sheet.add("ms", [1.0, 2.0, 3.0, 4.0], "ms", run=0)
    sheet.add("ms", [10.0, 20.0, 30.0, 40.0], "ms", run=1)
    median = sheet.median("mb_s")
    assert (median.value, median.how) == (110.0, "median of `mb_s`")
    assert (median.spread.low, median.spread.high, median.spread.n) == (100.0, 130.0, 3)
    pooled = sheet.pct("ms", 0.5)
    assert pooled.value == percentile([1.0, 2.0, 3.0, 4.0, 10.0, 20.0, 30.0, 40.0], 0.5)
    assert (pooled.spread.low, pooled.spread.high) == (3.0, 30.0)  # each run's own p50
    of_runs = sheet.median_of_runs("ms", 0.5)
    assert of_runs.value == 16.5
    assert of_runs.spread.n == 2


def test_every_table_row_prints_the_spread_beside_the_value() -> None:
    sheet = Sheet("broker")
    sheet.add("mb_s", [100.0], "MB/s", run=0)
    sheet.add("mb_s", [120.0], "MB/s", run=1)
    f = figure("broker.mb_s", "produce", sheet.median("mb_s"), "MB/s", sheet, "0.5 x bound")
    plain = Figure("cluster.x", "computed elsewhere", 3.0, "s", "by hand", "raw/c.csv")
    lines = figure_table([f, plain])
    assert lines[0].startswith("| id | figure | value | spread: min to max (rounds, ±) | unit |")
    assert lines[2] == (
        "| `broker.mb_s` | produce | 110.0 | 100.0 to 120.0 (n=2, ±9%) | MB/s | 0.5 x bound | "
        "`raw/broker.csv`: median of `mb_s` |"
    )
    assert "| 3.000 | — | s |" in lines[3]
    # A plain (value, how) statistic still makes a figure, without a spread.
    assert figure("k", "l", (1.0, "how"), "u", sheet).noise == "—"


def test_a_figure_built_by_hand_gets_the_spread_of_the_rows_it_names() -> None:
    sheet = Sheet("cluster")
    sheet.add("rf1_mb_s", [10.0, 14.0, 12.0], "MB/s")
    sheet.add("lat_ms", [1.0, 2.0], "ms", run=0)
    sheet.add("lat_ms", [5.0, 6.0], "ms", run=1)
    by_hand = Figure("cluster.rf1_mb_s", "rf 1", 12.0, "MB/s", "median of `rf1_mb_s`", sheet.file)
    filled = with_spread(by_hand, sheet)
    assert (filled.spread.low, filled.spread.high, filled.spread.n) == (10.0, 14.0, 3)
    p99 = with_spread(Figure("c.p", "p", 6.0, "ms", "p99 of all `lat_ms`", sheet.file), sheet)
    assert (p99.spread.low, p99.spread.high) == (2.0, 6.0)
    ratio = Figure("c.r", "r", 1.0, "ratio", "median of `a` / median of `b`", sheet.file)
    assert with_spread(ratio, sheet) is ratio  # not one series: left alone
    other = Figure("c.o", "o", 1.0, "MB/s", "median of `rf1_mb_s`", "raw/other.csv")
    assert with_spread(other, sheet) is other
