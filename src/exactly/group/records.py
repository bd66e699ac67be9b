"""The records of `__consumer_offsets`: Kafka's key and value formats, byte for byte.

Every record is one Kafka record (key + value) inside an ordinary RecordBatch v2; the key's leading
version tells what the record is. All integers are big-endian; ``string`` is ``int16 length`` + UTF-8
bytes, ``nullable string`` uses length -1 for null, ``bytes`` is ``int32 length`` + bytes. None of these
versions is flexible (no compact encodings, no tagged fields).

Keys (`group-coordinator/src/main/resources/common/message/*Key.json`)::

    OffsetCommitKey v0/v1 (the committed offset of one partition; exactly writes v1)
        int16   version              0 or 1 (same layout)
        string  group
        string  topic
        int32   partition

    GroupMetadataKey v2 (a classic group's last stored generation)
        int16   version              2
        string  group

Values (a null value is a tombstone: the offset, or the whole group, is deleted)::

    OffsetCommitValue v0..v3 (exactly writes v3, or v1 when OffsetCommit v2-4 asked for a retention time)
        int16   version
        int64   offset
        int32   leader_epoch         v3+ (-1 = unknown)
        string  metadata
        int64   commit_timestamp     wall clock, ms
        int64   expire_timestamp     v1 only (-1 = the broker's offsets.retention.minutes applies)

    GroupMetadataValue v0..v3 (exactly writes v3)
        int16   version
        string  protocol_type        "" for a group without one
        int32   generation
        nullable string protocol     the selected protocol (null when the group is empty)
        nullable string leader       the leader's member id (null when the group is empty)
        int64   current_state_timestamp   v2+ (-1 = unknown): when the group entered its state, wall ms
        int32   member count, then per member:
            string  member_id
            nullable string group_instance_id   v3+ (static membership)
            string  client_id
            string  client_host
            int32   rebalance_timeout            v1+
            int32   session_timeout
            bytes   subscription                 the member's metadata for the selected protocol
            bytes   assignment                   what the leader assigned to it

Key versions 3-8 are the KIP-848 consumer group's records (`consumer/records.py` describes their
formats; their values are flexible). Other key versions (share groups, regular expressions) are not
exactly's; reading one raises `UnknownRecordError` and the loader skips it. Malformed bytes raise
`CorruptRecordError`.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from exactly.errors import CorruptRecordError, ErrorCode, ExactlyError
from exactly.group.consumer.records import (
    CONSUMER_RECORD_TYPES,
    ConsumerKey,
    ConsumerValue,
    decode_consumer_key,
    decode_consumer_value,
    encode_consumer_key,
    encode_consumer_value,
    value_matches,
)
from exactly.records.batch import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, RecordBatch
from exactly.records.builder import BatchBuilder

__all__ = [
    "CoordinatorRecord",
    "GroupMetadataKey",
    "GroupMetadataValue",
    "MemberMetadata",
    "OffsetCommitKey",
    "OffsetCommitValue",
    "UnknownRecordError",
    "build_batch",
    "decode_key",
    "decode_record",
    "decode_value",
    "encode_key",
    "encode_record",
    "encode_value",
    "offset_key_fields",
    "offset_value_fields",
    "read_batch",
]

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_METADATA_VALUE_VERSION = 3

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_I16_I32 = struct.Struct(">hi")


class UnknownRecordError(ExactlyError):
    """A record whose key version is not one of the classic group coordinator's."""


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


class OffsetCommitValue(NamedTuple):  # a tuple: the loader builds millions of them
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1  # only stored (as value v1) when it is not -1


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[MemberMetadata, ...] = ()


ClassicKey = OffsetCommitKey | GroupMetadataKey
Key = OffsetCommitKey | GroupMetadataKey | ConsumerKey
Value = OffsetCommitValue | GroupMetadataValue | ConsumerValue


@dataclass(frozen=True, slots=True)
class CoordinatorRecord:
    """One record of `__consumer_offsets`; `value` None is a tombstone."""

    key: Key
    value: Value | None

    def __post_init__(self) -> None:
        value = self.value
        if value is None:
            return
        key = self.key
        if isinstance(key, OffsetCommitKey):
            fits = isinstance(value, OffsetCommitValue)
        elif isinstance(key, GroupMetadataKey):
            fits = isinstance(value, GroupMetadataValue)
        else:
            fits = value_matches(key, value)
        if not fits:
            raise TypeError(f"{type(value).__name__} cannot go with {type(key).__name__}")


# --- encoding ------------------------------------------------------------------------------------------


def _string(out: bytearray, text: str) -> None:
    raw = text.encode()
    if len(raw) > 0x7FFF:
        raise ValueError(f"string of {len(raw)} bytes is too long for an int16 length")
    out += _I16.pack(len(raw))
    out += raw


def _nullable_string(out: bytearray, text: str | None) -> None:
    if text is None:
        out += _I16.pack(-1)
    else:
        _string(out, text)


def _bytes(out: bytearray, data: bytes) -> None:
    out += _I32.pack(len(data))
    out += data


def encode_key(key: Key) -> bytes:
    out = bytearray()
    if not isinstance(key, OffsetCommitKey | GroupMetadataKey):
        return encode_consumer_key(key)
    if isinstance(key, OffsetCommitKey):
        out += _I16.pack(OFFSET_COMMIT_KEY_VERSION)
        _string(out, key.group)
        _string(out, key.topic)
        out += _I32.pack(key.partition)
    else:
        out += _I16.pack(GROUP_METADATA_KEY_VERSION)
        _string(out, key.group)
    return bytes(out)


def encode_value(value: Value | None) -> bytes | None:
    if value is None:
        return None
    if not isinstance(value, OffsetCommitValue | GroupMetadataValue):
        return encode_consumer_value(value)
    out = bytearray()
    if isinstance(value, OffsetCommitValue):
        if value.expire_timestamp != -1:
            out += _I16.pack(OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY)
            out += _I64.pack(value.offset)
            _string(out, value.metadata)
            out += _I64.pack(value.commit_timestamp)
            out += _I64.pack(value.expire_timestamp)
        else:
            out += _I16.pack(OFFSET_COMMIT_VALUE_VERSION)
            out += _I64.pack(value.offset)
            out += _I32.pack(value.leader_epoch)
            _string(out, value.metadata)
            out += _I64.pack(value.commit_timestamp)
        return bytes(out)
    out += _I16.pack(GROUP_METADATA_VALUE_VERSION)
    _string(out, value.protocol_type)
    out += _I32.pack(value.generation)
    _nullable_string(out, value.protocol)
    _nullable_string(out, value.leader)
    out += _I64.pack(value.current_state_timestamp)
    out += _I32.pack(len(value.members))
    for m in value.members:
        _string(out, m.member_id)
        _nullable_string(out, m.group_instance_id)
        _string(out, m.client_id)
        _string(out, m.client_host)
        out += _I32.pack(m.rebalance_timeout)
        out += _I32.pack(m.session_timeout)
        _bytes(out, m.subscription)
        _bytes(out, m.assignment)
    return bytes(out)


def encode_record(record: CoordinatorRecord) -> tuple[bytes, bytes | None]:
    return encode_key(record.key), encode_value(record.value)


# --- decoding ------------------------------------------------------------------------------------------


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 0

    def need(self, n: int) -> None:
        if self.pos + n > len(self.buf):
            raise CorruptRecordError(
                f"__consumer_offsets record truncated at byte {self.pos}", ErrorCode.CORRUPT_MESSAGE
            )

    def i16(self) -> int:
        self.need(2)
        (v,) = _I16.unpack_from(self.buf, self.pos)
        self.pos += 2
        return int(v)

    def i32(self) -> int:
        self.need(4)
        (v,) = _I32.unpack_from(self.buf, self.pos)
        self.pos += 4
        return int(v)

    def i64(self) -> int:
        self.need(8)
        (v,) = _I64.unpack_from(self.buf, self.pos)
        self.pos += 8
        return int(v)

    def nullable_string(self) -> str | None:
        n = self.i16()
        if n < 0:
            if n != -1:
                raise CorruptRecordError(f"bad string length {n}")
            return None
        self.need(n)
        raw = self.buf[self.pos : self.pos + n]
        self.pos += n
        try:
            return raw.decode()
        except UnicodeDecodeError as e:
            raise CorruptRecordError(f"string is not UTF-8: {e}") from None

    def string(self) -> str:
        text = self.nullable_string()
        if text is None:
            raise CorruptRecordError("null where a string is required")
        return text

    def bytes_(self) -> bytes:
        n = self.i32()
        if n < 0:
            raise CorruptRecordError(f"bad bytes length {n}")
        self.need(n)
        raw = self.buf[self.pos : self.pos + n]
        self.pos += n
        return raw

    def end(self) -> None:
        if self.pos != len(self.buf):
            raise CorruptRecordError(
                f"{len(self.buf) - self.pos} trailing bytes in __consumer_offsets record"
            )


_KEY_HEAD = struct.Struct(">hh")
_VALUE_V3_HEAD = struct.Struct(">hqih")
_DECODE_ERRORS = (struct.error, UnicodeDecodeError, ValueError)


def offset_key_fields(raw: bytes) -> tuple[str, str, int] | None:
    """(group, topic, partition) of an OffsetCommitKey v0/v1 in straight-line code (the loader reads
    millions of them); None for anything else, which the checked path (`decode_key`) handles."""
    try:
        version, n = _KEY_HEAD.unpack_from(raw, 0)
        if version not in (0, 1) or n < 0:
            return None
        group = raw[4 : 4 + n].decode()
        pos = 4 + n
        (m,) = _I16.unpack_from(raw, pos)
        topic = raw[pos + 2 : pos + 2 + m].decode()
        pos += 2 + m
        (partition,) = _I32.unpack_from(raw, pos)
    except _DECODE_ERRORS:
        return None
    if m < 0 or pos + 4 != len(raw):
        return None
    return group, topic, partition


def offset_value_fields(raw: bytes) -> tuple[int, int, str, int] | None:
    """(offset, leader epoch, metadata, commit timestamp) of an OffsetCommitValue v3, straight-line;
    None for anything else (other versions, malformed), which `decode_value` handles."""
    try:
        version, offset, leader_epoch, n = _VALUE_V3_HEAD.unpack_from(raw, 0)
        if version != 3 or n < 0:
            return None
        metadata = raw[16 : 16 + n].decode()
        (timestamp,) = _I64.unpack_from(raw, 16 + n)
    except _DECODE_ERRORS:
        return None
    if 24 + n != len(raw):
        return None
    return offset, leader_epoch, metadata, timestamp


def decode_key(raw: bytes) -> Key:
    raw = bytes(raw)
    fields = offset_key_fields(raw)
    if fields is not None:
        return OffsetCommitKey(*fields)
    r = _Reader(raw)
    version = r.i16()
    if version in (0, 1):
        key: Key = OffsetCommitKey(r.string(), r.string(), r.i32())
    elif version == 2:
        key = GroupMetadataKey(r.string())
    elif version in CONSUMER_RECORD_TYPES:
        return decode_consumer_key(raw)
    else:
        raise UnknownRecordError(f"__consumer_offsets key version {version} is not a classic group record")
    r.end()
    return key


def decode_value(key: Key, raw: bytes | None) -> Value | None:
    if raw is None:
        return None
    raw = bytes(raw)
    if not isinstance(key, OffsetCommitKey | GroupMetadataKey):
        return decode_consumer_value(key, raw)
    if isinstance(key, OffsetCommitKey):
        fields = offset_value_fields(raw)
        if fields is not None:
            return OffsetCommitValue(*fields)
    r = _Reader(raw)
    version = r.i16()
    value: Value
    if isinstance(key, OffsetCommitKey):
        if not 0 <= version <= 3:
            raise CorruptRecordError(f"OffsetCommitValue version {version} is not supported")
        offset = r.i64()
        leader_epoch = r.i32() if version >= 3 else -1
        metadata = r.string()
        commit_timestamp = r.i64()
        expire_timestamp = r.i64() if version == 1 else -1
        value = OffsetCommitValue(offset, leader_epoch, metadata, commit_timestamp, expire_timestamp)
    else:
        if not 0 <= version <= 3:
            raise CorruptRecordError(f"GroupMetadataValue version {version} is not supported")
        protocol_type = r.string()
        generation = r.i32()
        protocol = r.nullable_string()
        leader = r.nullable_string()
        timestamp = r.i64() if version >= 2 else -1
        count = r.i32()
        if count < 0:
            raise CorruptRecordError(f"bad member count {count}")
        members = []
        for _ in range(count):
            member_id = r.string()
            instance_id = r.nullable_string() if version >= 3 else None
            client_id = r.string()
            client_host = r.string()
            rebalance_timeout = r.i32() if version >= 1 else -1
            session_timeout = r.i32()
            subscription = r.bytes_()
            assignment = r.bytes_()
            members.append(
                MemberMetadata(
                    member_id,
                    instance_id,
                    client_id,
                    client_host,
                    rebalance_timeout,
                    session_timeout,
                    subscription,
                    assignment,
                )
            )
        value = GroupMetadataValue(protocol_type, generation, protocol, leader, timestamp, tuple(members))
    r.end()
    return value


def decode_record(key: bytes, value: bytes | None) -> CoordinatorRecord:
    k = decode_key(key)
    return CoordinatorRecord(k, decode_value(k, value))


# --- batches -------------------------------------------------------------------------------------------


def build_batch(
    records: Sequence[CoordinatorRecord],
    timestamp_ms: int,
    *,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = -1,
    transactional: bool = False,
) -> bytes:
    """One uncompressed batch holding `records` (a transactional offset commit sets the producer)."""
    builder = BatchBuilder(
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        is_transactional=transactional,
    )
    for record in records:
        key, value = encode_record(record)
        builder.append(timestamp_ms, key, value)
    return builder.build()


def read_batch(batch: RecordBatch) -> Iterator[tuple[int, CoordinatorRecord | None]]:
    """(offset, record) for every record of a data batch; record None for a key that is not ours."""
    for rec in batch.records():
        if rec.key is None:
            raise CorruptRecordError(f"__consumer_offsets record at offset {rec.offset} has no key")
        try:
            yield rec.offset, decode_record(rec.key, rec.value)
        except UnknownRecordError:
            yield rec.offset, None
