"""`exactly bench spark` runs end to end with tiny sizes and prints its three figures with numbers (the
values are for the closing note, not for a timed test)."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.interop, pytest.mark.slow]

NUMBER = r"(\d+(?:\.\d+)?)"


def test_spark_bench_prints_the_three_figures() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "exactly",
            "bench",
            "spark",
            "--size-mib",
            "4",
            "--rounds",
            "1",
            "--seconds",
            "4",
            "--warmup-seconds",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    out = done.stdout
    for pattern in (
        rf"exactly-once sink\s*:\s*{NUMBER} records/s",
        rf"at-least-once sink\s*:\s*{NUMBER} records/s",
        rf"ratio exactly / at-least\s*:\s*{NUMBER}",
        rf"spark batch read \(local\[2\]\)\s*:\s*{NUMBER} records/s",
        rf"one confluent-kafka consumer\s*:\s*{NUMBER} records/s",
        rf"ratio spark / consumer\s*:\s*{NUMBER}",
        rf"first spark read \(cold\)\s*:\s*{NUMBER} s",
        rf"p50\s*:\s*{NUMBER} ms",
        rf"p99\s*:\s*{NUMBER} ms",
    ):
        match = re.search(pattern, out)
        assert match is not None, (pattern, out)
        assert float(match.group(1)) > 0, (pattern, out)
    assert "4096 x 1 KiB" in out
    report = json.loads(out.strip().splitlines()[-1])
    assert report["input_records"] == 4096
    assert report["latency_missing"] == 0
    assert report["latency_records"] > 0
    for name in ("stream_ratio", "read_ratio", "latency_p50_ms", "latency_p99_ms"):
        assert math.isfinite(report[name]), (name, report)
    assert report["latency_p50_ms"] <= report["latency_p99_ms"]
