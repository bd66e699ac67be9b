"""The benchmark report's PNG plots (matplotlib, Agg backend: no display needed).

- `throughput.png`: produce MB/s per 1-s window (wall-clock seconds), one line per round;
- `latency.png`: p50/p90/p99/p99.9 of each latency benchmark (log scale);
- `commit_cdf.png`: the CDF of the transaction commit latencies with the fsync p50 and p99 bounds as
  vertical lines.
Every plot is drawn from the same samples that the CSVs hold.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from exactly.bench.figures import percentile

LATENCY_QUANTILES = (0.5, 0.9, 0.99, 0.999)


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def throughput_plot(path: Path, rounds: Sequence[Sequence[tuple[int, float]]], title: str) -> Path:
    """`rounds`: per round, (second since the round began, MB/s in that second)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for number, windows in enumerate(rounds):
        xs = [x for x, _ in windows]
        ys = [y for _, y in windows]
        ax.plot(xs, ys, marker="o", markersize=3, label=f"round {number + 1}")
    ax.set_xlabel("second since the round began (1-s windows of delivery reports)")
    ax.set_ylabel("produce MB/s")
    ax.set_title(title, fontsize=10)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    if rounds:
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


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
