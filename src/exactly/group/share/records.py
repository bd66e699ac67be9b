"""`__share_group_state`: where share partitions keep their delivery state across restarts and failovers
(KIP-932's share coordinator), in Kafka's record formats, plus exactly's pending acknowledgements.

Records are keyed by (group id, topic id, partition); the key's leading int16 is the record type. Formats
(Kafka's `ShareSnapshotKey`/`ShareSnapshotValue` and `ShareUpdateKey`/`ShareUpdateValue`,
share-coordinator/src/main/resources/common/message/; big endian, strings with an int16 length, compact
arrays and tagged fields as in the flexible protocol):

    key      := int16 type (0 = snapshot, 1 = update) | string GroupId | uuid TopicId | int32 Partition
    snapshot := int16 version (0) | uint16 SnapshotEpoch | int32 StateEpoch | int32 LeaderEpoch
                | int64 StartOffset | int64 CreateTimestamp | int64 WriteTimestamp
                | compact array of StateBatch | tagged fields
    update   := int16 version (0) | uint16 SnapshotEpoch | int32 LeaderEpoch
                | int64 StartOffset (-1: unchanged) | compact array of StateBatch | tagged fields
    StateBatch := int64 FirstOffset | int64 LastOffset | int8 DeliveryState (0, 2, 4)
                  | int16 DeliveryCount | tagged fields

A snapshot is a share partition's whole state; an update is a delta on top of the snapshot of the same
SnapshotEpoch: its batches replace the offsets they cover, its start offset (unless -1) moves SPSO and
drops what lies below it (`merge_batches`). The share coordinator (exactly.group.share.coordinator)
writes an update per WriteShareGroupState and a new snapshot (SnapshotEpoch + 1) after
`share.coordinator.snapshot.update.records.per.snapshot` updates, as Kafka's does. A null value
(tombstone) deletes the state (DeleteShareGroupState).

Pending acknowledgements (exactly's transactional-ack extension, docs/share-transactional-acks.md) are
exactly's own record type, in its private range, written as a *transactional* batch of the producer whose
transaction holds them (as Kafka's TxnOffsetCommit writes pending offsets to `__consumer_offsets`); the
COMMIT/ABORT marker the transaction coordinator writes to the same partition decides them:

    key        := int16 type (100 = pending ack) | string GroupId | uuid TopicId | int32 Partition
                  | int64 ProducerId
    value      := int16 version (0) | string MemberId | int32 count | count x PendingAck
    PendingAck := int64 FirstOffset | int64 LastOffset | int8 AcknowledgeType (0 GAP, 1 ACCEPT,
                  2 RELEASE, 3 REJECT)

Kafka's share coordinator would refuse the unknown type; exactly's reads every type it writes. Replaying a
partition in log order (`ShareCoordinatorShard.replay` / `replay_marker`): a snapshot replaces its key's
state, an update merges into it; a pending-ack record adds to the producer's pending acks of that
partition; a COMMIT marker applies them to the stored states (`apply_acks`, as a write of their new
states would), ABORT drops them. What is still pending at the end of the log belongs to open
transactions (`pending_for`).
"""

from __future__ import annotations

import base64
import struct
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from exactly.errors import CorruptRecordError
from exactly.group.share.partition import AckType, RecordState, SharePartition, ShareState, StateBatch
from exactly.protocol import primitives as p

__all__ = [
    "PENDING_ACK",
    "SHARE_STATE_TOPIC",
    "SNAPSHOT",
    "UPDATE",
    "PendingAckRecord",
    "SharePartitionKey",
    "ShareUpdate",
    "StoredShareState",
    "apply_acks",
    "coordinator_key",
    "decode_key",
    "decode_pending",
    "decode_update",
    "decode_value",
    "encode_key",
    "encode_pending",
    "encode_update",
    "encode_value",
    "merge_batches",
    "state_delta",
]

SHARE_STATE_TOPIC = "__share_group_state"

SNAPSHOT = 0  # record types (the key's leading int16)
UPDATE = 1
PENDING_ACK = 100  # exactly's: a pending acknowledgement of a producer's transaction
_PENDING = struct.Struct(">qqb")  # FirstOffset, LastOffset, AcknowledgeType
_HEAD = struct.Struct(">Hiiqqq")  # SnapshotEpoch, StateEpoch, LeaderEpoch, StartOffset, Create, Write
_UPDATE_HEAD = struct.Struct(">Hiq")  # SnapshotEpoch, LeaderEpoch, StartOffset
_BATCH = struct.Struct(">qqbh")


@dataclass(frozen=True, slots=True)
class SharePartitionKey:
    group_id: str
    topic_id: uuid.UUID
    partition: int


def coordinator_key(key: SharePartitionKey) -> str:
    """Kafka's `SharePartitionKey.asCoordinatorKey`: group:topicId:partition (the id as Kafka prints it),
    whose hash names the key's partition of `__share_group_state`."""
    printed = base64.urlsafe_b64encode(key.topic_id.bytes).rstrip(b"=").decode()
    return f"{key.group_id}:{printed}:{key.partition}"


@dataclass(frozen=True, slots=True)
class StoredShareState:
    state: ShareState
    snapshot_epoch: int = 0
    state_epoch: int = 0
    leader_epoch: int = 0
    create_timestamp: int = 0
    write_timestamp: int = 0


@dataclass(frozen=True, slots=True)
class ShareUpdate:
    """A ShareUpdateValue: a delta on top of the snapshot of `snapshot_epoch`."""

    snapshot_epoch: int
    leader_epoch: int
    start_offset: int  # -1: unchanged
    batches: tuple[StateBatch, ...] = ()


def encode_key(key: SharePartitionKey, kind: int = SNAPSHOT) -> bytes:
    return (
        struct.pack(">h", kind)
        + p.string(key.group_id)
        + key.topic_id.bytes
        + struct.pack(">i", key.partition)
    )


def decode_key(raw: bytes) -> tuple[int, SharePartitionKey]:
    """(record type, key); CorruptRecordError for anything else."""
    buf = memoryview(raw)
    try:
        (kind,) = struct.unpack_from(">h", buf, 0)
        if kind not in (SNAPSHOT, UPDATE, PENDING_ACK):
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
        *_encode_batches(stored.state.batches),
        b"\x00",
    ]
    return b"".join(out)


def _encode_batches(batches: tuple[StateBatch, ...]) -> list[bytes]:
    out = [p.compact_array_len(len(batches))]
    for batch in batches:
        out.append(_BATCH.pack(batch.first_offset, batch.last_offset, int(batch.state), batch.delivery_count))
        out.append(b"\x00")  # no tagged fields
    return out


def encode_update(update: ShareUpdate) -> bytes:
    head = _UPDATE_HEAD.pack(update.snapshot_epoch, update.leader_epoch, update.start_offset)
    return b"".join([struct.pack(">h", 0), head, *_encode_batches(update.batches), b"\x00"])


def decode_update(raw: bytes) -> ShareUpdate:
    """A ShareUpdateValue."""
    buf = memoryview(raw)
    try:
        snapshot_epoch, leader_epoch, start = _UPDATE_HEAD.unpack_from(buf, 2)
        batches, _ = _read_batches(buf, 2 + _UPDATE_HEAD.size)
    except (struct.error, ValueError) as e:
        raise CorruptRecordError(f"{SHARE_STATE_TOPIC}: bad update: {e}") from None
    return ShareUpdate(snapshot_epoch, leader_epoch, start, tuple(batches))


def merge_batches(
    old: tuple[StateBatch, ...], new: tuple[StateBatch, ...], start_offset: int
) -> tuple[StateBatch, ...]:
    """`old` with the offsets `new` covers replaced by `new`'s, nothing below `start_offset`, in offset
    order, neighbours of the same state and delivery count joined (Kafka's share coordinator merges an
    update into its snapshot the same way)."""
    pieces: list[StateBatch] = []
    for batch in old:
        parts = [(batch.first_offset, batch.last_offset)]
        for cover in new:
            cut: list[tuple[int, int]] = []
            for first, last in parts:
                if cover.last_offset < first or cover.first_offset > last:
                    cut.append((first, last))
                    continue
                if first < cover.first_offset:
                    cut.append((first, cover.first_offset - 1))
                if last > cover.last_offset:
                    cut.append((cover.last_offset + 1, last))
            parts = cut
        pieces.extend(StateBatch(f, la, batch.state, batch.delivery_count) for f, la in parts)
    pieces.extend(new)
    out: list[StateBatch] = []
    for batch in sorted(pieces, key=lambda b: b.first_offset):
        if batch.last_offset < start_offset:
            continue
        if batch.first_offset < start_offset:
            batch = StateBatch(start_offset, batch.last_offset, batch.state, batch.delivery_count)
        previous = out[-1] if out else None
        if (
            previous is not None
            and previous.last_offset + 1 == batch.first_offset
            and (previous.state, previous.delivery_count) == (batch.state, batch.delivery_count)
        ):
            out[-1] = StateBatch(
                previous.first_offset, batch.last_offset, previous.state, previous.delivery_count
            )
        else:
            out.append(batch)
    return tuple(out)


def state_delta(previous: ShareState | None, current: ShareState) -> tuple[StateBatch, ...]:
    """The batches of `current` that differ from `previous` (the state last stored): what a write must
    carry so that `merge_batches(previous.batches, delta, current.start_offset)` is `current`. The
    window only grows at its end and shrinks at its front, so unchanged offsets need not be sent."""
    if previous is None:
        return current.batches
    before: dict[int, tuple[RecordState, int]] = {}
    for batch in previous.batches:
        for offset in range(max(batch.first_offset, current.start_offset), batch.last_offset + 1):
            before[offset] = (batch.state, batch.delivery_count)
    out: list[StateBatch] = []
    for batch in current.batches:
        for offset in range(batch.first_offset, batch.last_offset + 1):
            if before.get(offset) == (batch.state, batch.delivery_count):
                continue
            last = out[-1] if out else None
            if (
                last is not None
                and last.last_offset + 1 == offset
                and (last.state, last.delivery_count) == (batch.state, batch.delivery_count)
            ):
                out[-1] = StateBatch(last.first_offset, offset, last.state, last.delivery_count)
            else:
                out.append(StateBatch(offset, offset, batch.state, batch.delivery_count))
    return tuple(out)


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
    key = encode_key(record.key, PENDING_ACK) + struct.pack(">q", record.producer_id)
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
    """A pending-ack record; CorruptRecordError for anything else."""
    kind, key = decode_key(raw_key)
    if kind != PENDING_ACK:
        raise CorruptRecordError(f"{SHARE_STATE_TOPIC}: record type {kind} is not a pending ack")
    try:
        (producer_id,) = struct.unpack_from(">q", raw_key, len(raw_key) - 8)
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
    return PendingAckRecord(key, producer_id, member_id, tuple(acks))


_NO_LIMIT = 1 << 15  # the stored state never archives at the delivery limit: the live partition does


def apply_acks(state: ShareState, member_id: str, acks: Sequence[tuple[int, AckType]]) -> ShareState:
    """`state` after committed acknowledgements (a COMMIT marker): each offset as the ack type makes it
    (ACCEPT: ACKNOWLEDGED, REJECT/GAP: ARCHIVED, RELEASE: AVAILABLE), SPSO moved past the terminal front
    of the window."""
    share = SharePartition(state, delivery_limit=_NO_LIMIT, max_in_flight=_NO_LIMIT)
    share.restore_pending(member_id, 0, acks)
    share.end_pending(0, commit=True)
    return share.snapshot()
