"""`exactly bench security` runs the three security benchmarks in one run, with tiny sizes, and prints one
table with every figure (the figures themselves are for issue 13's closing note, not for a timed test)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.interop, pytest.mark.slow]

NUMBER = r"(\d+(?:\.\d+)?)"
ROUNDS = r"rounds (\d+\.\d), (\d+\.\d)$"  # two rounds

FIGURES = {  # line start -> what follows the median on that line
    "produce PLAINTEXT MB/s": ROUNDS,
    "produce mutual TLS MB/s": ROUNDS,
    "TLS / PLAINTEXT": r">= 0\.7\s+(PASS|MISS)$",
    "connection setup PLAINTEXT p50 ms": r"p99 \d+\.\d\d ms$",
    "connection setup SCRAM-SHA-256 p50 ms": r"p99 \d+\.\d\d ms, p50 \+-?\d+\.\d\d ms over PLAINTEXT$",
    "connection setup SCRAM-SHA-512 p50 ms": r"p99 \d+\.\d\d ms, p50 \+-?\d+\.\d\d ms over PLAINTEXT$",
    "produce, no authorizer MB/s": ROUNDS,
    "produce, authorizer + 50 ACLs MB/s": ROUNDS,
    "ACLs on / off": r">= 0\.95\s+(PASS|MISS)$",
}


def test_security_bench_prints_every_figure() -> None:
    args = ["--records", "2000", "--producers", "1", "--rounds", "2", "--connections", "5", "--acls", "50"]
    done = subprocess.run(
        [sys.executable, "-m", "exactly", "bench", "security", *args],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    lines = done.stdout.splitlines()
    assert lines[0].startswith("exactly bench security: 2 rounds; produce runs of 2000 records"), lines[0]
    medians: dict[str, float] = {}
    for figure, rest in FIGURES.items():
        found = [line for line in lines if line.startswith(figure + " ")]
        assert len(found) == 1, (figure, done.stdout)
        match = re.fullmatch(re.escape(figure) + r"\s+" + NUMBER + r"\s+" + rest, found[0])
        assert match, found[0]
        medians[figure] = float(match[1])
        if rest == ROUNDS:  # the median of two rounds is their mean
            assert medians[figure] == pytest.approx((float(match[2]) + float(match[3])) / 2, abs=0.11)
    assert all(v > 0 for v in medians.values()), medians
    ratio = medians["produce mutual TLS MB/s"] / medians["produce PLAINTEXT MB/s"]
    assert medians["TLS / PLAINTEXT"] == pytest.approx(ratio, rel=0.08, abs=0.01)  # medians rounded
    for figure, target in (("TLS / PLAINTEXT", 0.7), ("ACLs on / off", 0.95)):
        if abs(medians[figure] - target) > 0.005:  # the printed ratio is rounded
            verdict = "PASS" if medians[figure] >= target else "MISS"
            assert next(line for line in lines if line.startswith(figure)).endswith(verdict)
    # SCRAM costs the client's PBKDF2 (4096 iterations) and two more round trips over a plain connection
    assert medians["connection setup SCRAM-SHA-256 p50 ms"] > medians["connection setup PLAINTEXT p50 ms"]
    assert re.search(r"authorize\(\) \d+\.\d\d us per check with 50 ACLs in process", lines[-1]), lines[-1]
