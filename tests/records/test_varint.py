from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from exactly.errors import CorruptRecordError, ErrorCode
from exactly.records.varint import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    decode_unsigned_varint,
    decode_unsigned_varlong,
    decode_varint,
    decode_varlong,
    encode_unsigned_varint,
    encode_unsigned_varlong,
    encode_varint,
    encode_varlong,
    size_of_unsigned_varint,
    size_of_varint,
    size_of_varlong,
    write_varint,
    write_varlong,
)

int32s = st.integers(INT32_MIN, INT32_MAX)
int64s = st.integers(INT64_MIN, INT64_MAX)
# Bias towards the byte-length boundaries: +-2**(7k) and the extremes.
boundaries32 = st.sampled_from(
    [0, -1, 1, 63, -64, 64, -65, 8191, -8192, 8192, INT32_MIN, INT32_MAX, INT32_MIN + 1, INT32_MAX - 1]
    + [s * (1 << (7 * k)) + d for k in range(1, 5) for s in (1, -1) for d in (-1, 0, 1)]
).filter(lambda v: INT32_MIN <= v <= INT32_MAX)
boundaries64 = st.sampled_from(
    [0, -1, 1, INT64_MIN, INT64_MAX, INT64_MIN + 1, INT64_MAX - 1]
    + [s * (1 << (7 * k)) + d for k in range(1, 10) for s in (1, -1) for d in (-1, 0, 1)]
).filter(lambda v: INT64_MIN <= v <= INT64_MAX)


# Known vectors (zig-zag: 0 -> 0, -1 -> 1, 1 -> 2, -2 -> 3, ...; then base-128 little-endian groups).
@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, b"\x00"),
        (-1, b"\x01"),
        (1, b"\x02"),
        (-2, b"\x03"),
        (63, b"\x7e"),
        (-64, b"\x7f"),
        (64, b"\x80\x01"),
        (300, b"\xd8\x04"),
        (INT32_MAX, b"\xfe\xff\xff\xff\x0f"),
        (INT32_MIN, b"\xff\xff\xff\xff\x0f"),
    ],
)
def test_varint_vectors(value: int, encoded: bytes) -> None:
    assert encode_varint(value) == encoded
    assert decode_varint(encoded, 0) == (value, len(encoded))
    assert encode_varlong(value) == encoded
    assert decode_varlong(encoded, 0) == (value, len(encoded))


def test_varlong_extremes() -> None:
    assert encode_varlong(INT64_MAX) == b"\xfe" + b"\xff" * 8 + b"\x01"
    assert encode_varlong(INT64_MIN) == b"\xff" * 9 + b"\x01"
    assert decode_varlong(encode_varlong(INT64_MIN), 0) == (INT64_MIN, 10)


@given(st.one_of(int32s, boundaries32))
def test_varint_round_trip(value: int) -> None:
    encoded = encode_varint(value)
    assert len(encoded) == size_of_varint(value) <= 5
    assert decode_varint(b"junk" + encoded + b"tail", 4) == (value, 4 + len(encoded))
    out = bytearray(b"x")
    write_varint(out, value)
    assert bytes(out) == b"x" + encoded
    # A varint decodes the same as a varlong.
    assert decode_varlong(encoded, 0) == (value, len(encoded))


@given(st.one_of(int64s, boundaries64))
def test_varlong_round_trip(value: int) -> None:
    encoded = encode_varlong(value)
    assert len(encoded) == size_of_varlong(value) <= 10
    assert decode_varlong(memoryview(b"\x00" + encoded), 1) == (value, 1 + len(encoded))
    out = bytearray()
    write_varlong(out, value)
    assert bytes(out) == encoded


@given(st.integers(0, (1 << 32) - 1))
def test_unsigned_varint_round_trip(value: int) -> None:
    encoded = encode_unsigned_varint(value)
    assert len(encoded) == size_of_unsigned_varint(value)
    assert decode_unsigned_varint(bytearray(encoded), 0) == (value, len(encoded))


@given(st.integers(0, (1 << 64) - 1))
def test_unsigned_varlong_round_trip(value: int) -> None:
    encoded = encode_unsigned_varlong(value)
    assert decode_unsigned_varlong(encoded, 0) == (value, len(encoded))


@pytest.mark.parametrize(
    ("encode", "value"),
    [
        (encode_varint, INT32_MAX + 1),
        (encode_varint, INT32_MIN - 1),
        (encode_varlong, INT64_MAX + 1),
        (encode_varlong, INT64_MIN - 1),
        (encode_unsigned_varint, -1),
        (encode_unsigned_varint, 1 << 32),
        (encode_unsigned_varlong, 1 << 64),
    ],
)
def test_encode_out_of_range(encode: object, value: int) -> None:
    assert callable(encode)
    with pytest.raises(ValueError, match="range"):
        encode(value)


@pytest.mark.parametrize(
    ("decode", "data"),
    [
        (decode_varint, b""),
        (decode_varint, b"\x80"),
        (decode_varint, b"\xff\xff\xff\xff"),
        (decode_varint, b"\xff\xff\xff\xff\xff\x01"),  # 6 bytes: too long for an int32
        (decode_unsigned_varint, b"\x80\x80\x80\x80\x80\x00"),
        (decode_varlong, b"\xff" * 10 + b"\x01"),  # 11 bytes
        (decode_varlong, b"\xff" * 9),
        (decode_unsigned_varlong, b"\x80"),
    ],
)
def test_malformed_varints_raise_corrupt_record(decode: object, data: bytes) -> None:
    assert callable(decode)
    with pytest.raises(CorruptRecordError) as info:
        decode(data, 0)
    assert info.value.code == ErrorCode.INVALID_RECORD


def test_decode_past_end_and_negative_position() -> None:
    with pytest.raises(CorruptRecordError):
        decode_varint(b"\x02", 1)
    with pytest.raises(CorruptRecordError):
        decode_varint(b"\x02", -1)
    with pytest.raises(CorruptRecordError):
        decode_varlong(b"\x02\x02", -1)


def test_fifth_byte_high_bits_are_truncated_like_java() -> None:
    # Java's readVarint keeps only 32 bits: 0x7f in the 5th byte behaves like 0x0f.
    assert decode_varint(b"\xfe\xff\xff\xff\x7f", 0) == decode_varint(b"\xfe\xff\xff\xff\x0f", 0)


@given(st.binary(max_size=12), st.integers(0, 12))
def test_decoders_are_total(data: bytes, pos: int) -> None:
    for decode in (decode_varint, decode_varlong, decode_unsigned_varint, decode_unsigned_varlong):
        try:
            value, new_pos = decode(data, pos)
        except CorruptRecordError:
            continue
        assert pos < new_pos <= len(data)
        assert isinstance(value, int)
