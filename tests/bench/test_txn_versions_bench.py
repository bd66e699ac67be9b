"""`exactly.bench.txn_versions` (phase 5 of `exactly bench txn`) runs end to end with tiny parameters: TV2
saves the AddPartitionsToTxn round trip of every transaction (the figures themselves are for bench/)."""

from __future__ import annotations

import json
import math

import pytest

from exactly.bench import txn_versions

pytestmark = [pytest.mark.interop]


def test_tv2_vs_tv1_reports_round_trips_and_latency(capsys: pytest.CaptureFixture[str]) -> None:
    figures = txn_versions.main(["--commits", "10", "--runs", "2", "--partitions", "2"])
    out = capsys.readouterr().out
    assert "transaction version 2 vs 1" in out
    assert json.loads(out.strip().splitlines()[-1]) == figures
    # per transaction: TV1 = 2 x AddPartitionsToTxn + 2 x Produce + EndTxn; TV2 = 2 x Produce + EndTxn
    assert figures["tv1_round_trips_per_commit"] == 5
    assert figures["tv2_round_trips_per_commit"] == 3
    for name, value in figures.items():
        assert isinstance(value, float), name
        assert math.isfinite(value), name
        assert value > 0, name
