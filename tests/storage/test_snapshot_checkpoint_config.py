from __future__ import annotations

from pathlib import Path

import pytest

from exactly.errors import ErrorCode, KafkaError
from exactly.storage.checkpoint import read_checkpoint, write_checkpoint
from exactly.storage.config import CleanupPolicy, LogConfig
from exactly.storage.snapshot import (
    KAFKA_VERSION,
    CorruptSnapshotError,
    SnapshotBatch,
    SnapshotEntry,
    decode_snapshot,
    encode_snapshot,
)

ENTRIES = [
    SnapshotEntry(1, 0, -1, -1, 1000, (SnapshotBatch(4, 10, 4, 1000), SnapshotBatch(9, 15, 4, 1001))),
    SnapshotEntry(2, 3, 7, 12, 2000, ()),
]


def test_snapshot_v2_roundtrip_keeps_all_batches() -> None:
    assert decode_snapshot(encode_snapshot(ENTRIES)) == ENTRIES


def test_snapshot_v1_is_kafkas_layout() -> None:
    data = encode_snapshot(ENTRIES, KAFKA_VERSION)
    assert data[:2] == b"\x00\x01"
    assert len(data) == 10 + 2 * 46
    back = decode_snapshot(data)
    assert back[0].batches == (SnapshotBatch(9, 15, 4, 1001),)
    assert back[1].current_txn_first_offset == 12
    assert back[1].coordinator_epoch == 7


@pytest.mark.parametrize("cut", [0, 5, 9, 20, -1])
def test_snapshot_truncated_or_flipped_is_rejected(cut: int) -> None:
    data = encode_snapshot(ENTRIES)
    with pytest.raises(CorruptSnapshotError):
        decode_snapshot(data[:cut])
    flipped = bytearray(data)
    flipped[min(len(data) - 1, 6 + abs(cut))] ^= 0x40
    with pytest.raises(CorruptSnapshotError):
        decode_snapshot(bytes(flipped))


def test_checkpoint_roundtrip_and_garbage(tmp_path: Path) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    write_checkpoint(path, {("a-b", 0): 10, ("x", 3): 7})
    assert path.read_text() == "0\n2\na-b 0 10\nx 3 7\n"
    assert read_checkpoint(path) == {("a-b", 0): 10, ("x", 3): 7}
    path.write_text("0\n3\nx 1 2\n")
    assert read_checkpoint(path) == {}
    assert read_checkpoint(tmp_path / "missing") == {}


def test_log_config_kafka_names_and_defaults() -> None:
    cfg = LogConfig()
    assert cfg.segment_bytes == 1 << 30
    assert cfg.max_message_bytes == 1048588
    assert cfg.ack_waits_for_fsync
    over = LogConfig.from_properties({"cleanup.policy": "delete,compact", "flush.messages": "10"})
    assert over.cleanup_policy is CleanupPolicy.COMPACT_DELETE
    assert not over.ack_waits_for_fsync
    assert over.to_properties()["cleanup.policy"] == "delete,compact"  # Kafka keeps the order given
    with pytest.raises(KafkaError) as e:
        LogConfig.from_properties({"segment.bytes": "tiny"})
    assert e.value.code == ErrorCode.INVALID_CONFIG
    with pytest.raises(KafkaError):
        LogConfig.from_properties({"no.such": "1"})


def test_a_checkpoint_that_is_not_text_is_ignored(tmp_path: Path) -> None:
    """Found by the disk fuzzer: a flipped byte made the file invalid UTF-8; the broker crashed at start."""
    path = tmp_path / "recovery-point-offset-checkpoint"
    write_checkpoint(path, {("t", 0): 42})
    data = bytearray(path.read_bytes())
    data[-3] = 0xA5
    path.write_bytes(bytes(data))
    assert read_checkpoint(path) == {}
