"""Build v2 record batches: the broker's own writes (internal topics, control markers), the CLI, tests.

The layout written is the one documented in `exactly.records.batch`: a 61-byte header followed by the
records (`exactly.records.record`), compressed as one blob when a codec is chosen. As Java's
`MemoryRecordsBuilder` does, baseTimestamp is the first record's timestamp, maxTimestamp the largest
record timestamp, record ``i`` gets offsetDelta ``i`` and lastOffsetDelta is ``count - 1``.
"""

from __future__ import annotations

from collections.abc import Sequence

import crc32c

from exactly.records.batch import (
    ATTR_CONTROL,
    ATTR_TIMESTAMP_TYPE,
    ATTR_TRANSACTIONAL,
    BATCH_HEADER_SIZE,
    CRC_OFFSET,
    CRC_START,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    MAGIC,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    TimestampType,
)
from exactly.records.compression import Compression, compress
from exactly.records.record import Header, encode_record

__all__ = ["BatchBuilder", "build_batch"]


class BatchBuilder:
    """Accumulate records, then `build` one complete batch with a correct CRC.

    ``timestamp_type=LOG_APPEND_TIME`` sets attributes bit 3 (maxTimestamp is still the largest record
    timestamp; the broker overwrites it with `set_log_append_time`). ``is_control`` sets bit 5 and is
    meant for `exactly.records.control` only.
    """

    __slots__ = (
        "_attributes",
        "_base_offset",
        "_base_sequence",
        "_base_timestamp",
        "_body",
        "_compression",
        "_count",
        "_max_timestamp",
        "_partition_leader_epoch",
        "_producer_epoch",
        "_producer_id",
    )

    def __init__(
        self,
        base_offset: int = 0,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        base_sequence: int = NO_SEQUENCE,
        is_transactional: bool = False,
        compression: Compression = Compression.NONE,
        partition_leader_epoch: int = 0,
        *,
        timestamp_type: TimestampType = TimestampType.CREATE_TIME,
        is_control: bool = False,
    ) -> None:
        self._base_offset = base_offset
        self._producer_id = producer_id
        self._producer_epoch = producer_epoch
        self._base_sequence = base_sequence
        self._compression = Compression(compression)
        self._partition_leader_epoch = partition_leader_epoch
        attributes = int(self._compression)
        if timestamp_type == TimestampType.LOG_APPEND_TIME:
            attributes |= ATTR_TIMESTAMP_TYPE
        if is_transactional:
            attributes |= ATTR_TRANSACTIONAL
        if is_control:
            attributes |= ATTR_CONTROL
        self._attributes = attributes
        self._body = bytearray()
        self._count = 0
        self._base_timestamp: int | None = None
        self._max_timestamp = NO_TIMESTAMP

    def __len__(self) -> int:
        return self._count

    @property
    def size_estimate(self) -> int:
        """Uncompressed size of the batch built so far."""
        return BATCH_HEADER_SIZE + len(self._body)

    def append(
        self,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header] = (),
    ) -> None:
        """Add one record; its offset is ``base_offset + number of records appended before``."""
        if self._base_timestamp is None:
            self._base_timestamp = timestamp
        if timestamp > self._max_timestamp:
            self._max_timestamp = timestamp
        self._body += encode_record(self._count, timestamp - self._base_timestamp, key, value, headers)
        self._count += 1

    def build(self) -> bytes:
        """The complete batch (header + records, compressed if asked), CRC included."""
        if self._count == 0:
            raise ValueError("cannot build a record batch without records")
        records = compress(self._compression, self._body) if self._compression else bytes(self._body)
        base_timestamp = self._base_timestamp if self._base_timestamp is not None else NO_TIMESTAMP
        out = bytearray(BATCH_HEADER_SIZE)
        HEADER_STRUCT.pack_into(
            out,
            0,
            self._base_offset,
            BATCH_HEADER_SIZE - LOG_OVERHEAD + len(records),
            self._partition_leader_epoch,
            MAGIC,
            0,  # crc, patched below
            self._attributes,
            self._count - 1,
            base_timestamp,
            self._max_timestamp,
            self._producer_id,
            self._producer_epoch,
            self._base_sequence,
            self._count,
        )
        out += records
        crc = crc32c.crc32c(memoryview(out)[CRC_START:])
        out[CRC_OFFSET : CRC_OFFSET + 4] = crc.to_bytes(4, "big")
        return bytes(out)


def build_batch(
    records: Sequence[tuple[bytes | None, bytes | None]],
    *,
    base_offset: int = 0,
    timestamp: int = 0,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    is_transactional: bool = False,
    compression: Compression = Compression.NONE,
    partition_leader_epoch: int = 0,
) -> bytes:
    """One batch of ``(key, value)`` records, all with timestamp ``timestamp``."""
    builder = BatchBuilder(
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        is_transactional=is_transactional,
        compression=compression,
        partition_leader_epoch=partition_leader_epoch,
    )
    for key, value in records:
        builder.append(timestamp, key, value)
    return builder.build()
