"""RecordBatch v2 (magic 2): a zero-copy view over one batch, header patching, and batch iteration.

Wire format (`DefaultRecordBatch.java`; all integers big-endian)::

    RecordBatch =>
      offset  size
         0     8   baseOffset            int64  offset of the first record (the broker assigns it)
         8     4   batchLength           int32  bytes after this field (= size_in_bytes - 12)
        12     4   partitionLeaderEpoch  int32  (the broker assigns it)
        16     1   magic                 int8   = 2
        17     4   crc                   uint32 CRC-32C (Castagnoli) of bytes [21, end of batch)
        21     2   attributes            int16  see below
        23     4   lastOffsetDelta       int32  offset of the last record - baseOffset
        27     8   baseTimestamp         int64  timestamp of the first record
        35     8   maxTimestamp          int64  max record timestamp (LogAppendTime: the append time)
        43     8   producerId            int64  -1 = none
        51     2   producerEpoch         int16  -1 = none
        53     4   baseSequence          int32  -1 = none
        57     4   recordsCount          int32
        61     ... records               Record[recordsCount] (see record.py), compressed as one blob
                                         when attributes & 0x07 != 0

    attributes (int16):
        bits 0-2  compression codec: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd
        bit  3    timestamp type: 0 CreateTime, 1 LogAppendTime
        bit  4    isTransactional
        bit  5    isControl (the batch holds one control record: COMMIT / ABORT marker)
        bit  6    hasDeleteHorizonMs (compaction; baseTimestamp then holds the delete horizon)

    CRC span: bytes [21, 12 + batchLength). baseOffset, batchLength, partitionLeaderEpoch and magic are
    outside it, so the broker can assign offsets and leader epochs without recomputing the CRC.

Errors (codes as Kafka uses them): a truncated batch, bad batchLength or CRC mismatch is
CORRUPT_MESSAGE; magic 0/1 is UNSUPPORTED_FOR_MESSAGE_FORMAT; inconsistent counts/offsets and malformed
records are INVALID_RECORD. Only `CorruptRecordError` is ever raised on malformed input.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from enum import IntEnum

import crc32c

from exactly.errors import CorruptRecordError, ErrorCode
from exactly.records.compression import DEFAULT_MAX_DECOMPRESSED_SIZE, Compression, decompress
from exactly.records.record import Record, decode_records

__all__ = [
    "ATTR_COMPRESSION_MASK",
    "ATTR_CONTROL",
    "ATTR_DELETE_HORIZON",
    "ATTR_TIMESTAMP_TYPE",
    "ATTR_TRANSACTIONAL",
    "BATCH_HEADER_SIZE",
    "CRC_OFFSET",
    "CRC_START",
    "LOG_OVERHEAD",
    "MAGIC",
    "MIN_BATCH_LENGTH",
    "NO_PARTITION_LEADER_EPOCH",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "NO_SEQUENCE",
    "NO_TIMESTAMP",
    "BatchHeader",
    "Compression",
    "RecordBatch",
    "TimestampType",
    "increment_sequence",
    "iter_batches",
    "set_base_offset",
    "set_crc",
    "set_log_append_time",
    "set_partition_leader_epoch",
]

BATCH_HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset (8) + batchLength (4)
MAGIC = 2
MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - LOG_OVERHEAD  # 49

ATTR_COMPRESSION_MASK = 0x07
ATTR_TIMESTAMP_TYPE = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
ATTR_DELETE_HORIZON = 0x40

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_TIMESTAMP = -1
NO_PARTITION_LEADER_EPOCH = -1

# Field offsets inside a batch.
BASE_OFFSET_OFFSET = 0
LENGTH_OFFSET = 8
PARTITION_LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
CRC_START = ATTRIBUTES_OFFSET
LAST_OFFSET_DELTA_OFFSET = 23
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_ID_OFFSET = 43
PRODUCER_EPOCH_OFFSET = 51
BASE_SEQUENCE_OFFSET = 53
RECORDS_COUNT_OFFSET = 57

_INT32_MAX = (1 << 31) - 1

HEADER_STRUCT = struct.Struct(">qiibIhiqqqhii")  # the whole 61-byte header
_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_LENGTH_EPOCH_MAGIC = struct.Struct(">iib")  # batchLength, partitionLeaderEpoch, magic at +8
_ATTRS_LAST_DELTA = struct.Struct(">hi")  # attributes, lastOffsetDelta at +21
_PRODUCER = struct.Struct(">qhi")  # producerId, producerEpoch, baseSequence at +43

_i16_from = _I16.unpack_from
_i32_from = _I32.unpack_from
_u32_from = _U32.unpack_from
_i64_from = _I64.unpack_from

Buffer = bytes | bytearray | memoryview
WritableBuffer = bytearray | memoryview


class TimestampType(IntEnum):
    """Attributes bit 3."""

    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


def increment_sequence(sequence: int, increment: int) -> int:
    """``sequence + increment``, wrapping past INT32_MAX to 0 (`DefaultRecordBatch.incrementSequence`)."""
    if sequence > _INT32_MAX - increment:
        return increment - (_INT32_MAX - sequence) - 1
    return sequence + increment


def _compression_of(attributes: int) -> Compression:
    codec = attributes & ATTR_COMPRESSION_MASK
    if codec > Compression.ZSTD:
        raise CorruptRecordError(f"unknown compression codec id {codec}")
    return Compression(codec)


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """A snapshot of all 61 header bytes, decoded."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def compression(self) -> Compression:
        return _compression_of(self.attributes)

    @property
    def timestamp_type(self) -> TimestampType:
        return TimestampType((self.attributes >> 3) & 1)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def size_in_bytes(self) -> int:
        return self.batch_length + LOG_OVERHEAD


class RecordBatch:
    """Zero-copy view over one v2 batch at ``buf[pos:]``.

    Every property reads the underlying buffer when accessed, so a view stays correct after the buffer is
    patched in place (`set_base_offset` and friends). The constructor checks only what is needed to know
    the batch's extent: that the header and the declared length fit in ``buf``, the magic byte, and that
    batchLength is at least the header size. Call `validate` (CRC + structure) before trusting the rest.
    """

    __slots__ = ("_buf", "_end", "_pos")

    def __init__(self, buf: Buffer, pos: int = 0) -> None:
        available = len(buf) - pos
        if pos < 0 or available < MAGIC_OFFSET + 1:
            raise CorruptRecordError(
                f"record batch at position {pos} is truncated: {max(available, 0)} bytes available"
            )
        length, _epoch, magic = _LENGTH_EPOCH_MAGIC.unpack_from(buf, pos + LENGTH_OFFSET)
        if magic != MAGIC:
            if magic in (0, 1):
                raise CorruptRecordError(
                    f"message format v{magic} (magic {magic}) is not supported; only magic 2",
                    ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT,
                )
            raise CorruptRecordError(f"invalid magic {magic} in record batch at position {pos}")
        if length < MIN_BATCH_LENGTH:
            raise CorruptRecordError(
                f"record batch size {length + LOG_OVERHEAD} is less than the minimum {BATCH_HEADER_SIZE}"
            )
        if length + LOG_OVERHEAD > available:
            raise CorruptRecordError(
                f"record batch at position {pos} is truncated: declares {length + LOG_OVERHEAD} bytes, "
                f"{available} available"
            )
        self._buf: Buffer = buf
        self._pos: int = pos
        self._end: int = pos + LOG_OVERHEAD + length

    def __repr__(self) -> str:
        return (
            f"RecordBatch(base_offset={self.base_offset}, records_count={self.records_count}, "
            f"size_in_bytes={self.size_in_bytes}, attributes={self.attributes:#x}, "
            f"producer_id={self.producer_id}, producer_epoch={self.producer_epoch}, "
            f"base_sequence={self.base_sequence})"
        )

    # --- raw fields ------------------------------------------------------------------------------------

    @property
    def position(self) -> int:
        """Position of this batch in the buffer it was created on."""
        return self._pos

    @property
    def end(self) -> int:
        """Position just after this batch in the buffer it was created on."""
        return self._end

    @property
    def base_offset(self) -> int:
        value: int = _i64_from(self._buf, self._pos)[0]
        return value

    @property
    def batch_length(self) -> int:
        return self._end - self._pos - LOG_OVERHEAD

    @property
    def size_in_bytes(self) -> int:
        return self._end - self._pos

    @property
    def partition_leader_epoch(self) -> int:
        value: int = _i32_from(self._buf, self._pos + PARTITION_LEADER_EPOCH_OFFSET)[0]
        return value

    @property
    def magic(self) -> int:
        value: int = _I8.unpack_from(self._buf, self._pos + MAGIC_OFFSET)[0]
        return value

    @property
    def crc(self) -> int:
        value: int = _u32_from(self._buf, self._pos + CRC_OFFSET)[0]
        return value

    @property
    def attributes(self) -> int:
        value: int = _i16_from(self._buf, self._pos + ATTRIBUTES_OFFSET)[0]
        return value

    @property
    def last_offset_delta(self) -> int:
        value: int = _i32_from(self._buf, self._pos + LAST_OFFSET_DELTA_OFFSET)[0]
        return value

    @property
    def base_timestamp(self) -> int:
        value: int = _i64_from(self._buf, self._pos + BASE_TIMESTAMP_OFFSET)[0]
        return value

    @property
    def max_timestamp(self) -> int:
        value: int = _i64_from(self._buf, self._pos + MAX_TIMESTAMP_OFFSET)[0]
        return value

    @property
    def producer_id(self) -> int:
        value: int = _i64_from(self._buf, self._pos + PRODUCER_ID_OFFSET)[0]
        return value

    @property
    def producer_epoch(self) -> int:
        value: int = _i16_from(self._buf, self._pos + PRODUCER_EPOCH_OFFSET)[0]
        return value

    @property
    def base_sequence(self) -> int:
        value: int = _i32_from(self._buf, self._pos + BASE_SEQUENCE_OFFSET)[0]
        return value

    @property
    def records_count(self) -> int:
        value: int = _i32_from(self._buf, self._pos + RECORDS_COUNT_OFFSET)[0]
        return value

    # --- derived ---------------------------------------------------------------------------------------

    @property
    def compression(self) -> Compression:
        """The codec; CorruptRecordError for the unused ids 5-7."""
        return _compression_of(self.attributes)

    @property
    def timestamp_type(self) -> TimestampType:
        return TimestampType((self.attributes >> 3) & 1)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & ATTR_DELETE_HORIZON)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id > NO_PRODUCER_ID

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def last_sequence(self) -> int:
        """baseSequence + lastOffsetDelta, wrapping past INT32_MAX to 0; -1 if there is no sequence."""
        base = self.base_sequence
        if base == NO_SEQUENCE:
            return NO_SEQUENCE
        return increment_sequence(base, self.last_offset_delta)

    @property
    def buffer(self) -> memoryview:
        """This batch's bytes (a view, no copy)."""
        return memoryview(self._buf)[self._pos : self._end]

    def header(self) -> BatchHeader:
        """Decode all header fields at once."""
        return BatchHeader(*HEADER_STRUCT.unpack_from(self._buf, self._pos))

    # --- integrity -------------------------------------------------------------------------------------

    def compute_crc(self) -> int:
        """CRC-32C of bytes [21, end), computed over a memoryview (no copy)."""
        return int(crc32c.crc32c(memoryview(self._buf)[self._pos + CRC_START : self._end]))

    def is_valid_crc(self) -> bool:
        return self.compute_crc() == self.crc

    def verify_crc(self) -> None:
        """Raise CorruptRecordError (CORRUPT_MESSAGE) if the stored CRC does not match the content."""
        computed = self.compute_crc()
        stored = self.crc
        if computed != stored:
            raise CorruptRecordError(
                f"record batch is corrupt (stored crc = {stored}, computed crc = {computed})"
            )

    def validate(self, *, from_client: bool = False) -> None:
        """CRC plus header consistency (`DefaultRecordBatch.ensureValid` + `LogValidator.validateBatch`).

        Always checked: CRC (CORRUPT_MESSAGE), known compression codec, recordsCount >= 0, no more records
        than offsets (lastOffsetDelta >= recordsCount - 1: a compacted batch may hold fewer), producer
        epoch/sequence present when a producer id is (INVALID_RECORD).

        ``from_client=True`` adds the checks Kafka applies to a producer's append: at least one record,
        one record per offset (lastOffsetDelta == recordsCount - 1), no control batch, and baseSequence >= 0
        when a producer id is set (all INVALID_RECORD).
        Records themselves are not decoded; `records` checks them.
        """
        self.verify_crc()
        (
            base_offset,
            _length,
            _epoch,
            _magic,
            _crc,
            attributes,
            last_offset_delta,
            _base_ts,
            _max_ts,
            producer_id,
            _producer_epoch,
            base_sequence,
            count,
        ) = HEADER_STRUCT.unpack_from(self._buf, self._pos)
        _compression_of(attributes)
        if count < 0:
            raise CorruptRecordError(
                f"invalid reported count for record batch: {count}", ErrorCode.INVALID_RECORD
            )
        # A compacted batch keeps its offset range with fewer records (count <= lastOffsetDelta + 1), so
        # only a producer's batch must have exactly one record per offset.
        if count > 0 and (last_offset_delta < count - 1 or (from_client and last_offset_delta != count - 1)):
            raise CorruptRecordError(
                f"inconsistent batch offset range [{base_offset}, {base_offset + last_offset_delta}] "
                f"and count of records {count}",
                ErrorCode.INVALID_RECORD,
            )
        if last_offset_delta < 0 and count > 0:
            raise CorruptRecordError(
                f"batch has an invalid offset range: last offset delta {last_offset_delta}",
                ErrorCode.INVALID_RECORD,
            )
        if from_client:
            if count == 0:
                raise CorruptRecordError("record batch has no records", ErrorCode.INVALID_RECORD)
            if attributes & ATTR_CONTROL:
                raise CorruptRecordError(
                    "clients are not allowed to write control records", ErrorCode.INVALID_RECORD
                )
            if producer_id >= 0 and base_sequence < 0:
                raise CorruptRecordError(
                    f"invalid sequence number {base_sequence} for producer id {producer_id}",
                    ErrorCode.INVALID_RECORD,
                )

    # --- records ---------------------------------------------------------------------------------------

    def records_data(self, max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> bytes:
        """The records blob after decompression (a copy)."""
        start = self._pos + BATCH_HEADER_SIZE
        raw = memoryview(self._buf)[start : self._end]
        codec = self.compression
        if codec == Compression.NONE:
            return bytes(raw)
        return decompress(codec, raw, max_decompressed_size)

    def records(self, max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> Iterator[Record]:
        """Decode the records (decompressing first when needed), with absolute offsets and timestamps.

        Raises CorruptRecordError on a malformed or truncated record, on trailing bytes, or when the
        number of records differs from recordsCount. Does not check the CRC (see `validate`).
        """
        header = self.header()
        codec = _compression_of(header.attributes)
        if codec == Compression.NONE and isinstance(self._buf, bytes):
            data = self._buf
            start = self._pos + BATCH_HEADER_SIZE
            end = self._end
        else:
            data = self.records_data(max_decompressed_size)
            start = 0
            end = len(data)
        log_append_time = header.max_timestamp if header.attributes & ATTR_TIMESTAMP_TYPE else None
        return decode_records(
            data,
            start,
            end,
            header.records_count,
            header.base_offset,
            header.base_timestamp,
            log_append_time,
        )


# --- in-place patching ---------------------------------------------------------------------------------


def _check_batch_at(buf: WritableBuffer, pos: int) -> None:
    if pos < 0 or len(buf) - pos < BATCH_HEADER_SIZE:
        raise CorruptRecordError(f"no record batch header at position {pos}")


def set_base_offset(buf: WritableBuffer, pos: int, base_offset: int) -> None:
    """Overwrite baseOffset of the batch at ``buf[pos]`` (outside the CRC span; the CRC stays valid)."""
    _check_batch_at(buf, pos)
    _I64.pack_into(buf, pos + BASE_OFFSET_OFFSET, base_offset)


def set_partition_leader_epoch(buf: WritableBuffer, pos: int, epoch: int) -> None:
    """Overwrite partitionLeaderEpoch (outside the CRC span; the CRC stays valid)."""
    _check_batch_at(buf, pos)
    _I32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, epoch)


def set_log_append_time(buf: WritableBuffer, pos: int, timestamp: int) -> None:
    """Mark the batch LogAppendTime with maxTimestamp = ``timestamp`` and recompute the CRC.

    A no-op when the batch already says exactly that (as `DefaultRecordBatch.setMaxTimestamp`).
    """
    batch = RecordBatch(buf, pos)
    attributes = batch.attributes
    if attributes & ATTR_TIMESTAMP_TYPE and batch.max_timestamp == timestamp:
        return
    _I16.pack_into(buf, pos + ATTRIBUTES_OFFSET, attributes | ATTR_TIMESTAMP_TYPE)
    _I64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, timestamp)
    _U32.pack_into(buf, pos + CRC_OFFSET, batch.compute_crc())


def set_crc(buf: WritableBuffer, pos: int) -> int:
    """Recompute and store the CRC of the batch at ``buf[pos]``; return it."""
    batch = RecordBatch(buf, pos)
    crc = batch.compute_crc()
    _U32.pack_into(buf, pos + CRC_OFFSET, crc)
    return crc


# --- iteration -----------------------------------------------------------------------------------------


def iter_batches(
    buf: Buffer,
    pos: int = 0,
    end: int | None = None,
    *,
    allow_partial: bool = False,
) -> Iterator[RecordBatch]:
    """Yield the batches laid end to end in ``buf[pos:end]``.

    A trailing batch that does not fit (a fetch response may end with one) stops the iteration silently
    when ``allow_partial`` is true and raises CorruptRecordError otherwise. A batch whose header is
    present but invalid (bad magic, batchLength too small) always raises.
    """
    if end is None:
        end = len(buf)
    elif end < 0 or end > len(buf):
        raise CorruptRecordError(f"end {end} is outside the buffer of {len(buf)} bytes")
    if end != len(buf):
        buf = memoryview(buf)[:end]
    while pos < end:
        remaining = end - pos
        if remaining < MAGIC_OFFSET + 1:
            if allow_partial:
                return
            raise CorruptRecordError(f"truncated record batch at position {pos}: {remaining} bytes left")
        if allow_partial:
            (length,) = _i32_from(buf, pos + LENGTH_OFFSET)
            if length >= MIN_BATCH_LENGTH and length + LOG_OVERHEAD > remaining:
                return
        batch = RecordBatch(buf, pos)
        yield batch
        pos = batch._end
