"""Control records: the COMMIT / ABORT transaction markers (`EndTransactionMarker.java`).

A marker is a batch of its own: attributes 0x30 (transactional + control, uncompressed), the
transaction's producerId/producerEpoch, baseSequence -1, and exactly one record::

    key   => version int16 (0), type int16 (ControlRecordType: ABORT 0, COMMIT 1)
    value => version int16 (0), coordinatorEpoch int32

Both are big-endian fixed-size fields inside the record's key and value bytes. Consumers skip control
records; read_committed consumers use ABORT markers to drop the aborted transaction's data.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

from exactly.errors import CorruptRecordError, ErrorCode
from exactly.records.batch import NO_SEQUENCE, NO_TIMESTAMP, RecordBatch
from exactly.records.builder import BatchBuilder

__all__ = [
    "CONTROL_RECORD_KEY_VERSION",
    "END_TXN_MARKER_VALUE_VERSION",
    "ControlRecordType",
    "EndTxnMarker",
    "build_end_txn_marker_batch",
    "control_record_key",
    "end_txn_marker_value",
    "parse_control_record_type",
    "parse_end_txn_marker",
]

CONTROL_RECORD_KEY_VERSION = 0
END_TXN_MARKER_VALUE_VERSION = 0

_KEY = struct.Struct(">hh")  # version, type
_VALUE = struct.Struct(">hi")  # version, coordinatorEpoch


class ControlRecordType(IntEnum):
    """Control record types that data partitions carry (LEADER_CHANGE etc. are KRaft-only)."""

    ABORT = 0
    COMMIT = 1


@dataclass(frozen=True, slots=True)
class EndTxnMarker:
    type: ControlRecordType
    coordinator_epoch: int


def control_record_key(record_type: ControlRecordType) -> bytes:
    return _KEY.pack(CONTROL_RECORD_KEY_VERSION, record_type)


def end_txn_marker_value(coordinator_epoch: int) -> bytes:
    return _VALUE.pack(END_TXN_MARKER_VALUE_VERSION, coordinator_epoch)


def build_end_txn_marker_batch(
    producer_id: int,
    producer_epoch: int,
    marker: EndTxnMarker,
    base_offset: int = 0,
    timestamp_ms: int = NO_TIMESTAMP,
    partition_leader_epoch: int = 0,
) -> bytes:
    """A complete control batch carrying one COMMIT/ABORT marker (pass the clock's time as timestamp)."""
    builder = BatchBuilder(
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=NO_SEQUENCE,
        is_transactional=True,
        partition_leader_epoch=partition_leader_epoch,
        is_control=True,
    )
    builder.append(
        timestamp_ms,
        control_record_key(marker.type),
        end_txn_marker_value(marker.coordinator_epoch),
    )
    return builder.build()


def _invalid(message: str) -> CorruptRecordError:
    return CorruptRecordError(message, ErrorCode.INVALID_RECORD)


def parse_control_record_type(key: bytes | None) -> ControlRecordType:
    """The type in a control record key (`ControlRecordType.parse`); ABORT/COMMIT only."""
    if key is None or len(key) < _KEY.size:
        raise _invalid(f"invalid control record key size {0 if key is None else len(key)}")
    version, type_id = _KEY.unpack_from(key)
    if version < 0:
        raise _invalid(f"invalid version for control record key: {version}")
    if type_id not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        raise _invalid(f"control record type {type_id} is not an end-transaction marker")
    return ControlRecordType(type_id)


def parse_end_txn_marker(batch: RecordBatch) -> EndTxnMarker:
    """Decode the marker in a control batch; CorruptRecordError (INVALID_RECORD) if it is not one."""
    if not batch.is_control:
        raise _invalid("not a control batch")
    if batch.records_count != 1:
        raise _invalid(f"control batch must hold one record, holds {batch.records_count}")
    (record,) = list(batch.records())
    record_type = parse_control_record_type(record.key)
    value = record.value
    if value is None or len(value) < _VALUE.size:
        raise _invalid(f"invalid end transaction marker value size {0 if value is None else len(value)}")
    version, coordinator_epoch = _VALUE.unpack_from(value)
    if version < 0:
        raise _invalid(f"invalid version for end transaction marker: {version}")
    return EndTxnMarker(record_type, coordinator_epoch)
