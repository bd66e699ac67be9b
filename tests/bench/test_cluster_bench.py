"""`exactly bench cluster --quick` runs against a real ZooKeeper and three real brokers and returns sane
contents: throughputs of both replication factors, their ratio, per-broker CPU time, one failover sample
per kill and per controlled shutdown with its breakdown, replica-lag samples, and the CSV and markdown
section it writes. Timings are not asserted (the machine is shared)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from exactly.bench import cluster
from exactly.bench.figures import Sheet, read_sheet
from exactly.bench.suite import cluster_available

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[cluster.ClusterBenchResult, Path]:
    missing = cluster_available()
    if missing is not None:
        pytest.skip(missing)
    out = tmp_path_factory.mktemp("bench")
    return cluster.main(["--quick", "--out", str(out)]), out


def test_quick_options_are_small() -> None:
    options, out = cluster.parse_options(["--quick", "--kills", "3", "--client-set", "retry.backoff.ms=10"])
    assert options.quick
    assert options.rounds == 1
    assert options.kills == 3
    assert options.shutdowns == cluster.QUICK.shutdowns
    assert options.client == (("retry.backoff.ms", "10"),)
    assert out == Path("bench")
    assert cluster.parse_options(options.argv)[0] == options  # argv reproduces the options


def test_throughput_of_both_replication_factors_and_their_ratio(
    quick_run: tuple[cluster.ClusterBenchResult, Path],
) -> None:
    result, _ = quick_run
    for rf in (1, 3):
        runs = result.runs(rf)
        assert len(runs) == cluster.QUICK.rounds
        for run in runs:
            assert run.records == cluster.QUICK.records
            assert run.mb_s > 0
            assert run.records_s > 0
            assert len(run.cpu_s) == 3
            assert all(cpu >= 0 for cpu in run.cpu_s)
    # the leader (broker 1) does work in both; the followers replicate only RF 3. CPU is counted in
    # clock ticks (10 ms): the quick run's 20,000 records (~20 MB) cost the leader several ticks, where
    # 5,000 could end within one (CI once read 0.00 s for RF 1's leader).
    assert sum(run.cpu_s[0] for run in result.runs(1)) > 0
    assert sum(run.cpu_s[0] for run in result.runs(3)) > 0
    assert sum(run.cpu_s[1] + run.cpu_s[2] for run in result.runs(3)) > 0


def test_one_failover_sample_per_signal_with_its_breakdown(
    quick_run: tuple[cluster.ClusterBenchResult, Path],
) -> None:
    result, _ = quick_run
    kills = [f for f in result.failovers if f.kind is cluster.FailoverKind.KILL]
    controlled = [f for f in result.failovers if f.kind is cluster.FailoverKind.CONTROLLED]
    assert len(kills) == cluster.QUICK.kills
    assert len(controlled) == cluster.QUICK.shutdowns
    for f in result.failovers:
        assert f.new_leader != f.old_leader
        assert f.new_leader in (1, 2, 3)
        assert f.new_epoch > f.old_epoch
        assert not math.isnan(f.acked_s)
        assert f.acked_s > 0
        assert not math.isnan(f.elected_s)
        assert f.elected_s <= f.acked_s
        assert not math.isnan(f.session_gone_s)
    # after kill -9 nobody hands leadership over: the registration goes first, with the session
    assert all(f.session_gone_s <= f.elected_s for f in kills)
    assert result.failover_records > 0
    assert result.failover_errors == 0


def test_replica_lag_samples(quick_run: tuple[cluster.ClusterBenchResult, Path]) -> None:
    result, _ = quick_run
    assert result.lag_bytes
    assert all(b >= 0 for b in result.lag_bytes)
    assert cluster.RECORD_SIZE < result.bytes_per_record < 2 * cluster.RECORD_SIZE


def test_csv_figures_and_markdown(quick_run: tuple[cluster.ClusterBenchResult, Path]) -> None:
    result, out = quick_run
    rows = read_sheet(out / "raw" / "cluster.csv")
    assert len(rows["kill_acked_s"]) == cluster.QUICK.kills
    assert len(rows["controlled_acked_s"]) == cluster.QUICK.shutdowns
    assert len(rows["lag_records"]) == len(result.lag_bytes)
    assert {"rf1_mb_s", "rf3_mb_s", "rf3_broker2_cpu_s_per_mb", "rf1_zookeeper_cpu_s"} <= set(rows)
    section = (out / "cluster.md").read_text()
    assert section.startswith("## Cluster: replication and failover")
    for key in (
        "rf3_over_rf1",
        "kill_failover_p50_s",
        "kill_failover_max_s",
        "controlled_failover_p50_s",
        "lag_p99_records",
        "rf3_broker1_cpu_ms_per_mb",
    ):
        assert f"`cluster.{key}`" in section
    sheet = Sheet("cluster")
    cluster.fill_sheet(result, sheet)
    figures = {f.key: f.value for f in cluster.figures(result, sheet)}
    rf1 = [r.mb_s for r in result.runs(1)]
    rf3 = [r.mb_s for r in result.runs(3)]
    assert math.isclose(figures["cluster.rf3_over_rf1"], (sum(rf3) / len(rf3)) / (sum(rf1) / len(rf1)))
    assert figures["cluster.kill_failover_max_s"] == max(result.failover_times(cluster.FailoverKind.KILL))
