"""`exactly bench rebalance` run as the command it is, small (N = 2, 4 partitions, one round of the
eager classic and the KIP-848 variant): every phase settles, the eager rebalance stops every partition
while the incremental one stops only what moves, nobody ever owns a partition twice, and the table and
the plot are written. Timings are not asserted (the machine is shared)."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

from exactly.bench.figures import read_sheet
from exactly.testing.processes import child_env

pytestmark = [pytest.mark.interop, pytest.mark.slow]

COMMAND = "from exactly.cli.main import app; app()"


def test_a_small_run_settles_every_phase(tmp_path: Path) -> None:
    out = tmp_path / "out"
    argv = [sys.executable, "-c", COMMAND, "bench", "rebalance", "--sizes", "2", "--partitions", "4"]
    argv += ["--rounds", "1", "--quiet-s", "1.5", "--variants", "classic-range", "consumer-uniform"]
    argv += ["--out", str(out)]
    done = subprocess.run(argv, env=child_env(), capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-5000:]
    rows = read_sheet(out / "raw" / "rebalance.csv")
    for variant in ("classic-range", "consumer-uniform"):
        for phase in ("form", "join", "leave", "kill"):
            ((_, _, settle),) = rows[f"{variant}.n2.{phase}.settle_s"]
            assert not math.isnan(settle), (variant, phase, done.stdout)
            assert settle >= 0
            ((_, _, doubled),) = rows[f"{variant}.n2.{phase}.double_owned_s"]
            assert doubled == 0, (variant, phase)
        ((_, _, killed),) = rows[f"{variant}.n2.kill.settle_s"]
        assert killed > 1.0  # a killed member is noticed only when its session (3 s) ends
    # 2 -> 3 members: eager revokes all 4 partitions; the uniform assignor moves 1 (2+2 -> 2+1+1)
    assert rows["classic-range.n2.join.stopped"][0][2] == 4
    assert rows["consumer-uniform.n2.join.stopped"][0][2] == 1
    assert "| 2 | (d) one killed (SIGKILL) |" in (out / "rebalance.md").read_text()
    assert (out / "rebalance.png").stat().st_size > 0
