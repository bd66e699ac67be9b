"""cluster.json's codec, the process checks `exactly cluster down|status` rely on, the describe partition
line, and the cluster commands' errors when no cluster runs (no ZooKeeper or broker started here)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from exactly.cli.cluster import _stop
from exactly.cli.cluster_file import (
    BrokerEntry,
    ClusterFile,
    ClusterFileError,
    ZooKeeperEntry,
    owns,
    process_alive,
)
from exactly.cli.topics import PartitionInfo
from tests.cli.helpers import assert_one_line_error, run_in_process

paths = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=30)
pids = st.integers(1, 2**22)
ports = st.integers(1, 65535)

zookeepers = st.one_of(
    st.builds(
        lambda port, pid, d: ZooKeeperEntry(f"127.0.0.1:{port}", port, pid, d, d + "/zookeeper.log"),
        ports,
        pids,
        paths,
    ),
    st.builds(lambda port: ZooKeeperEntry(f"zk.example:{port}", port, None, None, None), ports),
)
brokers = st.builds(BrokerEntry, st.integers(0, 1000), pids, ports, paths, paths)


@given(zookeepers, st.lists(brokers, max_size=5).map(tuple))
def test_cluster_file_round_trips(zookeeper: ZooKeeperEntry, entries: tuple[BrokerEntry, ...]) -> None:
    state = ClusterFile(zookeeper, entries)
    assert ClusterFile.from_json(state.to_json()) == state
    assert state.bootstrap == ",".join(f"127.0.0.1:{b.port}" for b in entries)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "[]",
        '{"version": 2}',
        '{"version": 1, "zookeeper": {}, "brokers": []}',
        '{"version": 1, "zookeeper": {"connect": "h:1", "port": "1", "pid": null, "data_dir": null,'
        ' "log_file": null}, "brokers": []}',
        '{"version": 1, "zookeeper": {"connect": "h:1", "port": 1, "pid": null, "data_dir": null,'
        ' "log_file": null}, "brokers": [{"id": true, "pid": 1, "port": 1, "data_dir": "d",'
        ' "log_file": "l"}]}',
    ],
)
def test_malformed_cluster_file(text: str) -> None:
    with pytest.raises(ClusterFileError):
        ClusterFile.from_json(text)


def test_write_then_read(tmp_path: Path) -> None:
    state = ClusterFile(
        ZooKeeperEntry("127.0.0.1:2181", 2181, 10, "/z", "/z/zookeeper.log"),
        (BrokerEntry(1, 11, 9092, "/b/data", "/b.log"),),
    )
    state.write(tmp_path / "cluster.json")
    assert ClusterFile.read(tmp_path / "cluster.json") == state
    assert [p.name for p in tmp_path.iterdir()] == ["cluster.json"]


def fake_proc(root: Path, pid: int, stat: str, argv: list[str]) -> None:
    (root / str(pid)).mkdir(parents=True)
    (root / str(pid) / "stat").write_text(stat)
    (root / str(pid) / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")


def test_process_checks_read_proc(tmp_path: Path) -> None:
    fake_proc(tmp_path, 10, "10 (java) S 1 10 10 0", ["java", "-cp", "x", "Main", "/c/zookeeper/zoo.cfg"])
    fake_proc(tmp_path, 11, "11 (a) Z) Z 1 11", ["python", "-m", "exactly", "serve"])  # a zombie
    fake_proc(tmp_path, 12, "12 (python) R 1 12", ["python", "-m", "exactly", "serve", "--data-dir", "/d"])
    assert process_alive(10, tmp_path)
    assert not process_alive(11, tmp_path)
    assert not process_alive(13, tmp_path)
    assert owns(10, "/c/zookeeper/zoo.cfg", tmp_path)
    assert not owns(10, "/c/zookeeper", tmp_path)  # whole arguments only
    assert owns(12, "/d", tmp_path)
    assert not owns(12, "/other", tmp_path)
    assert not owns(11, "serve", tmp_path)


def test_stop_terminates_then_kills() -> None:
    polite = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "polite-marker"])
    stubborn = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', "
            "flush=True); time.sleep(60)",
            "stubborn-marker",
        ],
        stdout=subprocess.PIPE,
    )
    try:
        assert stubborn.stdout is not None
        assert stubborn.stdout.readline() == b"ready\n"
        deadline = time.monotonic() + 10
        while not owns(polite.pid, "polite-marker"):  # until its exec shows in /proc
            assert time.monotonic() < deadline
            time.sleep(0.01)
        # our own children turn zombie when they exit: gone as far as _stop is concerned
        assert _stop(polite.pid, "polite-marker", 20).startswith("stopped in ")
        assert polite.wait(5) == -signal.SIGTERM
        assert _stop(stubborn.pid, "stubborn-marker", 0.5).startswith("killed (SIGKILL)")
        assert stubborn.wait(5) == -signal.SIGKILL
        assert _stop(stubborn.pid, "stubborn-marker", 1) == "was not running"
    finally:
        for proc in (polite, stubborn):
            proc.kill()
            proc.wait()
        if stubborn.stdout is not None:
            stubborn.stdout.close()


def test_stop_leaves_a_reused_pid_alone() -> None:
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert _stop(other.pid, "/some/broker/data", 1) == "was not running"
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()


def test_partition_line() -> None:
    healthy = PartitionInfo("t", 0, 1, (1, 2, 3), (1, 2, 3), ())
    assert healthy.line() == "\tTopic: t\tPartition: 0\tLeader: 1\tReplicas: 1,2,3\tIsr: 1,2,3"
    assert not healthy.under_replicated
    shrunk = PartitionInfo("t", 2, -1, (3, 1, 2), (1,), (3, 2))
    assert shrunk.under_replicated
    assert shrunk.line(0, None) == (
        "\tTopic: t\tPartition: 2\tLeader: none\tReplicas: 3,1,2\tIsr: 1\tOffline: 3,2"
        "\tStartOffset: 0\tEndOffset: ?"
    )


def test_no_cluster_here(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    down = run_in_process(capsys, "cluster", "down", "--dir", str(tmp_path))
    assert (down.returncode, down.out_lines) == (0, [f"no cluster runs in {tmp_path} (no cluster.json)"])
    status = run_in_process(capsys, "cluster", "status", "--dir", str(tmp_path))
    assert_one_line_error(status, f"no cluster runs in {tmp_path}")
    (tmp_path / "cluster.json").write_text("{not json")
    broken = run_in_process(capsys, "cluster", "status", "--dir", str(tmp_path))
    assert_one_line_error(broken, "cluster.json: malformed cluster file")


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--brokers", "0"], "--brokers must be at least 1"),
        (["--zookeeper", "nohost"], "--zookeeper 'nohost': expected HOST:PORT"),
        (["--session-timeout-ms", "0"], "--session-timeout-ms must be positive"),
    ],
)
def test_up_usage_errors(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, args: list[str], fragment: str
) -> None:
    result = run_in_process(capsys, "cluster", "up", "--dir", str(tmp_path / "c"), *args)
    assert result.returncode == 2
    assert_one_line_error(result, fragment)
    assert not (tmp_path / "c").exists()
