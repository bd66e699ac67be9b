"""`exactly bench txn` runs end to end with tiny parameters and reports every figure (the figures
themselves are for the closing note, not for a timed test)."""

from __future__ import annotations

import math

import pytest

from exactly.bench import txn

pytestmark = [pytest.mark.interop, pytest.mark.slow]


def test_txn_bench_reports_every_figure(capsys: pytest.CaptureFixture[str]) -> None:
    report = txn.main(
        ["--seconds", "1", "--rounds", "1", "--commits", "20", "--ids", "20", "--ids-seconds", "2"]
    )
    out = capsys.readouterr().out
    assert "transactional / idempotent" in out
    assert "20 transactional ids:" in out
    for name, value in report.items():
        assert math.isfinite(value), name
    assert report["idempotent_records_s"] > 0
    assert report["transactional_records_s"] > 0
    assert 0 < report["commit_after_flush_p50_ms"] <= report["commit_after_flush_p99_ms"]
    assert report["ids_commits_s"] > 0
    assert report["broker_peak_rss_mb"] > 10
