"""The report's peer lookup finds Kafka-compatible binaries on PATH and knows which it can start."""

from __future__ import annotations

import os
from pathlib import Path

from exactly.bench.peers import find_peers


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
