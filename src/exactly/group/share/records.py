"""`__share_group_state`: where share partitions keep their delivery state across restarts (KIP-932's
share coordinator), in Kafka's record formats.

Each record is one share partition's state, keyed by (group id, topic id, partition). Formats (Kafka's
`ShareSnapshotKey` / `ShareSnapshotValue`, share-coordinator/src/main/resources/common/message/; big
endian, strings with an int16 length, compact arrays and tagged fields as in the flexible protocol):

    key   := int16 type (0 = snapshot) | string GroupId | uuid TopicId | int32 Partition
    value := int16 version (0) | uint16 SnapshotEpoch | int32 StateEpoch | int32 LeaderEpoch
             | int64 StartOffset | int64 CreateTimestamp | int64 WriteTimestamp
             | compact array of StateBatch | tagged fields
    StateBatch := int64 FirstOffset | int64 LastOffset | int8 DeliveryState (0, 2, 4)
                  | int16 DeliveryCount | tagged fields

A null value (tombstone) deletes the state (DeleteShareGroupOffsets). exactly writes a full snapshot on
every change (Kafka's share coordinator writes ShareUpdate records, type 1, and a snapshot every
`share.coordinator.snapshot.update.records.per.snapshot`; exactly's snapshot-only log is the case of
that setting at 0), so the last record of a key is its whole state, and the topic may be compacted.
Records of type 1 (ShareUpdate) are never written and are skipped when read.

`ShareStateStore` is the pure shard: the latest state per key, replayed from the log.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from exactly.errors import CorruptRecordError
from exactly.group.share.partition import RecordState, ShareState, StateBatch
from exactly.protocol import primitives as p

__all__ = [
    "SHARE_STATE_TOPIC",
    "SharePartitionKey",
    "ShareStateStore",
    "StoredShareState",
    "decode_key",
    "decode_value",
    "encode_key",
    "encode_value",
]

SHARE_STATE_TOPIC = "__share_group_state"

_SNAPSHOT = 0
_UPDATE = 1
_HEAD = struct.Struct(">Hiiqqq")  # SnapshotEpoch, StateEpoch, LeaderEpoch, StartOffset, Create, Write
_BATCH = struct.Struct(">qqbh")


@dataclass(frozen=True, slots=True)
class SharePartitionKey:
    group_id: str
    topic_id: uuid.UUID
    partition: int


@dataclass(frozen=True, slots=True)
class StoredShareState:
    state: ShareState
    snapshot_epoch: int = 0
    state_epoch: int = 0
    leader_epoch: int = 0
    create_timestamp: int = 0
    write_timestamp: int = 0


def encode_key(key: SharePartitionKey) -> bytes:
    return (
        struct.pack(">h", _SNAPSHOT)
        + p.string(key.group_id)
        + key.topic_id.bytes
        + struct.pack(">i", key.partition)
    )


def decode_key(raw: bytes) -> tuple[int, SharePartitionKey]:
    """(record type, key); CorruptRecordError for anything else."""
    buf = memoryview(raw)
    try:
        (kind,) = struct.unpack_from(">h", buf, 0)
        if kind not in (_SNAPSHOT, _UPDATE):
            raise CorruptRecordError(f"{SHARE_STATE_TOPIC}: unknown record type {kind}")
        group_id, pos = p.read_string(buf, 2)
        topic_id = uuid.UUID(bytes=bytes(buf[pos : pos + 16]))
        (partition,) = struct.unpack_from(">i", buf, pos + 16)
    except (struct.error, ValueError) as e:
        raise CorruptRecordError(f"{SHARE_STATE_TOPIC}: bad key: {e}") from None
    return kind, SharePartitionKey(group_id, topic_id, partition)


def encode_value(stored: StoredShareState) -> bytes:
    out = [
        struct.pack(">h", 0),
        _HEAD.pack(
            stored.snapshot_epoch,
            stored.state_epoch,
            stored.leader_epoch,
            stored.state.start_offset,
            stored.create_timestamp,
            stored.write_timestamp,
        ),
        p.compact_array_len(len(stored.state.batches)),
    ]
    for batch in stored.state.batches:
        out.append(_BATCH.pack(batch.first_offset, batch.last_offset, int(batch.state), batch.delivery_count))
        out.append(b"\x00")  # no tagged fields
    out.append(b"\x00")
    return b"".join(out)


def _read_batches(buf: memoryview, pos: int) -> tuple[list[StateBatch], int]:
    count, pos = p.read_compact_array_len(buf, pos)
    batches = []
    for _ in range(max(count, 0)):
        first, last, state, delivered = _BATCH.unpack_from(buf, pos)
        pos = p.skip_tagged_fields(buf, pos + _BATCH.size)
        batches.append(StateBatch(first, last, RecordState(state), delivered))
    return batches, pos


def decode_value(raw: bytes) -> StoredShareState:
    """A ShareSnapshotValue."""
    buf = memoryview(raw)
    try:
        snapshot_epoch, state_epoch, leader_epoch, start, created, written = _HEAD.unpack_from(buf, 2)
        batches, _ = _read_batches(buf, 2 + _HEAD.size)
    except (struct.error, ValueError) as e:
        raise CorruptRecordError(f"{SHARE_STATE_TOPIC}: bad snapshot: {e}") from None
    return StoredShareState(
        ShareState(start, tuple(batches)), snapshot_epoch, state_epoch, leader_epoch, created, written
    )


class ShareStateStore:
    """The latest stored state of every share partition of the loaded partitions of the topic."""

    def __init__(self) -> None:
        self.states: dict[SharePartitionKey, StoredShareState] = {}

    def replay(self, raw_key: bytes, raw_value: bytes | None) -> None:
        kind, key = decode_key(raw_key)
        if raw_value is None:
            self.states.pop(key, None)
        elif kind == _SNAPSHOT:
            self.states[key] = decode_value(raw_value)

    def get(self, key: SharePartitionKey) -> StoredShareState | None:
        return self.states.get(key)

    def forget(self, belongs: Callable[[SharePartitionKey], bool]) -> None:
        """Drop the keys `belongs(key)` says are of an unloaded partition."""
        for key in [k for k in self.states if belongs(k)]:
            del self.states[key]
