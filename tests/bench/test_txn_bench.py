"""`exactly bench txn` runs end to end with tiny parameters and reports every figure (the figures
themselves are for the closing note, not for a timed test)."""

from __future__ import annotations

import json
import math

import pytest

from exactly.bench import txn

pytestmark = [pytest.mark.interop, pytest.mark.slow]

TINY = [
    "--seconds", "1", "--rounds", "1", "--producers", "1", "--warmup-seconds", "0",
    "--commits", "20", "--visibility-commits", "10", "--runs", "1",
    "--ids", "20", "--ids-processes", "2", "--ids-seconds", "1",
]  # fmt: skip

FIGURES = [
    "idempotent_mb_s",
    "idempotent_records_s",
    "transactional_mb_s",
    "transactional_records_s",
    "txn_over_idempotent",
    "txn_over_idempotent_paired",
    "txn_commits_s_per_producer",
    "txn_drain_share",
    "txn_drain_mean_ms",
    "txn_end_txn_share",
    "txn_end_txn_mean_ms",
    "idempotent_broker_cpu_cores",
    "transactional_broker_cpu_cores",
    "commit_p50_ms",
    "commit_p99_ms",
    "transaction_p50_ms",
    "transaction_p99_ms",
    "commit_after_flush_p50_ms",
    "commit_after_flush_p99_ms",
    "visibility_p50_ms",
    "visibility_p99_ms",
    "ids_commits_s",
    "ids_end_txn_p50_ms",
    "ids_end_txn_p99_ms",
    "ids_transaction_p50_ms",
    "ids_transaction_p99_ms",
    "ids_broker_cpu_ms_per_commit",
    "broker_rss_before_ids_mb",
    "broker_peak_rss_ids_mb",
    "broker_peak_rss_lifetime_mb",
]


def test_txn_bench_reports_every_figure(capsys: pytest.CaptureFixture[str]) -> None:
    report = txn.main(TINY)
    out = capsys.readouterr().out
    for heading in (
        "1. throughput",
        "2. one-record transactions",
        "3. commit_transaction() returned",
        "4. 20",
    ):
        assert heading in out
    # The last line is the JSON report, the same figures main() returned.
    assert json.loads(out.strip().splitlines()[-1]) == report

    for name in FIGURES:
        value = report[name]
        assert isinstance(value, float), (name, value)
        assert math.isfinite(value), (name, value)
    assert report["idempotent_records_s"] > 0
    assert report["transactional_records_s"] > 0
    assert report["idempotent_mb_s"] == pytest.approx(report["idempotent_records_s"] * 1024 / 1e6)
    assert 0 < report["commit_p50_ms"] <= report["commit_p99_ms"]
    assert report["commit_p50_ms"] <= report["transaction_p50_ms"]
    assert 0 < report["commit_after_flush_p50_ms"] <= report["commit_after_flush_p99_ms"]
    assert report["visibility_p50_ms"] <= report["visibility_p99_ms"]
    assert report["visibility_missing"] == 0
    assert report["ids_commits_s"] > 0
    assert report["ids_errors"] == 0
    assert report["ids_end_txn_p50_ms"] <= report["ids_transaction_p50_ms"]
    assert report["broker_peak_rss_ids_mb"] > 10
    assert len(report["idempotent_rounds_records_s"]) == len(report["transactional_rounds_records_s"]) == 1


@pytest.mark.parametrize("option", ["--commits", "--visibility-commits"])
def test_no_transactions_to_time_is_refused_in_one_line(
    option: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        txn.measure([option, "0"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1].endswith(f"argument {option}: must be at least 1, got 0")
