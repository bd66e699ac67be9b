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

Pending acknowledgements (exactly's transactional-ack extension, docs/share-transactional-acks.md) are
exactly's own record type, in its private range, written as a *transactional* batch of the producer whose
transaction holds them (as Kafka's TxnOffsetCommit writes pending offsets to `__consumer_offsets`); the
COMMIT/ABORT marker the transaction coordinator writes to the same partition decides them:

    key   := int16 type (100 = pending ack) | string GroupId | uuid TopicId | int32 Partition
             | int64 ProducerId
    value := int16 version (0) | string MemberId | int32 count | count x PendingAck
    PendingAck := int64 FirstOffset | int64 LastOffset | int8 AcknowledgeType (0 GAP, 1 ACCEPT,
                  2 RELEASE, 3 REJECT)

Kafka's share coordinator would refuse the unknown type; exactly's skips nothing it wrote. Replaying a
partition: a snapshot replaces its key's state; a pending-ack record adds to the producer's pending acks
of that partition; a COMMIT marker applies them to the states (`apply_acks`), ABORT drops them. What is
still pending at the end of the log belongs to open transactions (`pending_for`).

`ShareStateStore` is the pure shard: the latest state per key, replayed from the log.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from exactly.errors import CorruptRecordError
from exactly.group.share.partition import AckType, RecordState, SharePartition, ShareState, StateBatch
from exactly.protocol import primitives as p

__all__ = [
    "SHARE_STATE_TOPIC",
    "PendingAckRecord",
    "SharePartitionKey",
    "ShareStateStore",
    "StoredShareState",
    "apply_acks",
    "decode_key",
    "decode_pending",
    "decode_value",
    "encode_key",
    "encode_pending",
    "encode_value",
]

SHARE_STATE_TOPIC = "__share_group_state"

_SNAPSHOT = 0
_UPDATE = 1
_PENDING_ACK = 100
_PENDING = struct.Struct(">qqb")
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
        if kind not in (_SNAPSHOT, _UPDATE, _PENDING_ACK):
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


@dataclass(frozen=True, slots=True)
class PendingAckRecord:
    """Acknowledgements of `member_id`, held by producer `producer_id`'s transaction."""

    key: SharePartitionKey
    producer_id: int
    member_id: str
    acks: tuple[tuple[int, AckType], ...]  # (offset, type), one per offset


def encode_pending(record: PendingAckRecord) -> tuple[bytes, bytes]:
    """(key, value) of a pending-ack record; consecutive offsets of one type go as one range."""
    key = (
        struct.pack(">h", _PENDING_ACK)
        + p.string(record.key.group_id)
        + record.key.topic_id.bytes
        + struct.pack(">iq", record.key.partition, record.producer_id)
    )
    ranges: list[list[int]] = []
    for offset, kind in record.acks:
        if ranges and ranges[-1][1] == offset - 1 and ranges[-1][2] == kind:
            ranges[-1][1] = offset
        else:
            ranges.append([offset, offset, int(kind)])
    value = [struct.pack(">h", 0), p.string(record.member_id), struct.pack(">i", len(ranges))]
    value += [_PENDING.pack(*r) for r in ranges]
    return key, b"".join(value)


def decode_pending(raw_key: bytes, raw_value: bytes) -> PendingAckRecord:
    buf = memoryview(raw_key)
    try:
        (kind,) = struct.unpack_from(">h", buf, 0)
        if kind != _PENDING_ACK:
            raise CorruptRecordError(f"{SHARE_STATE_TOPIC}: record type {kind} is not a pending ack")
        group_id, pos = p.read_string(buf, 2)
        topic_id = uuid.UUID(bytes=bytes(buf[pos : pos + 16]))
        partition, producer_id = struct.unpack_from(">iq", buf, pos + 16)
        value = memoryview(raw_value)
        member_id, pos = p.read_string(value, 2)
        (count,) = struct.unpack_from(">i", value, pos)
        pos += 4
        acks: list[tuple[int, AckType]] = []
        for _ in range(count):
            first, last, ack = _PENDING.unpack_from(value, pos)
            pos += _PENDING.size
            acks += [(o, AckType(ack)) for o in range(first, last + 1)]
    except (struct.error, ValueError) as e:
        raise CorruptRecordError(f"{SHARE_STATE_TOPIC}: bad pending ack: {e}") from None
    return PendingAckRecord(
        SharePartitionKey(group_id, topic_id, partition), producer_id, member_id, tuple(acks)
    )


_NO_LIMIT = 1 << 15  # the store never archives at the delivery limit: the live partition does, at acquire


def apply_acks(state: ShareState, member_id: str, acks: Sequence[tuple[int, AckType]]) -> ShareState:
    """`state` after committed acknowledgements (a COMMIT marker replayed): each offset as the ack type
    makes it (ACCEPT: ACKNOWLEDGED, REJECT/GAP: ARCHIVED, RELEASE: AVAILABLE), SPSO moved past the
    terminal front of the window."""
    share = SharePartition(state, delivery_limit=_NO_LIMIT, max_in_flight=_NO_LIMIT)
    share.restore_pending(member_id, 0, acks)
    share.end_pending(0, commit=True)
    return share.snapshot()


class ShareStateStore:
    """The latest stored state of every share partition of the loaded partitions of the topic, and the
    pending acknowledgements of open transactions, by state partition and producer."""

    def __init__(self) -> None:
        self.states: dict[SharePartitionKey, StoredShareState] = {}
        self.pending: dict[tuple[int, int], list[PendingAckRecord]] = {}  # (partition, producer) -> acks

    def replay(
        self, raw_key: bytes, raw_value: bytes | None, partition: int = 0, producer_id: int = -1
    ) -> None:
        kind, key = decode_key(raw_key)
        if kind == _PENDING_ACK:
            if raw_value is not None and producer_id >= 0:
                record = decode_pending(raw_key, raw_value)
                self.pending.setdefault((partition, producer_id), []).append(record)
            return
        if raw_value is None:
            self.states.pop(key, None)
        elif kind == _SNAPSHOT:
            self.states[key] = decode_value(raw_value)

    def add_pending(self, partition: int, record: PendingAckRecord) -> None:
        self.pending.setdefault((partition, record.producer_id), []).append(record)

    def replay_marker(self, partition: int, producer_id: int, committed: bool) -> list[PendingAckRecord]:
        """A COMMIT/ABORT marker of `producer_id` in `partition`: its pending acks are decided (a commit
        applies them to the stored states). Returns them."""
        records = self.pending.pop((partition, producer_id), [])
        if committed:
            for record in records:
                stored = self.states.get(record.key)
                if stored is None:
                    continue
                state = apply_acks(stored.state, record.member_id, record.acks)
                self.states[record.key] = StoredShareState(
                    state,
                    stored.snapshot_epoch,
                    stored.state_epoch,
                    stored.leader_epoch,
                    stored.create_timestamp,
                    stored.write_timestamp,
                )
        return records

    def pending_for(self, key: SharePartitionKey) -> list[PendingAckRecord]:
        """The pending acks of open transactions on one share partition (to restore when it is made)."""
        return [r for records in self.pending.values() for r in records if r.key == key]

    def get(self, key: SharePartitionKey) -> StoredShareState | None:
        return self.states.get(key)

    def forget(self, belongs: Callable[[SharePartitionKey], bool]) -> None:
        """Drop the keys `belongs(key)` says are of an unloaded partition."""
        for key in [k for k in self.states if belongs(k)]:
            del self.states[key]
        for entry in [e for e, records in self.pending.items() if any(belongs(r.key) for r in records)]:
            del self.pending[entry]
