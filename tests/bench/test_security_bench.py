"""`exactly bench security` runs the three security benchmarks in one run, with tiny sizes, and prints one
table with every figure (the figures themselves are for issue 13's closing note, not for a timed test)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.interop, pytest.mark.slow]

NUMBER = r"(\d+(?:\.\d+)?)"
ROUNDS = r"rounds (\d+\.\d), (\d+\.\d)$"  # two rounds

FIGURES = {  # line start -> what follows the median on that line
    "produce PLAINTEXT MB/s": ROUNDS,
    "produce mutual TLS MB/s": ROUNDS,
    "TLS / PLAINTEXT": r">= 0\.7\s+(PASS|MISS)\s+median of the rounds' ratios (\d+\.\d{3})$",
    "connection setup PLAINTEXT p50 ms": r"p99 \d+\.\d\d ms$",
    "connection setup SCRAM-SHA-256 p50 ms": r"p99 \d+\.\d\d ms, p50 \+-?\d+\.\d\d ms over PLAINTEXT$",
    "connection setup SCRAM-SHA-512 p50 ms": r"p99 \d+\.\d\d ms, p50 \+-?\d+\.\d\d ms over PLAINTEXT$",
    "produce, no authorizer MB/s": ROUNDS,
    "produce, authorizer + 50 ACLs MB/s": ROUNDS,
    "ACLs on / off": r">= 0\.95\s+(PASS|MISS)\s+median of the rounds' ratios (\d+\.\d{3})$",
}
CPU_ROW = re.compile(
    r"broker CPU per GB, ACLs on / off\s+(?:\d+\.\d{3}\s+median of the rounds' ratios \d+\.\d{3}"
    r"|nan\s+runs too short to time)"
)


def _processes_mentioning(text: str) -> list[str]:
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # gone, or not a process
            continue
        if text in cmdline:
            found.append(f"{proc.name}: {cmdline}")
    return found


def test_security_bench_prints_every_figure(tmp_path: Path) -> None:
    args = ["--records", "2000", "--producers", "1", "--rounds", "2", "--connections", "5", "--acls", "50"]
    done = subprocess.run(
        [sys.executable, "-m", "exactly", "bench", "security", *args],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "TMPDIR": str(tmp_path)},  # the brokers' data directories
    )
    assert not _processes_mentioning(str(tmp_path)), "brokers left running"
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    lines = done.stdout.splitlines()
    assert lines[0].startswith("exactly bench security: 2 rounds; produce runs of 2000 records"), lines[0]
    medians: dict[str, float] = {}
    groups: dict[str, tuple[str, ...]] = {}
    for figure, rest in FIGURES.items():
        found = [line for line in lines if line.startswith(figure + " ")]
        assert len(found) == 1, (figure, done.stdout)
        match = re.fullmatch(re.escape(figure) + r"\s+" + NUMBER + r"\s+" + rest, found[0])
        assert match, found[0]
        medians[figure] = float(match[1])
        groups[figure] = match.groups()[1:]
        if rest == ROUNDS:  # the median of two rounds is their mean
            assert medians[figure] == pytest.approx((float(match[2]) + float(match[3])) / 2, abs=0.11)
    assert all(v > 0 for v in medians.values()), medians
    assert len([line for line in lines if CPU_ROW.fullmatch(line)]) == 1, (
        done.stdout
    )  # tiny runs: maybe untimed
    pairs = {
        "TLS / PLAINTEXT": ("produce mutual TLS MB/s", "produce PLAINTEXT MB/s", 0.7),
        "ACLs on / off": ("produce, authorizer + 50 ACLs MB/s", "produce, no authorizer MB/s", 0.95),
    }
    for figure, (over, under, target) in pairs.items():  # the figures are rounded: some leeway
        assert medians[figure] == pytest.approx(medians[over] / medians[under], rel=0.1, abs=0.01)
        rounds = [float(a) / float(b) for a, b in zip(groups[over], groups[under], strict=True)]
        assert float(groups[figure][1]) == pytest.approx(sum(rounds) / 2, rel=0.1, abs=0.01)
        if abs(medians[figure] - target) > 0.005:
            assert groups[figure][0] == ("PASS" if medians[figure] >= target else "MISS"), figure
    # SCRAM costs the client's PBKDF2 (4096 iterations) and two more round trips over a plain connection
    assert medians["connection setup SCRAM-SHA-256 p50 ms"] > medians["connection setup PLAINTEXT p50 ms"]
    assert re.search(r"authorize\(\) \d+\.\d\d us per check with 50 ACLs in process", lines[-2]), lines[-2]
    assert re.fullmatch(
        r"\(load average, 1/5/15 min: at start [\d., ]+; at end [\d., ]+; \d+ CPUs\)", lines[-1]
    )
