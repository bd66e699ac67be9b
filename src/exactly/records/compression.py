"""Record-batch compression codecs (attributes bits 0-2), on top of cramjam.

A compressed v2 batch compresses the concatenated records (everything after the 61-byte header) as one
blob. The formats, as the clients write them::

    GZIP   (1)  RFC 1952 gzip stream (several concatenated members are accepted)
    SNAPPY (2)  either raw snappy block format (librdkafka/kafka-python may write it), or Xerial framing
                as Java's snappy-java `SnappyOutputStream` writes it:
                    magic   8 bytes  "\\x82SNAPPY\\x00"
                    version int32    1
                    compat  int32    1
                    [length int32, raw snappy block of `length` bytes]*   (big-endian lengths)
    LZ4    (3)  standard LZ4 frame format (magic 0x184D2204); we write independent blocks so that Java's
                `KafkaLZ4BlockInputStream` can read what we write
    ZSTD   (4)  zstd frame(s)

`decompress` never returns more than ``max_size`` bytes (decompression-bomb guard) and raises only
`CorruptRecordError` (CORRUPT_MESSAGE) on bad input.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from enum import IntEnum

import cramjam

from exactly.errors import CorruptRecordError

__all__ = [
    "DEFAULT_MAX_DECOMPRESSED_SIZE",
    "XERIAL_BLOCK_SIZE",
    "XERIAL_HEADER",
    "XERIAL_MAGIC",
    "Compression",
    "compress",
    "decompress",
]

#: Default cap on the decompressed size of one batch (Kafka has no such cap; 128 MiB is generous).
DEFAULT_MAX_DECOMPRESSED_SIZE = 128 * 1024 * 1024

XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
#: Uncompressed bytes per Xerial block (snappy-java's default block size).
XERIAL_BLOCK_SIZE = 32 * 1024

_I32 = struct.Struct(">i")
_TOO_SMALL = "whole buffer"  # cramjam's message when the output buffer is too small


class Compression(IntEnum):
    """Compression codec id, stored in attributes bits 0-2."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


def compress(codec: Compression, data: bytes | bytearray | memoryview, level: int | None = None) -> bytes:
    """Compress ``data`` as ``codec`` for a v2 batch (snappy is written Xerial-framed, as Java does).

    ``level`` is Kafka's `compression.<codec>.level` (gzip -1 = zlib's default 6; snappy has none);
    None keeps the library default.
    """
    if codec == Compression.NONE:
        return bytes(data)
    if codec == Compression.GZIP:
        if level is None or level < 0:
            return bytes(cramjam.gzip.compress(data))
        return bytes(cramjam.gzip.compress(data, level=level))
    if codec == Compression.SNAPPY:
        return _xerial_compress(memoryview(data))
    if codec == Compression.LZ4:
        compressor = cramjam.lz4.Compressor(level=level, block_linked=False)
        compressor.compress(bytes(data))
        return bytes(compressor.finish())
    if codec == Compression.ZSTD:
        return bytes(
            cramjam.zstd.compress(data) if level is None else cramjam.zstd.compress(data, level=level)
        )
    raise ValueError(f"unknown compression codec {codec!r}")


def decompress(
    codec: Compression,
    data: bytes | bytearray | memoryview,
    max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> bytes:
    """Decompress one batch's records blob; CorruptRecordError if malformed or larger than ``max_size``."""
    if codec == Compression.NONE:
        if len(data) > max_size:
            raise _too_big(max_size)
        return bytes(data)
    if codec == Compression.GZIP:
        return _bounded(cramjam.gzip.decompress_into, data, max_size, "gzip")
    if codec == Compression.SNAPPY:
        view = memoryview(data)
        if view[: len(XERIAL_MAGIC)] == XERIAL_MAGIC:
            return _xerial_decompress(view, max_size)
        return _snappy_raw(view, max_size)
    if codec == Compression.LZ4:
        return _bounded(cramjam.lz4.decompress_into, data, max_size, "lz4")
    if codec == Compression.ZSTD:
        return _bounded(cramjam.zstd.decompress_into, data, max_size, "zstd")
    raise CorruptRecordError(f"unknown compression codec {int(codec)}")


def _too_big(max_size: int) -> CorruptRecordError:
    return CorruptRecordError(f"decompressed batch exceeds the limit of {max_size} bytes")


def _bounded(
    decompress_into: Callable[[bytes | bytearray | memoryview, bytearray], int],
    data: bytes | bytearray | memoryview,
    max_size: int,
    name: str,
) -> bytes:
    """Decompress into buffers of growing size, never larger than ``max_size + 1`` bytes."""
    cap = max_size + 1
    size = min(cap, max(64 * 1024, 8 * len(data)))
    while True:
        out = bytearray(size)
        try:
            n = int(decompress_into(data, out))
        except cramjam.DecompressionError as exc:
            if _TOO_SMALL in str(exc):
                if size >= cap:
                    raise _too_big(max_size) from None
                size = min(cap, size * 4)
                continue
            raise CorruptRecordError(f"{name} decompression failed: {exc}") from None
        if n > max_size:
            raise _too_big(max_size)
        if n == size:
            return bytes(out)
        return bytes(memoryview(out)[:n])


def _snappy_raw(view: memoryview, max_size: int) -> bytes:
    try:
        n = int(cramjam.snappy.decompress_raw_len(view))
    except cramjam.DecompressionError as exc:
        raise CorruptRecordError(f"snappy decompression failed: {exc}") from None
    if n > max_size:
        raise _too_big(max_size)
    out = bytearray(n)
    try:
        written = int(cramjam.snappy.decompress_raw_into(view, out))
    except cramjam.DecompressionError as exc:
        raise CorruptRecordError(f"snappy decompression failed: {exc}") from None
    if written != n:
        raise CorruptRecordError("snappy block shorter than its declared length")
    return bytes(out)


def _xerial_decompress(view: memoryview, max_size: int) -> bytes:
    if len(view) < len(XERIAL_HEADER):
        raise CorruptRecordError("truncated xerial snappy header")
    pos = len(XERIAL_HEADER)
    end = len(view)
    chunks: list[bytes] = []
    total = 0
    while pos < end:
        if end - pos < 4:
            raise CorruptRecordError("truncated xerial snappy block length")
        (length,) = _I32.unpack_from(view, pos)
        pos += 4
        if length < 0 or length > end - pos:
            raise CorruptRecordError(f"invalid xerial snappy block length {length}")
        chunk = _snappy_raw(view[pos : pos + length], max_size - total)
        total += len(chunk)
        chunks.append(chunk)
        pos += length
    return b"".join(chunks)


def _xerial_compress(view: memoryview) -> bytes:
    out = bytearray(XERIAL_HEADER)
    for start in range(0, len(view), XERIAL_BLOCK_SIZE):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + XERIAL_BLOCK_SIZE]))
        out += _I32.pack(len(block))
        out += block
    return bytes(out)
