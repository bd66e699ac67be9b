from __future__ import annotations

import contextlib
import struct

import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from exactly.errors import CorruptRecordError, ErrorCode
from exactly.records import (
    ATTR_CONTROL,
    ATTR_DELETE_HORIZON,
    ATTR_TIMESTAMP_TYPE,
    ATTR_TRANSACTIONAL,
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    BatchBuilder,
    Compression,
    Record,
    RecordBatch,
    TimestampType,
    iter_batches,
    set_base_offset,
    set_crc,
    set_log_append_time,
    set_partition_leader_epoch,
)
from exactly.records.batch import increment_sequence

from .strategies import record_inputs


def make_batch(
    n: int = 3,
    *,
    compression: Compression = Compression.NONE,
    base_offset: int = 0,
    producer_id: int = 42,
    producer_epoch: int = 7,
    base_sequence: int = 10,
    is_transactional: bool = False,
    value_size: int = 10,
) -> bytes:
    builder = BatchBuilder(
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        is_transactional=is_transactional,
        compression=compression,
        partition_leader_epoch=3,
    )
    for i in range(n):
        builder.append(1000 + 10 * i, b"k%d" % i, b"v" * value_size, [("h", b"%d" % i)])
    return builder.build()


def patch(data: bytes, fmt: str, offset: int, value: int, *, fix_crc: bool = True) -> bytearray:
    out = bytearray(data)
    struct.pack_into(fmt, out, offset, value)
    if fix_crc:
        set_crc(out, 0)
    return out


# --- header -----------------------------------------------------------------------------------------------


def test_header_fields_at_documented_offsets() -> None:
    data = make_batch(3, base_offset=100, is_transactional=True)
    batch = RecordBatch(data)
    fields = struct.unpack_from(">qiibIhiqqqhii", data)
    assert batch.base_offset == fields[0] == 100
    assert batch.batch_length == fields[1] == len(data) - LOG_OVERHEAD
    assert batch.size_in_bytes == len(data)
    assert batch.partition_leader_epoch == fields[2] == 3
    assert batch.magic == fields[3] == 2
    assert batch.crc == fields[4] == crc32c.crc32c(data[21:])
    assert batch.attributes == fields[5] == ATTR_TRANSACTIONAL
    assert batch.last_offset_delta == fields[6] == 2
    assert batch.base_timestamp == fields[7] == 1000
    assert batch.max_timestamp == fields[8] == 1020
    assert batch.producer_id == fields[9] == 42
    assert batch.producer_epoch == fields[10] == 7
    assert batch.base_sequence == fields[11] == 10
    assert batch.records_count == fields[12] == 3
    assert batch.last_offset == 102
    assert batch.next_offset == 103
    assert batch.last_sequence == 12
    assert batch.compression == Compression.NONE
    assert batch.timestamp_type == TimestampType.CREATE_TIME
    assert batch.is_transactional
    assert not batch.is_control
    assert not batch.has_delete_horizon
    assert batch.has_producer_id
    header = batch.header()
    assert header.base_offset == 100
    assert header.records_count == 3
    assert header.last_offset == 102
    assert header.size_in_bytes == len(data)
    assert header.is_transactional
    assert not header.is_control
    assert header.compression == Compression.NONE
    assert header.timestamp_type == TimestampType.CREATE_TIME
    assert "records_count=3" in repr(batch)


@pytest.mark.parametrize(
    ("attributes", "prop"),
    [
        (ATTR_CONTROL, "is_control"),
        (ATTR_DELETE_HORIZON, "has_delete_horizon"),
        (ATTR_TRANSACTIONAL, "is_transactional"),
    ],
)
def test_attribute_bits(attributes: int, prop: str) -> None:
    batch = RecordBatch(patch(make_batch(), ">h", 21, attributes))
    assert getattr(batch, prop)
    assert batch.compression == Compression.NONE


def test_timestamp_type_bit() -> None:
    batch = RecordBatch(patch(make_batch(), ">h", 21, ATTR_TIMESTAMP_TYPE | 4))
    assert batch.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert batch.compression == Compression.ZSTD


def test_crc32c_reference_vector() -> None:
    assert crc32c.crc32c(b"123456789") == 0xE3069283


def test_buffer_is_a_view_not_a_copy() -> None:
    data = b"garbage" + make_batch() + b"more"
    batch = RecordBatch(data, 7)
    view = batch.buffer
    assert view.obj is data
    assert bytes(view) == data[7 : 7 + batch.size_in_bytes]
    assert batch.position == 7
    assert batch.end == 7 + batch.size_in_bytes


@pytest.mark.parametrize(
    ("base", "delta", "expected"),
    [
        (0, 0, 0),
        (10, 2, 12),
        (2**31 - 1, 0, 2**31 - 1),
        (2**31 - 2, 2, 0),
        (2**31 - 1, 1, 0),
        (2**31 - 1, 5, 4),
    ],
)
def test_increment_sequence_wraps(base: int, delta: int, expected: int) -> None:
    assert increment_sequence(base, delta) == expected


def test_last_sequence_wraps_and_handles_no_sequence() -> None:
    assert RecordBatch(make_batch(3, base_sequence=2**31 - 2)).last_sequence == 0
    assert RecordBatch(make_batch(3, producer_id=-1, producer_epoch=-1, base_sequence=-1)).last_sequence == -1


# --- constructor checks ----------------------------------------------------------------------------------


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_magic_is_unsupported(magic: int) -> None:
    # A v0/v1 message set: offset, size, crc, magic, attributes, [timestamp], key, value.
    legacy = struct.pack(">qiIbb", 0, 14, 0, magic, 0) + struct.pack(">ii", -1, -1)
    for data in (legacy, patch(make_batch(), ">b", 16, magic, fix_crc=False)):
        with pytest.raises(CorruptRecordError) as info:
            RecordBatch(data)
        assert info.value.code == ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT
        with pytest.raises(CorruptRecordError) as info:
            list(iter_batches(data))
        assert info.value.code == ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT


@pytest.mark.parametrize("magic", [3, -1, 127])
def test_unknown_magic_is_corrupt(magic: int) -> None:
    with pytest.raises(CorruptRecordError) as info:
        RecordBatch(patch(make_batch(), ">b", 16, magic, fix_crc=False))
    assert info.value.code == ErrorCode.CORRUPT_MESSAGE


@pytest.mark.parametrize("length", [-1, 0, 48, -(2**31)])
def test_batch_length_too_small(length: int) -> None:
    with pytest.raises(CorruptRecordError, match="minimum") as info:
        RecordBatch(patch(make_batch(), ">i", 8, length, fix_crc=False))
    assert info.value.code == ErrorCode.CORRUPT_MESSAGE


def test_batch_length_too_large() -> None:
    data = make_batch()
    with pytest.raises(CorruptRecordError, match="truncated"):
        RecordBatch(patch(data, ">i", 8, len(data), fix_crc=False))


def test_truncated_at_every_position() -> None:
    for compression in Compression:
        data = make_batch(2, compression=compression)
        for cut in range(len(data)):
            with pytest.raises(CorruptRecordError):
                RecordBatch(data[:cut])
            if cut:  # an empty buffer holds no batch at all
                with pytest.raises(CorruptRecordError):
                    list(iter_batches(data[:cut]))
            assert list(iter_batches(data[:cut], allow_partial=True)) == []


def test_negative_position() -> None:
    with pytest.raises(CorruptRecordError):
        RecordBatch(make_batch(), -1)


# --- CRC and validate -----------------------------------------------------------------------------------


def test_verify_crc_and_validate_pass_on_good_batches() -> None:
    for compression in Compression:
        batch = RecordBatch(make_batch(5, compression=compression))
        batch.verify_crc()
        batch.validate()
        batch.validate(from_client=True)
        assert batch.is_valid_crc()


def test_every_flipped_bit_in_crc_span_is_caught() -> None:
    data = make_batch(2)
    for pos in range(21, len(data)):
        for bit in (0x01, 0x80):
            mutated = bytearray(data)
            mutated[pos] ^= bit
            batch = RecordBatch(mutated)
            with pytest.raises(CorruptRecordError) as info:
                batch.verify_crc()
            assert info.value.code == ErrorCode.CORRUPT_MESSAGE
            with pytest.raises(CorruptRecordError):
                batch.validate()


def test_flipped_crc_field_is_caught() -> None:
    data = make_batch()
    for pos in range(17, 21):
        mutated = bytearray(data)
        mutated[pos] ^= 0x10
        with pytest.raises(CorruptRecordError):
            RecordBatch(mutated).validate()


def test_fields_outside_crc_span_do_not_affect_crc() -> None:
    data = bytearray(make_batch())
    set_base_offset(data, 0, 123456789)
    set_partition_leader_epoch(data, 0, 99)
    batch = RecordBatch(data)
    batch.validate()
    assert batch.base_offset == 123456789
    assert batch.partition_leader_epoch == 99


def test_validate_count_mismatch_is_invalid_record() -> None:
    data = make_batch(3)  # lastOffsetDelta 2 (offset 23), recordsCount 3 (offset 57)
    # More records than offsets, or a negative count: corrupt wherever the batch comes from.
    for fmt, offset, value in ((">i", 23, 1), (">i", 57, 4), (">i", 57, -1)):
        for from_client in (False, True):
            with pytest.raises(CorruptRecordError) as info:
                RecordBatch(patch(data, fmt, offset, value)).validate(from_client=from_client)
            assert info.value.code == ErrorCode.INVALID_RECORD
    # Fewer records than offsets: what compaction leaves (a follower and the log dump accept it); a
    # producer's batch must have one record per offset.
    for fmt, offset, value in ((">i", 23, 5), (">i", 57, 2)):
        compacted = RecordBatch(patch(data, fmt, offset, value))
        compacted.validate()
        with pytest.raises(CorruptRecordError, match="inconsistent batch offset range") as info:
            compacted.validate(from_client=True)
        assert info.value.code == ErrorCode.INVALID_RECORD


def test_validate_unknown_compression() -> None:
    batch = RecordBatch(patch(make_batch(), ">h", 21, 5))
    with pytest.raises(CorruptRecordError, match="compression"):
        batch.validate()
    with pytest.raises(CorruptRecordError, match="compression"):
        _ = batch.compression
    with pytest.raises(CorruptRecordError, match="compression"):
        list(batch.records())


def test_validate_from_client_rules() -> None:
    no_seq = make_batch(producer_id=5, base_sequence=-1)
    RecordBatch(no_seq).validate()
    with pytest.raises(CorruptRecordError, match="sequence") as info:
        RecordBatch(no_seq).validate(from_client=True)
    assert info.value.code == ErrorCode.INVALID_RECORD

    control = patch(make_batch(1), ">h", 21, ATTR_CONTROL | ATTR_TRANSACTIONAL)
    RecordBatch(control).validate()
    with pytest.raises(CorruptRecordError, match="control") as info:
        RecordBatch(control).validate(from_client=True)
    assert info.value.code == ErrorCode.INVALID_RECORD

    # An empty batch (what compaction can leave behind) is structurally fine but not from a client.
    empty = bytearray(make_batch(1))
    empty = patch(bytes(empty), ">i", 57, 0)
    RecordBatch(empty).validate()
    with pytest.raises(CorruptRecordError, match="no records"):
        RecordBatch(empty).validate(from_client=True)


# --- records --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("compression", list(Compression), ids=lambda c: c.name.lower())
def test_records_have_absolute_offsets_and_timestamps(compression: Compression) -> None:
    batch = RecordBatch(make_batch(3, base_offset=50, compression=compression, value_size=500))
    assert list(batch.records()) == [
        Record(50 + i, 1000 + 10 * i, b"k%d" % i, b"v" * 500, (("h", b"%d" % i),)) for i in range(3)
    ]


@pytest.mark.parametrize("buffer_type", [bytes, bytearray, memoryview])
def test_records_from_any_buffer_type(buffer_type: type) -> None:
    data = b"\x00" * 5 + make_batch(3)
    batch = RecordBatch(buffer_type(data), 5)
    assert [r.offset for r in batch.records()] == [0, 1, 2]


def test_records_count_mismatch_raises() -> None:
    data = make_batch(3)
    for count in (2, 4):
        patched = patch(data, ">i", 57, count)
        patched = patch(bytes(patched), ">i", 23, count - 1)
        batch = RecordBatch(patched)
        batch.validate()  # header is consistent; only the records disagree
        with pytest.raises(CorruptRecordError) as info:
            list(batch.records())
        assert info.value.code == ErrorCode.INVALID_RECORD


def test_records_decompression_limit() -> None:
    batch = RecordBatch(make_batch(10, compression=Compression.ZSTD, value_size=10_000))
    assert len(list(batch.records())) == 10
    with pytest.raises(CorruptRecordError, match="exceeds"):
        list(batch.records(max_decompressed_size=50_000))


def test_log_append_time() -> None:
    data = bytearray(b"\xee" * 3 + make_batch(3) + b"\xee")
    set_log_append_time(memoryview(data), 3, 5555)
    batch = RecordBatch(data, 3)
    batch.validate()
    assert batch.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert batch.max_timestamp == 5555
    assert batch.base_timestamp == 1000  # untouched
    assert [r.timestamp for r in batch.records()] == [5555] * 3
    before = bytes(data)
    set_log_append_time(data, 3, 5555)  # no-op
    assert bytes(data) == before
    assert data[:3] == b"\xee" * 3
    assert data[-1:] == b"\xee"


def test_view_reads_live_after_patching() -> None:
    data = bytearray(make_batch(2))
    batch = RecordBatch(data)
    set_base_offset(data, 0, 77)
    assert batch.base_offset == 77
    assert [r.offset for r in batch.records()] == [77, 78]


def test_patch_helpers_need_a_header() -> None:
    with pytest.raises(CorruptRecordError):
        set_base_offset(bytearray(10), 0, 1)
    with pytest.raises(CorruptRecordError):
        set_partition_leader_epoch(bytearray(BATCH_HEADER_SIZE), 1, 1)


# --- iter_batches ---------------------------------------------------------------------------------------


def test_iter_batches() -> None:
    batches = [make_batch(i + 1, base_offset=10 * i) for i in range(3)]
    data = b"".join(batches)
    got = list(iter_batches(data))
    assert [b.base_offset for b in got] == [0, 10, 20]
    assert [b.records_count for b in got] == [1, 2, 3]
    assert got[1].position == len(batches[0])
    # pos / end select a window.
    assert [b.base_offset for b in iter_batches(data, len(batches[0]))] == [10, 20]
    assert [b.base_offset for b in iter_batches(data, 0, len(batches[0]))] == [0]
    assert list(iter_batches(b"")) == []
    with pytest.raises(CorruptRecordError):
        list(iter_batches(data, 0, len(data) + 1))


def test_iter_batches_partial_tail() -> None:
    data = make_batch(1) + make_batch(2, base_offset=1)
    for cut in range(len(make_batch(1)) + 1, len(data)):
        assert [b.base_offset for b in iter_batches(data[:cut], allow_partial=True)] == [0]
        with pytest.raises(CorruptRecordError):
            list(iter_batches(data[:cut]))
        # The end bound is honoured the same way.
        assert [b.base_offset for b in iter_batches(data, 0, cut, allow_partial=True)] == [0]


def test_iter_batches_partial_does_not_hide_a_bad_length() -> None:
    data = make_batch(1) + bytes(patch(make_batch(1), ">i", 8, 3, fix_crc=False))
    with pytest.raises(CorruptRecordError, match="minimum"):
        list(iter_batches(data, allow_partial=True))


# --- totality properties --------------------------------------------------------------------------------


def decode_everything(data: bytes | bytearray) -> None:
    """Everything a consumer of this package might call; must succeed or raise CorruptRecordError."""
    for batch in iter_batches(data, allow_partial=True):
        batch.header()
        _ = (batch.compression, batch.timestamp_type, batch.last_sequence, batch.next_offset)
        batch.validate(from_client=True)
        for record in batch.records(max_decompressed_size=1 << 20):
            assert isinstance(record, Record)


@given(st.binary(max_size=300))
def test_arbitrary_bytes_decode_or_raise(data: bytes) -> None:
    with contextlib.suppress(CorruptRecordError):
        decode_everything(data)


@given(st.binary(min_size=61, max_size=300))
def test_arbitrary_bytes_with_valid_prefix_decode_or_raise(tail: bytes) -> None:
    data = bytearray(tail)
    struct.pack_into(">ib", data, 8, len(data) - 12, 0)  # plausible length
    data[16] = 2
    set_crc(data, 0)  # get past the CRC so the record decoders are fuzzed too
    with contextlib.suppress(CorruptRecordError):
        decode_everything(data)


@settings(suppress_health_check=[HealthCheck.too_slow], max_examples=200)
@given(
    st.lists(record_inputs, min_size=1, max_size=5),
    st.sampled_from(list(Compression)),
    st.data(),
)
def test_mutated_batches_decode_or_raise(
    inputs: list[tuple[int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]],
    compression: Compression,
    data: st.DataObject,
) -> None:
    builder = BatchBuilder(compression=compression)
    for timestamp, key, value, headers in inputs:
        builder.append(timestamp, key, value, headers)
    original = builder.build()
    mutated = bytearray(original)
    pos = data.draw(st.integers(0, len(mutated) - 1), label="pos")
    xor = data.draw(st.integers(1, 255), label="xor")
    mutated[pos] ^= xor
    if pos >= 21:
        # A flipped byte inside the CRC span is always caught ...
        with pytest.raises(CorruptRecordError):
            RecordBatch(mutated).validate()
        # ... and with the CRC fixed up, decoding still either works or raises CorruptRecordError.
        set_crc(mutated, 0)
    with contextlib.suppress(CorruptRecordError):
        decode_everything(mutated)
    truncate = data.draw(st.integers(0, len(original) - 1), label="truncate")
    with pytest.raises(CorruptRecordError):
        RecordBatch(original[:truncate])
