"""`exactly bench tls` runs end to end with tiny parameters (the figures are for the closing note)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from exactly.bench import tls

pytestmark = [pytest.mark.interop, pytest.mark.slow]


def test_tls_bench_measures_both_listeners(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = tls.run(records=2000, producers=1, rounds=2, work=tmp_path)
    for samples in (result.plaintext_mb_s, result.tls_mb_s):
        assert len(samples) == 2
        assert all(math.isfinite(x) and x > 0 for x in samples)
    for cpu in (result.plaintext_cpu_s_per_gb, result.tls_cpu_s_per_gb):  # clock ticks: 0 is possible
        assert len(cpu) == 2
        assert all(math.isfinite(x) and x >= 0 for x in cpu)
    assert result.ratio == pytest.approx(result.tls_median / result.plaintext_median)
    tls.main(["--records", "2000", "--producers", "1", "--rounds", "1"])
    out = capsys.readouterr().out
    assert "produce over mutual TLS:" in out
    assert "TLS / plaintext:" in out
    assert "broker CPU per GB produced:" in out
