"""Validation of the record batches of one Produce partition (Kafka's `LogValidator`, header-only).

Checks, in Kafka's terms, with the error each failure maps to:

* every batch is whole: header present, batchLength >= 49 and within the buffer   CORRUPT_MESSAGE
* magic 2 (0/1 are not accepted by Produce v3+)             UNSUPPORTED_FOR_MESSAGE_FORMAT
* CRC-32C over [21, end)                                                          CORRUPT_MESSAGE
* recordsCount > 0 and lastOffsetDelta == recordsCount - 1                        INVALID_RECORD
* no control batches from clients                                                 INVALID_RECORD
* a producer id with baseSequence < 0, or a transactional batch without one       INVALID_RECORD
* batch size > max.message.bytes                                                  MESSAGE_TOO_LARGE
* whole append > segment.bytes                                                    RECORD_LIST_TOO_LARGE
* CreateTime max timestamp outside message.timestamp.{before,after}.max.ms        INVALID_TIMESTAMP
* compacted topic (cleanup.policy has compact): a record without a key            INVALID_RECORD,
  listed per record (`RecordValidationError.record_errors`, Produce v8+ record_errors)

Records are not decoded on a topic that is not compacted (no per-record work on the append path,
compressed or not); the CRC protects them and consumers decode them. On a compacted topic they are
decoded (decompressed if need be) to find keyless records, as Kafka's LogValidator does. Kafka
additionally checks each record's offset delta and timestamp, which needs decompression; exactly checks
the batch's maxTimestamp only.
"""

from __future__ import annotations

from dataclasses import dataclass

from exactly.errors import CorruptRecordError, ErrorCode, KafkaError, RecordError, RecordValidationError
from exactly.records.batch import (
    ATTR_CONTROL,
    ATTR_TRANSACTIONAL,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    RecordBatch,
    increment_sequence,
    iter_batches,
)
from exactly.storage.config import LogConfig, MessageTimestampType

Buffer = bytes | bytearray | memoryview


@dataclass(frozen=True, slots=True)
class BatchInfo:
    """Header facts of one validated batch, at `position` in the append buffer."""

    position: int
    size: int
    attributes: int
    last_offset_delta: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence < 0:
            return -1
        return increment_sequence(self.base_sequence, self.last_offset_delta)


def _info(buf: Buffer, batch: RecordBatch) -> BatchInfo:
    (_b, length, _e, _m, _c, attrs, delta, _bts, max_ts, pid, epoch, seq, count) = HEADER_STRUCT.unpack_from(
        buf, batch.position
    )
    return BatchInfo(batch.position, length + LOG_OVERHEAD, attrs, delta, max_ts, pid, epoch, seq, count)


def validate_client_batches(
    buf: Buffer, config: LogConfig, now_ms: int, topic_partition: str = ""
) -> list[BatchInfo]:
    """Validate a producer's records; raise KafkaError with the code the client must see.

    `topic_partition` ("topic-0") only names the partition in error messages.
    """
    out: list[BatchInfo] = []
    total = 0
    try:
        for batch in iter_batches(buf):
            batch.validate(from_client=True)
            info = _info(buf, batch)
            if config.cleanup_policy.compacts:
                _check_keys(batch, topic_partition)
            if info.producer_id < 0 and info.is_transactional:
                raise KafkaError(ErrorCode.INVALID_RECORD, "transactional batch without a producer id")
            if info.size > config.max_message_bytes:
                raise KafkaError(
                    ErrorCode.MESSAGE_TOO_LARGE,
                    f"batch of {info.size} bytes exceeds max.message.bytes {config.max_message_bytes}",
                )
            if config.message_timestamp_type is MessageTimestampType.CREATE_TIME:
                ts = info.max_timestamp
                if ts >= 0 and (
                    now_ms - ts > config.message_timestamp_before_max_ms
                    or ts - now_ms > config.message_timestamp_after_max_ms
                ):
                    raise KafkaError(
                        ErrorCode.INVALID_TIMESTAMP, f"timestamp {ts} is out of range at {now_ms}"
                    )
            total += info.size
            out.append(info)
    except CorruptRecordError as e:
        raise KafkaError(e.code, str(e)) from e
    if not out:
        raise KafkaError(ErrorCode.INVALID_RECORD, "no record batch in produce request")
    if total > config.segment_bytes:
        raise KafkaError(
            ErrorCode.RECORD_LIST_TOO_LARGE,
            f"append of {total} bytes is larger than segment.bytes {config.segment_bytes}",
        )
    return out


def _check_keys(batch: RecordBatch, topic_partition: str) -> None:
    """Kafka's LogValidator.validateKey: a compacted topic refuses records without a key, and with one of
    them the whole batch (processRecordErrors)."""
    errors = tuple(
        RecordError(
            index, f"Compacted topic cannot accept message without key in topic partition {topic_partition}"
        )
        for index, record in enumerate(batch.records())
        if record.key is None
    )
    if errors:
        raise RecordValidationError(
            ErrorCode.INVALID_RECORD,
            f"One or more records have been rejected due to {len(errors)} record errors in total, and only "
            f"showing the first three errors at most: [{', '.join(str(e) for e in errors[:3])}]",
            errors,
        )


def parse_internal_batches(buf: Buffer, config: LogConfig) -> list[BatchInfo]:
    """Batches the broker built itself (markers, coordinator records): structure checked, CRC trusted."""
    out: list[BatchInfo] = []
    total = 0
    try:
        for batch in iter_batches(buf):
            info = _info(buf, batch)
            if info.records_count <= 0 or info.last_offset_delta != info.records_count - 1:
                raise KafkaError(ErrorCode.INVALID_RECORD, "inconsistent internal batch")
            total += info.size
            out.append(info)
    except CorruptRecordError as e:
        raise KafkaError(e.code, str(e)) from e
    if not out:
        raise KafkaError(ErrorCode.INVALID_RECORD, "no record batch")
    if total > config.segment_bytes:
        raise KafkaError(ErrorCode.RECORD_LIST_TOO_LARGE, "append larger than segment.bytes")
    return out


def uses_log_append_time(config: LogConfig, info: BatchInfo) -> bool:
    return config.message_timestamp_type is MessageTimestampType.LOG_APPEND_TIME and not info.is_control


__all__ = ["BatchInfo", "parse_internal_batches", "uses_log_append_time", "validate_client_batches"]
