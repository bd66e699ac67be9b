"""The benchmark report's PNG plots (matplotlib, Agg backend: no display needed).

- `throughput.png`: the broker section's timed rounds as time series: produce MB/s, consume MB/s and
  the broker's CPU (cores) in each wall-clock second, one line per round, the warm-up shaded;
- `peers.png`: exactly beside each peer broker: produce and consume MB/s and the broker's CPU seconds
  per GB, bars at the median with min-max whiskers over the rounds;
- `section_<key>.png`: any other section's figures as bars at the median with min-max whiskers, one
  panel per unit;
- `latency.png`: p50/p90/p99/p99.9 of each latency benchmark (log scale);
- `commit_cdf.png`: the CDF of the transaction commit latencies with the fsync p50 and p99 bounds as
  vertical lines.
Every plot is drawn from the same samples that the CSVs hold.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from exactly.bench.figures import Figure, percentile

LATENCY_QUANTILES = (0.5, 0.9, 0.99, 0.999)


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def latency_plot(path: Path, benchmarks: Sequence[tuple[str, Sequence[float]]], title: str) -> Path:
    """`benchmarks`: (label, latencies in ms); bars for p50/p90/p99/p99.9 of each."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(10, 5))
    width = 0.8 / len(LATENCY_QUANTILES)
    for i, q in enumerate(LATENCY_QUANTILES):
        xs = [b + (i - (len(LATENCY_QUANTILES) - 1) / 2) * width for b in range(len(benchmarks))]
        ys = [percentile(list(values), q) for _, values in benchmarks]
        ax.bar(xs, ys, width=width, label=f"p{q * 100:g}")
    ax.set_xticks(range(len(benchmarks)))
    ax.set_xticklabels([label for label, _ in benchmarks], rotation=20, ha="right", fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("ms (log scale)")
    ax.set_title(title, fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def commit_cdf_plot(
    path: Path,
    series: Sequence[tuple[str, Sequence[float]]],
    fsync_p50_ms: float,
    fsync_p99_ms: float,
    title: str,
) -> Path:
    """CDF of each series (ms, log x axis) with the fsync p50/p99 as vertical lines."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for label, values in series:
        ordered = sorted(values)
        if not ordered:
            continue
        ys = [(i + 1) / len(ordered) for i in range(len(ordered))]
        ax.step(ordered, ys, where="post", label=f"{label} ({len(ordered)} commits)")
    ax.axvline(fsync_p50_ms, color="black", linestyle="--", label=f"fsync p50 {fsync_p50_ms:.2f} ms")
    ax.axvline(fsync_p99_ms, color="grey", linestyle=":", label=f"fsync p99 {fsync_p99_ms:.2f} ms")
    ax.set_xscale("log")
    ax.set_xlabel("ms (log scale)")
    ax.set_ylabel("fraction of commits")
    ax.set_ylim(0, 1.02)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


Series = Sequence[tuple[float, float]]  # (second since the round began, value)


def timeline_plot(
    path: Path,
    panels: Sequence[tuple[str, Sequence[Series]]],
    warmups: Sequence[float],
    title: str,
) -> Path:
    """One panel per (y label, rounds); each round a line over the seconds; the warm-up of each panel
    (`warmups`, same order) shaded."""
    plt = _pyplot()
    fig, axes = plt.subplots(len(panels), 1, figsize=(9, 2.8 * len(panels)), sharex=False, squeeze=False)
    for ax, (ylabel, rounds), warmup in zip(axes[:, 0], panels, warmups, strict=True):
        for number, points in enumerate(rounds):
            ax.plot(
                [x for x, _ in points],
                [y for _, y in points],
                marker="o",
                markersize=2.5,
                linewidth=1.2,
                label=f"round {number + 1}",
            )
        if warmup > 0:
            ax.axvspan(-0.5, warmup - 0.5, color="grey", alpha=0.15, label="warm-up (not measured)")
        ax.set_ylabel(ylabel, fontsize=9)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        if rounds:
            ax.legend(fontsize=7, loc="lower right")
    axes[-1, 0].set_xlabel("second since the round began")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _whiskers(figures: Sequence[Figure]) -> tuple[list[float], list[float]]:
    """Distances from each median down to its round minimum and up to its maximum (0 when unknown)."""
    low = [f.value - f.spread.low if f.spread.n >= 2 else 0.0 for f in figures]
    high = [f.spread.high - f.value if f.spread.n >= 2 else 0.0 for f in figures]
    return [max(0.0, x) for x in low], [max(0.0, x) for x in high]


def comparison_plot(
    path: Path, metrics: Sequence[tuple[str, Sequence[tuple[str, Figure]]]], title: str
) -> Path:
    """One panel per metric (title, [(broker, its figure)]): a bar per broker, min-max whiskers."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(metrics), figsize=(3.2 * len(metrics), 3.8), squeeze=False)
    for ax, (name, entries) in zip(axes[0], metrics, strict=True):
        figures = [f for _, f in entries]
        low, high = _whiskers(figures)
        xs = list(range(len(entries)))
        ax.bar(xs, [f.value for f in figures], yerr=[low, high], capsize=4, color=[f"C{i}" for i in xs])
        ax.set_xticks(xs)
        ax.set_xticklabels([who for who, _ in entries], rotation=15, ha="right", fontsize=8)
        ax.set_title(name, fontsize=9)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def section_plot(path: Path, figures: Sequence[Figure], title: str, max_panels: int = 4) -> Path:
    """A section's figures as horizontal bars, one panel per unit (the units with most figures first),
    min-max whiskers over the rounds; a log axis when a panel's values span more than 100 x."""
    plt = _pyplot()
    by_unit: dict[str, list[Figure]] = {}
    for f in figures:
        if f.value == f.value:  # not NaN
            by_unit.setdefault(f.unit, []).append(f)
    units = sorted(by_unit, key=lambda u: -len(by_unit[u]))[:max_panels]
    height = max(2.5, 0.35 * max((len(by_unit[u]) for u in units), default=1) + 1.2)
    fig, axes = plt.subplots(1, max(1, len(units)), figsize=(5.2 * max(1, len(units)), height), squeeze=False)
    for ax, unit in zip(axes[0], units, strict=False):
        chosen = by_unit[unit]
        low, high = _whiskers(chosen)
        ys = list(range(len(chosen)))
        ax.barh(ys, [f.value for f in chosen], xerr=[low, high], capsize=3, color="C0")
        ax.set_yticks(ys)
        ax.set_yticklabels([f.key.split(".", 1)[-1] for f in chosen], fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel(unit, fontsize=8)
        positive = [f.value for f in chosen if f.value > 0]
        if positive and max(positive) > 100 * min(positive):
            ax.set_xscale("log")
        ax.grid(axis="x", alpha=0.3)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
