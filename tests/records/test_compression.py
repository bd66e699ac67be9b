from __future__ import annotations

import gzip
import struct

import cramjam
import pytest
from hypothesis import given
from hypothesis import strategies as st

from exactly.errors import CorruptRecordError
from exactly.records.compression import (
    XERIAL_BLOCK_SIZE,
    XERIAL_HEADER,
    Compression,
    compress,
    decompress,
)

CODECS = list(Compression)
codec_ids = {"ids": lambda c: c.name.lower()}


@pytest.mark.parametrize("codec", CODECS, **codec_ids)
@given(data=st.binary(max_size=2048))
def test_round_trip(codec: Compression, data: bytes) -> None:
    assert decompress(codec, compress(codec, data)) == data


@pytest.mark.parametrize("codec", CODECS, **codec_ids)
def test_round_trip_large(codec: Compression) -> None:
    data = bytes(range(256)) * 2000 + b"tail"  # > several xerial blocks / lz4 blocks
    packed = compress(codec, data)
    assert decompress(codec, memoryview(packed)) == data
    assert decompress(codec, bytearray(packed)) == data


def test_snappy_is_xerial_framed() -> None:
    data = b"x" * (XERIAL_BLOCK_SIZE * 2 + 10)
    packed = compress(Compression.SNAPPY, data)
    assert packed.startswith(b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1))
    pos, blocks = len(XERIAL_HEADER), []
    while pos < len(packed):
        (length,) = struct.unpack_from(">i", packed, pos)
        blocks.append(bytes(cramjam.snappy.decompress_raw(packed[pos + 4 : pos + 4 + length])))
        pos += 4 + length
    assert [len(b) for b in blocks] == [XERIAL_BLOCK_SIZE, XERIAL_BLOCK_SIZE, 10]
    assert b"".join(blocks) == data


def test_snappy_raw_block_is_accepted() -> None:
    data = b"raw snappy " * 100
    assert decompress(Compression.SNAPPY, bytes(cramjam.snappy.compress_raw(data))) == data


def test_lz4_frame_uses_independent_blocks() -> None:
    packed = compress(Compression.LZ4, b"abc" * 100_000)
    assert packed[:4] == b"\x04\x22\x4d\x18"  # LZ4 frame magic
    flg = packed[4]
    assert flg >> 6 == 1  # version 01
    assert flg & 0x20  # block independence: Java's KafkaLZ4BlockInputStream needs it


def test_gzip_multiple_members() -> None:
    data = gzip.compress(b"one") + gzip.compress(b"two")
    assert decompress(Compression.GZIP, data) == b"onetwo"


@pytest.mark.parametrize("codec", [c for c in CODECS if c != Compression.NONE], **codec_ids)
def test_decompression_bomb_guard(codec: Compression) -> None:
    data = b"\x00" * 1_000_000
    packed = compress(codec, data)
    assert decompress(codec, packed, max_size=1_000_000) == data
    with pytest.raises(CorruptRecordError, match="exceeds"):
        decompress(codec, packed, max_size=999_999)
    with pytest.raises(CorruptRecordError, match="exceeds"):
        decompress(codec, packed, max_size=1000)


def test_none_respects_max_size() -> None:
    with pytest.raises(CorruptRecordError):
        decompress(Compression.NONE, b"abc", max_size=2)


def test_raw_snappy_bomb_guard() -> None:
    packed = bytes(cramjam.snappy.compress_raw(b"\x00" * 100_000))
    with pytest.raises(CorruptRecordError, match="exceeds"):
        decompress(Compression.SNAPPY, packed, max_size=99_999)


@pytest.mark.parametrize(
    "data",
    [
        XERIAL_HEADER[:10],
        XERIAL_HEADER + b"\x00\x00",
        XERIAL_HEADER + struct.pack(">i", 100) + b"short",
        XERIAL_HEADER + struct.pack(">i", -1),
        XERIAL_HEADER + struct.pack(">i", 3) + b"\xff\xff\xff",
    ],
)
def test_malformed_xerial(data: bytes) -> None:
    with pytest.raises(CorruptRecordError):
        decompress(Compression.SNAPPY, data)


@pytest.mark.parametrize("codec", CODECS, **codec_ids)
@given(data=st.binary(max_size=200))
def test_decompress_is_total(codec: Compression, data: bytes) -> None:
    try:
        out = decompress(codec, data, max_size=1 << 20)
    except CorruptRecordError:
        return
    assert isinstance(out, bytes)


@pytest.mark.parametrize("codec", [c for c in CODECS if c != Compression.NONE], **codec_ids)
def test_truncated_streams_raise(codec: Compression) -> None:
    packed = compress(codec, bytes(range(256)) * 64)
    for cut in (0, 1, len(packed) // 2, len(packed) - 1):
        try:
            out = decompress(codec, packed[:cut])
        except CorruptRecordError:
            continue
        # A truncated stream must never pass itself off as the original.
        assert out != bytes(range(256)) * 64
