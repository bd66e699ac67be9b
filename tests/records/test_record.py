from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from exactly.errors import CorruptRecordError, ErrorCode
from exactly.records.record import Record, decode_record, decode_records, encode_record
from exactly.records.varint import INT32_MAX, INT32_MIN, encode_varint

from .strategies import deltas64, headers, nullable_bytes


def test_encode_known_bytes() -> None:
    # length=?, attributes 0, tsDelta 1 (zz 2), offsetDelta 2 (zz 4), key "k" (len zz 2),
    # value null (zz 1), 1 header: key "h" (zz 2) value "v" (zz 2)
    body = b"\x00" + b"\x02" + b"\x04" + b"\x02k" + b"\x01" + b"\x02" + b"\x02h" + b"\x02v"
    assert encode_record(2, 1, b"k", None, [("h", b"v")]) == encode_varint(len(body)) + body


@given(
    st.integers(0, INT32_MAX),
    deltas64,
    nullable_bytes,
    nullable_bytes,
    headers,
    st.integers(0, 1 << 40),
    st.integers(-(1 << 40), 1 << 40),
)
def test_round_trip(
    offset_delta: int,
    ts_delta: int,
    key: bytes | None,
    value: bytes | None,
    hdrs: tuple[tuple[str, bytes | None], ...],
    base_offset: int,
    base_ts: int,
) -> None:
    data = b"prefix" + encode_record(offset_delta, ts_delta, key, value, hdrs)
    record, pos = decode_record(data, 6, len(data), base_offset, base_ts)
    assert pos == len(data)
    assert record == Record(base_offset + offset_delta, base_ts + ts_delta, key, value, hdrs)


def test_log_append_time_overrides_timestamp() -> None:
    data = encode_record(0, 5, None, b"v")
    record, _ = decode_record(data, 0, len(data), 10, 100, log_append_time=999)
    assert record.timestamp == 999


def test_decoded_record_is_a_normal_frozen_dataclass() -> None:
    data = encode_record(1, 2, b"k", b"v", [("h", None)])
    record, _ = decode_record(data, 0, len(data), 0, 0)
    assert record == Record(1, 2, b"k", b"v", (("h", None),))
    assert hash(record) == hash(Record(1, 2, b"k", b"v", (("h", None),)))
    with pytest.raises(AttributeError):
        record.offset = 5  # type: ignore[misc]


def _body(*parts: bytes) -> bytes:
    body = b"".join(parts)
    return encode_varint(len(body)) + body


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(_body(b"\x00\x00\x00", encode_varint(-2), b"\x01\x00"), id="key-length-minus-2"),
        pytest.param(_body(b"\x00\x00\x00\x01", encode_varint(-5), b"\x00"), id="value-length-minus-5"),
        pytest.param(_body(b"\x00\x00\x00\x01\x01", encode_varint(-1)), id="negative-header-count"),
        pytest.param(_body(b"\x00\x00\x00\x01\x01\x02", encode_varint(-1), b"\x01"), id="null-header-key"),
        pytest.param(_body(b"\x00\x00\x00\x01\x01\x02\x00", encode_varint(-3)), id="header-value-minus-3"),
        pytest.param(_body(b"\x00\x00\x00\x01\x01\x00\xff"), id="trailing-byte-in-record"),
        pytest.param(_body(b"\x00\x00\x00", encode_varint(10), b"abc\x01\x00"), id="key-past-end"),
        pytest.param(_body(b"\x00\x00\x00\x01\x01\x7e"), id="header-count-too-big"),
        pytest.param(encode_varint(-1), id="negative-length"),
        pytest.param(encode_varint(50) + b"\x00\x00", id="length-past-end"),
        pytest.param(_body(), id="empty-body"),
        pytest.param(_body(b"\x00\x00\x00\x01\x01"), id="missing-header-count"),
        pytest.param(_body(b"\x00\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"), id="overlong-varlong"),
    ],
)
def test_malformed_records_raise_invalid_record(data: bytes) -> None:
    with pytest.raises(CorruptRecordError) as info:
        decode_record(data, 0, len(data), 0, 0)
    assert info.value.code == ErrorCode.INVALID_RECORD


def test_truncation_at_every_position() -> None:
    data = encode_record(3, -7, b"key", b"value" * 30, [("a", b"1"), ("b", None)])
    for cut in range(len(data)):
        with pytest.raises(CorruptRecordError):
            decode_record(data[:cut], 0, cut, 0, 0)
        # The end bound is honoured even if more bytes follow in the buffer.
        with pytest.raises(CorruptRecordError):
            decode_record(data, 0, cut, 0, 0)


def test_decode_records_count_mismatch() -> None:
    data = encode_record(0, 0, None, b"a") + encode_record(1, 0, None, b"b")
    assert [r.value for r in decode_records(data, 0, len(data), 2, 0, 0)] == [b"a", b"b"]
    with pytest.raises(CorruptRecordError, match="more data"):
        list(decode_records(data, 0, len(data), 1, 0, 0))
    with pytest.raises(CorruptRecordError, match="holds only 2"):
        list(decode_records(data, 0, len(data), 3, 0, 0))
    with pytest.raises(CorruptRecordError):
        list(decode_records(data, 0, len(data), -1, 0, 0))


@given(st.binary(max_size=64))
def test_decode_is_total(data: bytes) -> None:
    try:
        record, pos = decode_record(data, 0, len(data), 0, 0)
    except CorruptRecordError:
        return
    assert 0 < pos <= len(data)
    assert isinstance(record, Record)


@given(st.integers(INT32_MIN, INT32_MAX), nullable_bytes)
def test_negative_offset_deltas_still_decode(offset_delta: int, value: bytes | None) -> None:
    # Kafka does not reject odd deltas while decoding; the validator decides.
    data = encode_record(offset_delta, 0, None, value)
    record, _ = decode_record(data, 0, len(data), 100, 0)
    assert record.offset == 100 + offset_delta
