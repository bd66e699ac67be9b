"""CI's smoke run of the verification harness: `exactly verify run` for 75 s with every workload and the
broker, client and disk faults on a fast schedule: 0 anomalies after real work and real faults."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from exactly.verify.checker import ANOMALY_CLASSES


@pytest.mark.slow
def test_a_short_verification_run_finds_no_anomaly(tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = [sys.executable, "-m", "exactly", "verify", "run", "--duration", "75", "--seed", "12"]
    args += ["--out", str(out), "--faults", "broker,client,disk,proxy", "--fault-interval", "3,6"]
    done = subprocess.run(args, capture_output=True, text=True, timeout=900, check=False)
    summary_path = out / "summary.json"
    assert summary_path.exists(), done.stdout[-3000:] + done.stderr[-3000:]
    summary = json.loads(summary_path.read_text())
    assert summary["anomalies"] == dict.fromkeys(ANOMALY_CLASSES, 0), done.stdout[-4000:]
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "result: OK" in done.stdout
    assert "reproduce: exactly verify run --seed 12 --duration 75 " in done.stdout
    txns = summary["txns"]
    assert txns["committed"] > 100
    assert txns["aborted_intentional"] > 0
    assert summary["stats"]["copier records in"] == summary["stats"]["copier records out"] > 0
    assert summary["restarts"]["count"] >= 2  # the seeded schedule restarts the broker (and the final phase)
    assert sum(f["count"] for f in summary["faults"].values()) >= 5  # each takes 0-12 s, then 1.5 s quiet
    assert not summary["fault_errors"], summary["fault_errors"]
    assert (out / "logs" / "broker.log").exists()
