"""The KIP-848 consumer group's records in `__consumer_offsets` (record types 3-8), Kafka's bytes.

A consumer group is stored as a handful of small records rather than one GroupMetadata blob, so that a
heartbeat writes only what changed (Kafka's `group-coordinator/src/main/resources/common/message/`
`ConsumerGroup*Key.json` / `*Value.json`). Every key is an int16 *record type* followed by the key
message (version 0, not flexible: ``string`` = int16 length + UTF-8). Every value is an int16 value
version (0) followed by the value message, which is flexible: ``compact string`` = uvarint(length + 1)
+ UTF-8 (0 = null), ``compact array`` = uvarint(count + 1) then the elements, ``uuid`` = 16 bytes, and
every struct ends with its tagged fields (uvarint count, then tag, size, data). A null value is a
tombstone.

    type 3  ConsumerGroupMetadataKey(string group)
            -> Value v0: int32 epoch; tagged 0: int64 metadata_hash (default 0);
                         tagged 1: int64 creation_time_ms (default -1)
    type 4  ConsumerGroupPartitionMetadataKey(string group)              (Kafka 4.0's; read, never written)
            -> Value v0: topics[uuid topic_id, string topic_name, int32 num_partitions,
                                partition_metadata[int32 partition, racks[string]]]
    type 5  ConsumerGroupMemberMetadataKey(string group, string member_id)
            -> Value v0: nullable instance_id, nullable rack_id, client_id, client_host,
                         subscribed_topic_names[string], nullable subscribed_topic_regex,
                         int32 rebalance_timeout_ms, nullable server_assignor;
                         tagged 0: nullable classic_member_metadata{supported_protocols[name, bytes metadata]}
    type 6  ConsumerGroupTargetAssignmentMetadataKey(string group)
            -> Value v0: int32 assignment_epoch; tagged 0: int64 assignment_timestamp (default 0)
    type 7  ConsumerGroupTargetAssignmentMemberKey(string group, string member_id)
            -> Value v0: topic_partitions[uuid topic_id, partitions[int32]]
    type 8  ConsumerGroupCurrentMemberAssignmentKey(string group, string member_id)
            -> Value v0: int32 member_epoch, int32 previous_member_epoch, int8 state,
                         assigned_partitions[uuid topic_id, partitions[int32];
                                             tagged 0: nullable assignment_epochs[int32]],
                         partitions_pending_revocation[same]
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass
from typing import NamedTuple

from exactly.errors import CorruptRecordError, ProtocolError
from exactly.protocol import primitives as p

__all__ = [
    "CONSUMER_RECORD_TYPES",
    "ClassicProtocol",
    "ConsumerGroupCurrentMemberAssignmentKey",
    "ConsumerGroupCurrentMemberAssignmentValue",
    "ConsumerGroupMemberMetadataKey",
    "ConsumerGroupMemberMetadataValue",
    "ConsumerGroupMetadataKey",
    "ConsumerGroupMetadataValue",
    "ConsumerGroupPartitionMetadataKey",
    "ConsumerGroupPartitionMetadataValue",
    "ConsumerGroupTargetAssignmentMemberKey",
    "ConsumerGroupTargetAssignmentMemberValue",
    "ConsumerGroupTargetAssignmentMetadataKey",
    "ConsumerGroupTargetAssignmentMetadataValue",
    "ConsumerKey",
    "ConsumerValue",
    "TopicMetadata",
    "TopicPartitions",
    "decode_consumer_key",
    "decode_consumer_value",
    "encode_consumer_key",
    "encode_consumer_value",
]

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_I8 = struct.Struct(">b")
_VALUE_VERSION = 0


class TopicPartitions(NamedTuple):
    """One topic's partitions in an assignment; `epochs` (aligned with `partitions`): the member epoch
    at which each was assigned (type 8 only, KIP-1251's tagged AssignmentEpochs)."""

    topic_id: uuid.UUID
    partitions: tuple[int, ...]
    epochs: tuple[int, ...] | None = None


class TopicMetadata(NamedTuple):
    topic_id: uuid.UUID
    topic_name: str
    num_partitions: int


class ClassicProtocol(NamedTuple):
    name: str
    metadata: bytes


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupPartitionMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupMemberMetadataKey:
    group: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMemberKey:
    group: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupCurrentMemberAssignmentKey:
    group: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadataValue:
    epoch: int
    metadata_hash: int = 0
    creation_time_ms: int = -1


@dataclass(frozen=True, slots=True)
class ConsumerGroupPartitionMetadataValue:
    topics: tuple[TopicMetadata, ...] = ()


@dataclass(frozen=True, slots=True)
class ConsumerGroupMemberMetadataValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    classic_protocols: tuple[ClassicProtocol, ...] | None = None  # tagged ClassicMemberMetadata


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMetadataValue:
    assignment_epoch: int
    assignment_timestamp: int = 0


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMemberValue:
    topic_partitions: tuple[TopicPartitions, ...]


@dataclass(frozen=True, slots=True)
class ConsumerGroupCurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned_partitions: tuple[TopicPartitions, ...]
    partitions_pending_revocation: tuple[TopicPartitions, ...]


ConsumerKey = (
    ConsumerGroupMetadataKey
    | ConsumerGroupPartitionMetadataKey
    | ConsumerGroupMemberMetadataKey
    | ConsumerGroupTargetAssignmentMetadataKey
    | ConsumerGroupTargetAssignmentMemberKey
    | ConsumerGroupCurrentMemberAssignmentKey
)
ConsumerValue = (
    ConsumerGroupMetadataValue
    | ConsumerGroupPartitionMetadataValue
    | ConsumerGroupMemberMetadataValue
    | ConsumerGroupTargetAssignmentMetadataValue
    | ConsumerGroupTargetAssignmentMemberValue
    | ConsumerGroupCurrentMemberAssignmentValue
)

_KEY_TYPES: dict[type, int] = {
    ConsumerGroupMetadataKey: 3,
    ConsumerGroupPartitionMetadataKey: 4,
    ConsumerGroupMemberMetadataKey: 5,
    ConsumerGroupTargetAssignmentMetadataKey: 6,
    ConsumerGroupTargetAssignmentMemberKey: 7,
    ConsumerGroupCurrentMemberAssignmentKey: 8,
}
_VALUE_TYPES: dict[int, type] = {
    3: ConsumerGroupMetadataValue,
    4: ConsumerGroupPartitionMetadataValue,
    5: ConsumerGroupMemberMetadataValue,
    6: ConsumerGroupTargetAssignmentMetadataValue,
    7: ConsumerGroupTargetAssignmentMemberValue,
    8: ConsumerGroupCurrentMemberAssignmentValue,
}
CONSUMER_RECORD_TYPES = frozenset(_VALUE_TYPES)


def record_type(key: ConsumerKey) -> int:
    return _KEY_TYPES[type(key)]


def value_matches(key: ConsumerKey, value: object) -> bool:
    return isinstance(value, _VALUE_TYPES[record_type(key)])


# --- keys (not flexible) ------------------------------------------------------------------------------


def _key_string(text: str) -> bytes:
    raw = text.encode()
    if len(raw) > 0x7FFF:
        raise ValueError(f"string of {len(raw)} bytes is too long for an int16 length")
    return _I16.pack(len(raw)) + raw


def encode_consumer_key(key: ConsumerKey) -> bytes:
    out = _I16.pack(record_type(key)) + _key_string(key.group)
    if isinstance(
        key,
        ConsumerGroupMemberMetadataKey
        | ConsumerGroupTargetAssignmentMemberKey
        | ConsumerGroupCurrentMemberAssignmentKey,
    ):
        out += _key_string(key.member_id)
    return out


def decode_consumer_key(raw: bytes) -> ConsumerKey:
    buf = memoryview(raw)
    try:
        (kind,) = _I16.unpack_from(buf, 0)
        group, pos = p.read_string(buf, 2)
        member_id = ""
        if kind in (5, 7, 8):
            member_id, pos = p.read_string(buf, pos)
    except (struct.error, ProtocolError, UnicodeDecodeError) as e:
        raise CorruptRecordError(f"malformed consumer group key: {e}") from None
    if pos != len(buf):
        raise CorruptRecordError(f"{len(buf) - pos} trailing bytes in a consumer group key")
    match kind:
        case 3:
            return ConsumerGroupMetadataKey(group)
        case 4:
            return ConsumerGroupPartitionMetadataKey(group)
        case 5:
            return ConsumerGroupMemberMetadataKey(group, member_id)
        case 6:
            return ConsumerGroupTargetAssignmentMetadataKey(group)
        case 7:
            return ConsumerGroupTargetAssignmentMemberKey(group, member_id)
        case 8:
            return ConsumerGroupCurrentMemberAssignmentKey(group, member_id)
    raise CorruptRecordError(f"record type {kind} is not a consumer group record")


# --- values (flexible) --------------------------------------------------------------------------------


def _strings(values: tuple[str, ...]) -> list[bytes]:
    return [p.compact_array_len(len(values)), *(p.compact_string(v) for v in values)]


def _int32s(values: tuple[int, ...]) -> bytes:
    return p.compact_array_len(len(values)) + struct.pack(f">{len(values)}i", *values)


def _topic_partitions(values: tuple[TopicPartitions, ...], with_epochs: bool) -> list[bytes]:
    out = [p.compact_array_len(len(values))]
    for tp in values:
        out.append(tp.topic_id.bytes)
        out.append(_int32s(tp.partitions))
        tags: list[tuple[int, bytes]] = []
        if with_epochs and tp.epochs is not None:
            tags.append((0, _int32s(tp.epochs)))
        out.append(p.tagged_fields(tags))
    return out


def encode_consumer_value(value: ConsumerValue | None) -> bytes | None:
    if value is None:
        return None
    out: list[bytes] = [_I16.pack(_VALUE_VERSION)]
    tags: list[tuple[int, bytes]] = []
    match value:
        case ConsumerGroupMetadataValue():
            out.append(_I32.pack(value.epoch))
            if value.metadata_hash != 0:
                tags.append((0, _I64.pack(value.metadata_hash)))
            if value.creation_time_ms != -1:
                tags.append((1, _I64.pack(value.creation_time_ms)))
        case ConsumerGroupPartitionMetadataValue():
            out.append(p.compact_array_len(len(value.topics)))
            for topic in value.topics:
                out.append(topic.topic_id.bytes)
                out.append(p.compact_string(topic.topic_name))
                out.append(_I32.pack(topic.num_partitions))
                out.append(p.compact_array_len(0))  # no partition racks
                out.append(p.tagged_fields([]))
        case ConsumerGroupMemberMetadataValue():
            out.append(p.compact_nullable_string(value.instance_id))
            out.append(p.compact_nullable_string(value.rack_id))
            out.append(p.compact_string(value.client_id))
            out.append(p.compact_string(value.client_host))
            out.extend(_strings(value.subscribed_topic_names))
            out.append(p.compact_nullable_string(value.subscribed_topic_regex))
            out.append(_I32.pack(value.rebalance_timeout_ms))
            out.append(p.compact_nullable_string(value.server_assignor))
            if value.classic_protocols is not None:
                classic = [p.compact_array_len(len(value.classic_protocols))]
                for proto in value.classic_protocols:
                    classic += [p.compact_string(proto.name), p.compact_bytes(proto.metadata)]
                    classic.append(p.tagged_fields([]))
                classic.append(p.tagged_fields([]))
                tags.append((0, b"".join(classic)))
        case ConsumerGroupTargetAssignmentMetadataValue():
            out.append(_I32.pack(value.assignment_epoch))
            if value.assignment_timestamp != 0:
                tags.append((0, _I64.pack(value.assignment_timestamp)))
        case ConsumerGroupTargetAssignmentMemberValue():
            out.extend(_topic_partitions(value.topic_partitions, with_epochs=False))
        case ConsumerGroupCurrentMemberAssignmentValue():
            out.append(_I32.pack(value.member_epoch))
            out.append(_I32.pack(value.previous_member_epoch))
            out.append(_I8.pack(value.state))
            out.extend(_topic_partitions(value.assigned_partitions, with_epochs=True))
            out.extend(_topic_partitions(value.partitions_pending_revocation, with_epochs=True))
    out.append(p.tagged_fields(tags))
    return b"".join(out)


class _Reader:
    """Reads a flexible value; any malformation becomes CorruptRecordError."""

    __slots__ = ("buf", "pos")

    def __init__(self, raw: bytes) -> None:
        self.buf = memoryview(raw)
        self.pos = 0

    def fixed(self, s: struct.Struct) -> int:
        (v,) = s.unpack_from(self.buf, self.pos)
        self.pos += s.size
        return int(v)

    def string(self) -> str:
        v, self.pos = p.read_compact_string(self.buf, self.pos)
        return v

    def nullable_string(self) -> str | None:
        v, self.pos = p.read_compact_nullable_string(self.buf, self.pos)
        return v

    def bytes_(self) -> bytes:
        v, self.pos = p.read_compact_bytes(self.buf, self.pos)
        return bytes(v)

    def count(self, nullable: bool = False) -> int:
        n, self.pos = p.read_compact_array_len(self.buf, self.pos)
        if n < 0 and not nullable:
            raise CorruptRecordError("null in a non-nullable array")
        return n

    def uuid(self) -> uuid.UUID:
        raw = bytes(self.buf[self.pos : self.pos + 16])
        if len(raw) != 16:
            raise CorruptRecordError("truncated uuid")
        self.pos += 16
        return uuid.UUID(bytes=raw)

    def int32s(self) -> tuple[int, ...]:
        n = self.count()
        values = struct.unpack_from(f">{n}i", self.buf, self.pos)
        self.pos += 4 * n
        return tuple(values)

    def tags(self) -> dict[int, memoryview]:
        n, self.pos = p.read_uvarint(self.buf, self.pos)
        out: dict[int, memoryview] = {}
        for _ in range(n):
            tag, end, start = p.read_tag_header(self.buf, self.pos)
            out[tag] = self.buf[start:end]
            self.pos = end
        return out

    def topic_partitions(self) -> tuple[TopicPartitions, ...]:
        out = []
        for _ in range(self.count()):
            topic_id = self.uuid()
            partitions = self.int32s()
            epochs = None
            tag = self.tags().get(0)
            if tag is not None:
                inner = _Reader(bytes(tag))
                n = inner.count(nullable=True)
                if n >= 0:
                    epochs = tuple(struct.unpack_from(f">{n}i", inner.buf, inner.pos))
            out.append(TopicPartitions(topic_id, partitions, epochs))
        return tuple(out)


def decode_consumer_value(key: ConsumerKey, raw: bytes | None) -> ConsumerValue | None:
    if raw is None:
        return None
    r = _Reader(bytes(raw))
    try:
        version = r.fixed(_I16)
        if version != _VALUE_VERSION:
            raise CorruptRecordError(f"{type(key).__name__} value version {version} is not supported")
        value = _decode_value(key, r)
    except (struct.error, ProtocolError, UnicodeDecodeError, IndexError) as e:
        raise CorruptRecordError(f"malformed {type(key).__name__} value: {e}") from None
    if r.pos != len(r.buf):
        raise CorruptRecordError(f"{len(r.buf) - r.pos} trailing bytes in a {type(key).__name__} value")
    return value


def _decode_value(key: ConsumerKey, r: _Reader) -> ConsumerValue:
    match key:
        case ConsumerGroupMetadataKey():
            epoch = r.fixed(_I32)
            tags = r.tags()
            metadata_hash = _I64.unpack(tags[0])[0] if 0 in tags else 0
            created = _I64.unpack(tags[1])[0] if 1 in tags else -1
            return ConsumerGroupMetadataValue(epoch, metadata_hash, created)
        case ConsumerGroupPartitionMetadataKey():
            topics = []
            for _ in range(r.count()):
                topic_id = r.uuid()
                name = r.string()
                num = r.fixed(_I32)
                for _ in range(r.count()):  # partition racks: not kept
                    r.fixed(_I32)
                    for _ in range(r.count()):
                        r.string()
                    r.tags()
                r.tags()
                topics.append(TopicMetadata(topic_id, name, num))
            r.tags()
            return ConsumerGroupPartitionMetadataValue(tuple(topics))
        case ConsumerGroupMemberMetadataKey():
            instance_id = r.nullable_string()
            rack_id = r.nullable_string()
            client_id = r.string()
            client_host = r.string()
            names = tuple(r.string() for _ in range(r.count()))
            regex = r.nullable_string()
            rebalance_timeout = r.fixed(_I32)
            assignor = r.nullable_string()
            classic: tuple[ClassicProtocol, ...] | None = None
            tag = r.tags().get(0)
            if tag is not None:
                inner = _Reader(bytes(tag))
                protocols = []
                for _ in range(inner.count()):
                    protocols.append(ClassicProtocol(inner.string(), inner.bytes_()))
                    inner.tags()
                inner.tags()
                classic = tuple(protocols)
            return ConsumerGroupMemberMetadataValue(
                instance_id,
                rack_id,
                client_id,
                client_host,
                names,
                regex,
                rebalance_timeout,
                assignor,
                classic,
            )
        case ConsumerGroupTargetAssignmentMetadataKey():
            epoch = r.fixed(_I32)
            tags = r.tags()
            timestamp = _I64.unpack(tags[0])[0] if 0 in tags else 0
            return ConsumerGroupTargetAssignmentMetadataValue(epoch, timestamp)
        case ConsumerGroupTargetAssignmentMemberKey():
            partitions = r.topic_partitions()
            r.tags()
            return ConsumerGroupTargetAssignmentMemberValue(partitions)
        case ConsumerGroupCurrentMemberAssignmentKey():
            member_epoch = r.fixed(_I32)
            previous = r.fixed(_I32)
            state = r.fixed(_I8)
            assigned = r.topic_partitions()
            pending = r.topic_partitions()
            r.tags()
            return ConsumerGroupCurrentMemberAssignmentValue(member_epoch, previous, state, assigned, pending)
