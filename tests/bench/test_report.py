"""`exactly bench report --quick` runs every benchmark against the real broker and writes a report whose
figures can be recomputed from the CSVs beside it, with valid PNG plots."""

from __future__ import annotations

import csv
import math
import re
import statistics
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from exactly.bench.peers import find_peers, find_tansu

pytestmark = [pytest.mark.interop, pytest.mark.slow]

SECTIONS = [
    "Summary",
    "Machine",
    "Machine bounds",
    "Protocol codec",
    "Storage engine",
    "Broker: produce and consume",
    "Broker with page cache drop-behind",
    "Transactions",
    "Consumer groups",
    "Cluster: replication and failover",
    "Spark",
    "Peer brokers",
    "Latency percentiles",
    "Plots",
    "Raw data",
]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def nearest_rank(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def read_csv(path: Path) -> dict[str, dict[int, list[float]]]:
    """series -> run -> values in index order."""
    out: dict[str, dict[int, list[tuple[int, float]]]] = {}
    with path.open(newline="") as f:
        reader = csv.reader(f)
        assert next(reader) == ["series", "run", "index", "value", "unit"]
        for series, run, index, value, unit in reader:
            assert unit, (path, series)
            out.setdefault(series, {}).setdefault(int(run), []).append((int(index), float(value)))
    return {s: {r: [v for _, v in sorted(rows)] for r, rows in runs.items()} for s, runs in out.items()}


def figure(report: str, key: str) -> float:
    """The value cell of the row of `key` in the section tables (not the summary's copy)."""
    rows = re.findall(rf"^\| `{re.escape(key)}` \| [^|]* \| ([^|]+) \|", report, flags=re.M)
    assert rows, key
    return float(rows[-1].strip().replace(",", ""))


def close(reported: float, recomputed: float) -> bool:
    """The report prints four significant digits."""
    return math.isclose(reported, recomputed, rel_tol=2e-3, abs_tol=1e-4)


def check_png(path: Path) -> None:
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE, path
    length, kind = struct.unpack(">I4s", data[8:16])
    assert kind == b"IHDR", path
    assert length == 13, path
    width, height = struct.unpack(">II", data[16:24])
    assert min(width, height) > 100, (path, width, height)
    assert data[-8:-4] == b"IEND", path
    assert len(data) > 5000, path  # something was drawn


def test_quick_report(tmp_path: Path) -> None:
    out = tmp_path / "bench"
    done = subprocess.run(
        [sys.executable, "-m", "exactly", "bench", "report", "--quick", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=420,
    )
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    report = (out / "REPORT.md").read_text()

    headings = re.findall(r"^## (.+)$", report, flags=re.M)
    assert headings == SECTIONS
    assert "FAILED" not in report
    assert "exactly bench report --out" in report
    assert "--quick" in report
    assert re.search(
        r"load average \(1, 5, 15 min\) at start: [\d.]+, [\d.]+, [\d.]+; at end: [\d.]+", report
    )
    assert "librdkafka 2." in report
    assert "skipped: --quick" in report.split("## Spark")[1].split("## ")[0]
    peers = report.split("## Peer brokers")[1].split("\n## ")[0]
    if find_tansu() is not None:  # started, benchmarked, drawn beside exactly
        assert "`peer0.produce_mb_s` | Tansu" in peers
        assert "![peers](peers.png)" in peers
        check_png(out / "peers.png")
    else:
        assert "Tansu skipped: no binary found" in peers
        if not find_peers():
            assert "no peer broker found on PATH" in peers

    # Every CSV the report names exists and parses; no CSV is left unnamed.
    named = set(re.findall(r"`(raw/[a-z0-9_]+\.csv)`", report))
    assert {p.relative_to(out).as_posix() for p in (out / "raw").glob("*.csv")} == named
    sheets = {name: read_csv(out / name) for name in named}
    bounds, broker, txn = sheets["raw/bounds.csv"], sheets["raw/broker.csv"], sheets["raw/txn.csv"]

    # Figures recomputed from their rows.
    loopback = bounds["loopback_mb_s"][0]
    assert len(loopback) == 3
    assert close(figure(report, "bounds.loopback_mb_s"), statistics.median(loopback))
    fsync = bounds["fsync_4k_ms"][0]
    assert len(fsync) == 200
    assert close(figure(report, "bounds.fsync_p50_ms"), nearest_rank(fsync, 0.5))
    assert close(figure(report, "bounds.fsync_p99_ms"), nearest_rank(fsync, 0.99))
    sustained = [v for run in bounds["sustained_write_mb_s"].values() for v in run]
    assert len(sustained) == 3
    assert all(v > 0 for v in sustained)
    assert close(figure(report, "bounds.sustained_write_mb_s"), statistics.median(sustained))
    # quick plan: 1 s of warm-up and 2 s measured per round, one row per whole second
    assert all(len(run) == 3 for run in bounds["sustained_write_window_mb_s"].values())
    assert re.search(r"\| `broker\.produce_mb_s` \|[^\n]*[\d.]+ x sustained-write bound", report)
    produce = [v for run in broker["produce_mb_s"].values() for v in run]
    assert len(produce) == 2  # one row per round
    assert close(figure(report, "broker.produce_mb_s"), statistics.median(produce))
    # the drop-behind writer and broker: their own rows, the broker compared with that writer
    dropping = [v for run in bounds["drop_behind_write_cpu_s_per_gb"].values() for v in run]
    assert len(dropping) == 3
    assert close(figure(report, "bounds.drop_behind_write_cpu_s_per_gb"), statistics.median(dropping))
    dropbehind = sheets["raw/dropbehind.csv"]
    dropped = [v for run in dropbehind["produce_cpu_s_per_gb"].values() for v in run]
    assert len(dropped) == 2
    assert close(figure(report, "dropbehind.produce_cpu_s_per_gb"), statistics.median(dropped))
    writer = statistics.median(v for run in bounds["drop_behind_write_mb_s"].values() for v in run)
    ratio = re.search(r"\| `dropbehind\.produce_mb_s` \|[^\n]*?([\d.]+) x sustained-write bound", report)
    assert ratio is not None
    # three significant digits
    assert math.isclose(
        float(ratio.group(1)), figure(report, "dropbehind.produce_mb_s") / writer, rel_tol=5e-3
    )
    check_png(out / "throughput_dropbehind.png")
    # OffsetCommit paced (4 committers x 100/s for 2 s in the quick plan): every commit timed.
    paced = sheets["raw/groups.csv"]["offset_commit_paced_ms"][0]
    assert 100 <= len(paced) <= 4 * 201
    assert close(figure(report, "groups.offset_commit_paced_p50_ms"), nearest_rank(paced, 0.5))
    commit_runs = txn["commit_ms"]
    assert sorted(commit_runs) == [0, 1]
    assert all(len(run) == 30 for run in commit_runs.values())
    per_run_p50 = [nearest_rank(run, 0.5) for run in commit_runs.values()]
    assert close(figure(report, "txn.commit_p50_ms"), statistics.median(per_run_p50))
    ratio = re.search(r"\| `txn\.commit_p50_ms` \|[^\n]*\| ([\d.]+) x fsync p50 \|", report)
    assert ratio is not None
    assert math.isclose(
        float(ratio.group(1)), statistics.median(per_run_p50) / nearest_rank(fsync, 0.5), rel_tol=5e-3
    )

    # Timed rounds: a point per second (1 s of warm-up, 2 measured); a round's MB/s is the mean of its
    # measured seconds; the broker's CPU per GB was read from /proc beside it.
    assert sorted(broker["produce_window_mb_s"]) == [0, 1]
    for run, windows in broker["produce_window_mb_s"].items():
        assert len(windows) == 3, run
        (mb_s,) = broker["produce_mb_s"][run]
        assert math.isclose(sum(windows[1:]) / 2, mb_s, rel_tol=1e-9), run
        assert mb_s > 0
        (cpu,) = broker["produce_cpu_s_per_gb"][run]
        assert cpu > 0, run
        assert len(broker["consume_window_mb_s"][run]) == 3
        assert broker["consume_mb_s"][run][0] > 0
    cpu_median = statistics.median(v for run in broker["produce_cpu_s_per_gb"].values() for v in run)
    assert close(figure(report, "broker.produce_cpu_s_per_gb"), cpu_median)
    assert re.search(r"^\| `broker\.produce_mb_s` \|[^|]+\|[^|]+\| [\d.,]+ to [\d.,]+ \(n=2", report, re.M)
    txn_cpu = [v for run in txn["latency_cpu_ms_per_commit"].values() for v in run]
    assert len(txn_cpu) == 2
    assert all(v > 0 for v in txn_cpu)
    # The latency table's p99 of the paced produce is the CSV's.
    paced = broker["paced_latency_ms"][0]
    row = re.search(
        r"^\| produce, paced \(broker\) \| (\d+) \| [^|]+ \| [^|]+ \| ([^|]+) \|", report, flags=re.M
    )
    assert row is not None
    assert int(row.group(1)) == len(paced)
    assert close(float(row.group(2).replace(",", "")), nearest_rank(paced, 0.99))

    for png in ("throughput.png", "latency.png", "commit_cdf.png", "section_bounds.png", "section_txn.png"):
        assert f"![{png.removesuffix('.png')}]({png})" in report
        check_png(out / png)
