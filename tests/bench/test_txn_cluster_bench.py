"""`exactly bench txn-cluster --quick`, run as the command it is (a child process: ZooKeeper, three brokers
and a single broker), writes sane figures: one-record transaction latencies (p50 > 0, p99 >= p50) and
commits/s of both targets with their ratios, and one kill -> commit time per coordinator kill. Timings are
not asserted (the machine is shared)."""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

from exactly.bench import txn_cluster
from exactly.bench.figures import percentile, read_sheet
from exactly.bench.suite import cluster_available
from exactly.testing.processes import child_env

pytestmark = [pytest.mark.interop, pytest.mark.slow]

COMMAND = "from exactly.cli.main import app; app()"


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    missing = cluster_available()
    if missing is not None:
        pytest.skip(missing)
    out = tmp_path_factory.mktemp("bench")
    argv = [sys.executable, "-c", COMMAND, "bench", "txn-cluster", "--quick", "--out", str(out)]
    done = subprocess.run(argv, env=child_env(), capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-5000:]
    return out, done.stdout


def test_quick_options_are_small_and_reproducible() -> None:
    options, out = txn_cluster.parse_options(["--quick", "--kills", "3", "--client-set", "linger.ms=1"])
    assert options.quick
    assert options.ids == txn_cluster.QUICK.ids < txn_cluster.FULL.ids
    assert options.kills == 3
    assert options.client == (("linger.ms", "1"),)
    assert out == Path("bench")
    assert txn_cluster.parse_options(options.argv)[0] == options
    full, _ = txn_cluster.parse_options([])
    assert full == txn_cluster.FULL
    assert full.ids == 1000


def test_latency_and_commits_of_both_targets(quick_run: tuple[Path, str]) -> None:
    out, _ = quick_run
    rows = read_sheet(out / "raw" / "txn_cluster.csv")
    for target in ("single", "cluster"):
        latencies = [v for _, _, v in rows[f"{target}_transaction_ms"]]
        assert latencies, target
        p50, p99 = percentile(latencies, 0.5), percentile(latencies, 0.99)
        assert 0 < p50 <= p99, (target, p50, p99)
        assert all(0 < v < 120_000 for v in latencies)
        (commits,) = [v for _, _, v in rows[f"{target}_commits_s"]]
        assert commits > 0, target


def test_one_kill_to_commit_time_per_kill(quick_run: tuple[Path, str]) -> None:
    out, printed = quick_run
    rows = read_sheet(out / "raw" / "txn_cluster.csv")
    committed = [v for _, _, v in rows["kill_committed_s"]]
    elected = [v for _, _, v in rows["kill_elected_s"]]
    assert len(committed) == len(elected) == txn_cluster.QUICK.kills
    for c, e in zip(committed, elected, strict=True):
        assert math.isfinite(c)
        assert c > 0
        assert math.isfinite(e)
        assert 0 < e <= c  # nothing commits on the id before its partition has a new leader
    assert len(re.findall(r"^   kill \d+: broker \d -> \d", printed, re.MULTILINE)) == txn_cluster.QUICK.kills


def test_markdown_names_every_figure(quick_run: tuple[Path, str]) -> None:
    out, _ = quick_run
    section = (out / "txn_cluster.md").read_text()
    assert section.startswith("## Transactions across the cluster")
    for key in (
        "single_transaction_p50_ms",
        "single_transaction_p99_ms",
        "single_commits_s",
        "cluster_transaction_p50_ms",
        "cluster_transaction_p99_ms",
        "cluster_commits_s",
        "transaction_p50_cluster_over_single",
        "commits_s_cluster_over_single",
        "kill_to_commit_p50_s",
        "kill_to_commit_max_s",
    ):
        assert f"`txn_cluster.{key}`" in section
    assert "| n/a |" not in section
