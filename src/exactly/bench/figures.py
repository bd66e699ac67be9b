"""The benchmark report's building blocks: raw samples (CSV), figures computed from them, sections.

A `Sheet` collects the raw samples of one benchmark and writes them to `raw/<name>.csv`:

    series,run,index,value,unit
    fsync_4k_ms,0,0,0.2031,ms

one row per sample: `series` names what was measured, `run` is the round or run it belongs to (0 when
there is one), `index` the sample's position in that run (for a time series, the second since the run
began), `value` the sample in `unit`. Every `Figure` of the report names its sheet, its series and the
statistic it is (`p50`, `median of runs' p50`, `median`, ...), so it can be recomputed from the CSV with
`percentile` / `statistics.median` below.

Every figure also carries its noise: the `Spread` of the per-round values it is the median of (min, max,
quartiles, count), printed beside the median as `min to max (n=3, ±7%)` where ±% is half the range over the
median. A figure computed from one sample has no spread (`n=1`).
"""

from __future__ import annotations

import csv
import math
import re
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from pathlib import Path
from typing import NamedTuple

from exactly.bench.broker import percentile

__all__ = [
    "NO_SPREAD",
    "Figure",
    "Section",
    "SectionStatus",
    "Sheet",
    "Spread",
    "Stat",
    "figure_table",
    "fmt",
    "percentile",
    "read_sheet",
    "spread_of",
    "with_spread",
]

CSV_HEADER = ("series", "run", "index", "value", "unit")


@dataclass(frozen=True, slots=True)
class Spread:
    """The noise of a figure: how far apart the per-round values it summarises are."""

    n: int
    low: float  # min
    high: float  # max
    q1: float  # nearest-rank quartiles
    q3: float
    median: float

    @property
    def relative(self) -> float:
        """Half the range over the median (the ± of the text); NaN when undefined."""
        if self.n < 2 or math.isnan(self.median) or self.median == 0:
            return math.nan
        return (self.high - self.low) / 2 / abs(self.median)

    def text(self) -> str:
        """`min to max (n=3, ±7%)`; `n=1` alone for one sample; blank for none."""
        if self.n == 0:
            return ""
        if self.n == 1:
            return "n=1"
        rel = self.relative
        plus = f", ±{rel * 100:.0f}%" if not math.isnan(rel) else ""
        return f"{fmt(self.low)} to {fmt(self.high)} (n={self.n}{plus})"


NO_SPREAD = Spread(0, math.nan, math.nan, math.nan, math.nan, math.nan)


def spread_of(values: Sequence[float]) -> Spread:
    """The spread of `values` (NaN ignored); `NO_SPREAD` when none is left."""
    clean = sorted(v for v in values if not math.isnan(v))
    if not clean:
        return NO_SPREAD
    return Spread(
        len(clean),
        clean[0],
        clean[-1],
        percentile(clean, 0.25),
        percentile(clean, 0.75),
        float(statistics.median(clean)),
    )


class Stat(NamedTuple):
    """A figure's value, how it was computed, and the spread of the per-round values behind it."""

    value: float
    how: str
    spread: Spread = NO_SPREAD


class Sheet:
    """The raw samples of one benchmark (a collector, filled while the benchmark runs)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.rows: list[tuple[str, int, int, float, str]] = []

    @property
    def file(self) -> str:
        return f"raw/{self.name}.csv"

    def add(self, series: str, values: Iterable[float], unit: str, run: int = 0) -> list[float]:
        """Add the samples of one run; returns them (as stored)."""
        out = [float(v) for v in values]
        self.rows.extend((series, run, i, v, unit) for i, v in enumerate(out))
        return out

    def add_indexed(self, series: str, pairs: Iterable[tuple[int, float]], unit: str, run: int = 0) -> None:
        self.rows.extend((series, run, int(i), float(v), unit) for i, v in pairs)

    def values(self, series: str, run: int | None = None) -> list[float]:
        return [r[3] for r in self.rows if r[0] == series and (run is None or r[1] == run)]

    def runs(self, series: str) -> list[list[float]]:
        by_run: dict[int, list[float]] = defaultdict(list)
        for r in self.rows:
            if r[0] == series:
                by_run[r[1]].append(r[3])
        return [by_run[k] for k in sorted(by_run)]

    def write(self, out: Path) -> Path:
        path = out / self.file
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(CSV_HEADER)
            for series, run, index, value, unit in self.rows:
                writer.writerow((series, run, index, repr(value), unit))
        return path

    # --- statistics that figures are made of (each says how it was computed) ---

    def median(self, series: str) -> Stat:
        """The median of every sample of `series` (one per round); its spread is theirs."""
        values = self.values(series)
        return Stat(_median(values), f"median of `{series}`", spread_of(values))

    def pct(self, series: str, q: float) -> Stat:
        """A percentile of all runs pooled; its spread is that of each run's own percentile."""
        per_run = [percentile(v, q) for v in self.runs(series)]
        return Stat(percentile(self.values(series), q), f"{_qname(q)} of all `{series}`", spread_of(per_run))

    def median_of_runs(self, series: str, q: float) -> Stat:
        per_run = [percentile(v, q) for v in self.runs(series)]
        how = f"median over runs of each run's {_qname(q)} of `{series}`"
        return Stat(_median(per_run), how, spread_of(per_run))


def read_sheet(path: Path) -> dict[str, list[tuple[int, int, float]]]:
    """A CSV written by `Sheet.write`: series -> [(run, index, value)]."""
    out: dict[str, list[tuple[int, int, float]]] = defaultdict(list)
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        for row in reader:
            out[row["series"]].append((int(row["run"]), int(row["index"]), float(row["value"])))
    return dict(out)


def _median(values: list[float]) -> float:
    return float(statistics.median(values)) if values else math.nan


def _qname(q: float) -> str:
    return f"p{q * 100:g}"


@dataclass(frozen=True, slots=True)
class Figure:
    key: str  # unique in the report, e.g. "broker.produce_mb_s"
    label: str
    value: float
    unit: str
    how: str  # the statistic and the series it was computed from
    sheet: str  # the CSV, relative to the report
    versus: str = ""  # ratio against a bound or a peer, already formatted
    spread: Spread = NO_SPREAD  # of the per-round values the figure summarises

    @property
    def noise(self) -> str:
        """The spread as the report prints it beside the value (`—` when unknown)."""
        return self.spread.text() or "—"


class SectionStatus(Enum):
    DONE = "done"
    SKIPPED = "skipped"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class Section:
    key: str
    title: str
    status: SectionStatus
    seconds: float
    command: str  # what the section ran, with its parameters
    figures: tuple[Figure, ...] = ()
    notes: tuple[str, ...] = ()
    sheets: tuple[str, ...] = field(default=())


_MEDIAN_OF = re.compile(r"^median of `([^`]+)`$")
_PERCENTILE_OF = re.compile(r"^p([\d.]+) of (?:all )?`([^`]+)`")


def with_spread(figure: Figure, sheet: Sheet) -> Figure:
    """`figure` with the spread of the rows it names, when it was built without one: `median of `s``
    takes the spread of the series' values, `pNN of `s`` that of each run's own percentile."""
    if figure.spread.n or figure.sheet != sheet.file:
        return figure
    if (m := _MEDIAN_OF.match(figure.how)) is not None:
        spread = spread_of(sheet.values(m.group(1)))
    elif (m := _PERCENTILE_OF.match(figure.how)) is not None:
        q = float(m.group(1)) / 100
        spread = spread_of([percentile(v, q) for v in sheet.runs(m.group(2))])
    else:
        return figure
    return replace(figure, spread=spread) if spread.n else figure


def fmt(value: float) -> str:
    """Four significant digits at most (the report's numbers; the CSV keeps full precision)."""
    if math.isnan(value):
        return "n/a"
    if value == 0:
        return "0"
    magnitude = abs(value)
    if magnitude >= 1000:
        return f"{value:,.0f}"
    if magnitude >= 100:
        return f"{value:.1f}"
    if magnitude >= 10:
        return f"{value:.2f}"
    if magnitude >= 1:
        return f"{value:.3f}"
    return f"{value:.4g}"


def section_markdown(title: str, command: str, seconds: float, notes: list[str], figs: list[Figure]) -> str:
    """One benchmark's report section on its own: the command, its notes, then its figures' table."""
    lines = [f"## {title}", "", f"`{command}` in {seconds:.0f} s", "", *notes, ""]
    lines += figure_table(figs, "vs bound / target")
    return "\n".join(lines) + "\n"


def figure_table(figs: Sequence[Figure], versus: str = "vs bound / peer") -> list[str]:
    """The markdown table of figures: each median with its spread across rounds beside it."""
    lines = [
        f"| id | figure | value | spread: min to max (rounds, ±) | unit | {versus} | computed from |",
        "|---|---|---:|---|---|---|---|",
    ]
    lines += [
        f"| `{f.key}` | {f.label} | {fmt(f.value)} | {f.noise} | {f.unit} | {f.versus} | "
        f"`{f.sheet}`: {f.how} |"
        for f in figs
    ]
    return lines


def nan_median(values: Sequence[float]) -> float:
    """The median of the values that are not NaN (NaN when none is)."""
    clean = [v for v in values if not math.isnan(v)]
    return float(statistics.median(clean)) if clean else math.nan


def nan_max(values: Sequence[float]) -> float:
    """The largest value that is not NaN (NaN when none is)."""
    clean = [v for v in values if not math.isnan(v)]
    return max(clean) if clean else math.nan
