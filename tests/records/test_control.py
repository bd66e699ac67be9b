from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from exactly.errors import CorruptRecordError, ErrorCode
from exactly.records import (
    BatchBuilder,
    ControlRecordType,
    EndTxnMarker,
    RecordBatch,
    build_batch,
    build_end_txn_marker_batch,
    parse_end_txn_marker,
)
from exactly.records.record import encode_record


@given(
    producer_id=st.integers(0, 2**63 - 1),
    producer_epoch=st.integers(0, 32767),
    record_type=st.sampled_from(list(ControlRecordType)),
    coordinator_epoch=st.integers(-(2**31), 2**31 - 1),
    base_offset=st.integers(0, 2**40),
    timestamp=st.integers(-1, 2**45),
)
def test_round_trip(
    producer_id: int,
    producer_epoch: int,
    record_type: ControlRecordType,
    coordinator_epoch: int,
    base_offset: int,
    timestamp: int,
) -> None:
    marker = EndTxnMarker(record_type, coordinator_epoch)
    data = build_end_txn_marker_batch(
        producer_id, producer_epoch, marker, base_offset=base_offset, timestamp_ms=timestamp
    )
    batch = RecordBatch(data)
    batch.validate()
    assert batch.is_control
    assert batch.is_transactional
    assert (batch.producer_id, batch.producer_epoch) == (producer_id, producer_epoch)
    assert batch.base_offset == base_offset
    assert parse_end_txn_marker(batch) == marker


def test_byte_layout_matches_kafka_wire_section_4() -> None:
    data = build_end_txn_marker_batch(
        1000,
        5,
        EndTxnMarker(ControlRecordType.COMMIT, 17),
        base_offset=42,
        timestamp_ms=1_700_000_000_000,
        partition_leader_epoch=3,
    )
    (
        base_offset,
        batch_length,
        leader_epoch,
        magic,
        _crc,
        attributes,
        last_offset_delta,
        base_ts,
        max_ts,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    ) = struct.unpack_from(">qiibIhiqqqhii", data)
    assert (base_offset, batch_length, leader_epoch, magic) == (42, len(data) - 12, 3, 2)
    assert attributes == 0x30  # transactional + control, uncompressed, CreateTime
    assert (last_offset_delta, count) == (0, 1)
    assert base_ts == max_ts == 1_700_000_000_000
    assert (producer_id, producer_epoch, base_sequence) == (1000, 5, -1)
    # The one record: length, attributes 0, tsDelta 0, offsetDelta 0,
    # key = 4 bytes (version 0, type COMMIT=1), value = 6 bytes (version 0, coordinatorEpoch 17), 0 headers.
    record = (
        b"\x00"  # attributes
        b"\x00"  # timestampDelta
        b"\x00"  # offsetDelta
        b"\x08" + b"\x00\x00\x00\x01"  # keyLength 4 (zig-zag 8), key
        b"\x0c" + b"\x00\x00\x00\x00\x00\x11"  # valueLength 6 (zig-zag 12), value
        b"\x00"  # headerCount
    )
    assert data[61:] == bytes([len(record) * 2]) + record
    assert len(data) == 61 + 1 + len(record)


def test_abort_key_bytes() -> None:
    data = build_end_txn_marker_batch(1, 0, EndTxnMarker(ControlRecordType.ABORT, 0))
    (record,) = RecordBatch(data).records()
    assert record.key == b"\x00\x00\x00\x00"
    assert record.value == b"\x00\x00\x00\x00\x00\x00"


def control_batch(key: bytes | None, value: bytes | None, count: int = 1) -> RecordBatch:
    builder = BatchBuilder(producer_id=1, producer_epoch=0, is_transactional=True, is_control=True)
    for _ in range(count):
        builder.append(0, key, value)
    return RecordBatch(builder.build())


@pytest.mark.parametrize(
    "batch",
    [
        pytest.param(RecordBatch(build_batch([(b"\x00\x00\x00\x01", b"\x00" * 6)])), id="not-control"),
        pytest.param(control_batch(b"\x00\x00\x00\x01", b"\x00" * 6, count=2), id="two-records"),
        pytest.param(control_batch(None, b"\x00" * 6), id="null-key"),
        pytest.param(control_batch(b"\x00\x00\x00", b"\x00" * 6), id="short-key"),
        pytest.param(control_batch(b"\xff\xff\x00\x01", b"\x00" * 6), id="negative-key-version"),
        pytest.param(control_batch(b"\x00\x00\x00\x02", b"\x00" * 6), id="leader-change-type"),
        pytest.param(control_batch(b"\x00\x00\x00\x01", b"\x00" * 5), id="short-value"),
        pytest.param(control_batch(b"\x00\x00\x00\x01", None), id="null-value"),
        pytest.param(
            control_batch(b"\x00\x00\x00\x01", b"\x80\x00" + b"\x00" * 4), id="negative-value-version"
        ),
    ],
)
def test_parse_rejects_non_markers(batch: RecordBatch) -> None:
    with pytest.raises(CorruptRecordError) as info:
        parse_end_txn_marker(batch)
    assert info.value.code == ErrorCode.INVALID_RECORD


def test_newer_versions_are_accepted() -> None:
    # Kafka only warns about a newer key/value version; the fields it knows stay where they are.
    batch = control_batch(b"\x00\x01\x00\x00", b"\x00\x01\x00\x00\x00\x07extra")
    assert parse_end_txn_marker(batch) == EndTxnMarker(ControlRecordType.ABORT, 7)


def test_encode_record_helper_matches_marker_record() -> None:
    data = build_end_txn_marker_batch(1, 0, EndTxnMarker(ControlRecordType.COMMIT, 2))
    assert data[61:] == encode_record(0, 0, b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x02")
