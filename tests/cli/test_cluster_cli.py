"""`exactly cluster up|status|down` and `exactly topics describe` on a real replicated cluster: a real
ZooKeeper and three real brokers started by the command in the background, a broker killed -9, the ISR
shrinking, and everything gone after `down`."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from exactly.cli.cluster_file import ClusterFile, process_alive
from exactly.testing.processes import accepts_connections
from tests.cli.helpers import Result, run_cli

pytestmark = [pytest.mark.slow, pytest.mark.interop]

TOPIC = "replicated"
PARTITIONS = 3


def processes_under(directory: Path) -> list[int]:
    """Live processes with an argument naming something under `directory` (ZooKeeper's zoo.cfg, a
    broker's data directory): what `cluster up` started there, with or without a cluster.json."""
    found = []
    prefix = str(directory)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            args = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        if any(arg.startswith(prefix) for arg in args) and process_alive(int(entry.name)):
            found.append(int(entry.name))
    return found


@pytest.fixture
def cluster_dir(tmp_path: Path) -> Iterator[Path]:
    """The cluster's directory; whatever the test did, no process started there outlives it."""
    directory = tmp_path / "cluster"
    try:
        yield directory
    finally:
        for pid in processes_under(directory):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def wait_for(condition: Callable[[], Result | None], timeout: float, what: str) -> Result:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = condition()
        if result is not None:
            return result
        time.sleep(0.5)
    raise AssertionError(f"{what} within {timeout} s")


def partition_fields(line: str) -> dict[str, str]:
    """'\tTopic: t\tPartition: 0\tLeader: 1 ...' -> {'Topic': 't', 'Partition': '0', 'Leader': '1', ...}"""
    return dict(field.split(": ", 1) for field in line.strip("\t").split("\t"))


def port_free(port: int) -> bool:
    if accepts_connections(port):
        return False
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def test_cluster_up_describe_under_replicated_down(cluster_dir: Path) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    started = run_cli("cluster", "up", "--brokers", "3", "--dir", str(cluster_dir), timeout=180)
    assert started.returncode == 0, started
    state = ClusterFile.read(cluster_dir / "cluster.json")
    assert [b.id for b in state.brokers] == [1, 2, 3]
    assert f"bootstrap servers: {state.bootstrap}" in started.out_lines
    assert f"stop it with: exactly cluster down --dir {cluster_dir}" in started.out_lines
    # the command has exited; what it started runs on
    assert state.zookeeper.pid is not None
    assert all(process_alive(pid) for pid in [state.zookeeper.pid, *(b.pid for b in state.brokers)])
    raw = json.loads((cluster_dir / "cluster.json").read_text())
    assert raw["brokers"][0]["log_file"] == str(cluster_dir / "broker-1.log")

    status = run_cli("cluster", "status", "--dir", str(cluster_dir))
    assert status.returncode == 0, status
    assert [line.split()[-1] for line in status.out_lines[1:5]] == ["running"] * 4

    admin = AdminClient({"bootstrap.servers": state.bootstrap})
    futures = admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=3)])
    futures[TOPIC].result(timeout=60)

    described = run_cli("topics", "describe", TOPIC, bootstrap=state.bootstrap)
    assert described.returncode == 0, described
    header, *lines = described.out_lines
    assert header.split("\t")[:1] + header.split("\t")[2:4] == [
        f"Topic: {TOPIC}",
        f"PartitionCount: {PARTITIONS}",
        "ReplicationFactor: 3",
    ]
    assert "min.insync.replicas=2" in header.split("\t")[4]
    partitions = [partition_fields(line) for line in lines]
    assert [p["Partition"] for p in partitions] == ["0", "1", "2"]
    for p in partitions:
        replicas = p["Replicas"].split(",")
        assert sorted(replicas) == ["1", "2", "3"], p
        assert sorted(p["Isr"].split(",")) == ["1", "2", "3"], p
        assert p["Leader"] in replicas, p
        assert "Offline" not in p
    quiet = run_cli("topics", "describe", "--under-replicated-partitions", bootstrap=state.bootstrap)
    assert (quiet.returncode, quiet.out) == (0, ""), quiet

    # broker 3 dies: once its ZooKeeper session expires the controller drops it from every ISR
    victim = state.brokers[2]
    os.kill(victim.pid, signal.SIGKILL)
    survivors = ",".join(b.bootstrap for b in state.brokers[:2])

    def shrunk() -> Result | None:
        result = run_cli("topics", "describe", TOPIC, "--under-replicated-partitions", bootstrap=survivors)
        assert result.returncode == 0, result
        return result if len(result.out_lines) == PARTITIONS else None

    under = wait_for(shrunk, 30, "the ISRs did not shrink")
    for line in under.out_lines:
        p = partition_fields(line)
        assert p["Topic"] == TOPIC
        assert sorted(p["Isr"].split(",")) == ["1", "2"], p
        assert sorted(p["Replicas"].split(",")) == ["1", "2", "3"], p
        assert p["Offline"] == "3", p
        assert p["Leader"] in ("1", "2"), p

    status = run_cli("cluster", "status", "--dir", str(cluster_dir))
    assert status.returncode == 0, status
    assert [line.split()[-1] for line in status.out_lines[1:5]] == ["running"] * 3 + ["stopped"]

    stopped = run_cli("cluster", "down", "--dir", str(cluster_dir), timeout=180)
    assert stopped.returncode == 0, stopped
    assert f"broker 3 (pid {victim.pid}): was not running" in stopped.out_lines
    assert not (cluster_dir / "cluster.json").exists()
    assert processes_under(cluster_dir) == []
    ports = [state.zookeeper.port, *(b.port for b in state.brokers)]
    assert [port for port in ports if not port_free(port)] == []

    again = run_cli("cluster", "down", "--dir", str(cluster_dir))
    assert (again.returncode, again.out_lines) == (0, [f"no cluster runs in {cluster_dir} (no cluster.json)"])
