"""`exactly bench sasl` runs end to end with tiny parameters (the figures are for the closing note)."""

from __future__ import annotations

from pathlib import Path

from exactly.bench.sasl import KINDS, run


def test_sasl_bench_measures_every_kind(tmp_path: Path) -> None:
    result = run(connections=3, iterations=4096, work=tmp_path)
    assert set(result.setup_ms) == set(KINDS)
    assert all(len(samples) == 3 and all(ms > 0 for ms in samples) for samples in result.setup_ms.values())
    assert result.p50("SCRAM-SHA-256") > 0
