"""Recompression of a producer's batches to the topic's `compression.type` (Kafka's `LogValidator`).

With `compression.type` = `producer` (the default) the client's bytes are stored as they are. With a
codec (`uncompressed`, `gzip`, `snappy`, `lz4`, `zstd`), a batch written with another codec is rewritten
before it is appended; a batch already in the target codec is kept byte for byte, as in Kafka (whatever
level the producer used).

A rewritten batch keeps everything but the codec: baseOffset, partitionLeaderEpoch, the attributes'
timestamp-type / transactional / control bits, lastOffsetDelta, base and max timestamps, producer id,
epoch and base sequence, recordsCount, and the records themselves (their offset and timestamp deltas,
keys, values, headers: the decompressed records blob is reused as it is). Only the attributes' codec bits,
batchLength, the records blob and the CRC change. Producer id / epoch / sequence are unchanged, so a
retried batch is still recognised as a duplicate. A blob that does not decompress is CORRUPT_MESSAGE and
nothing is stored. Records are not decoded, as on exactly's other append paths (`storage/validator.py`:
the client's CRC covered them; Kafka decodes each record here, at ~3 us a record in Python that would
double the cost).

Cost (one 100-record batch of 24 KB, a loaded 2-core machine): gzip ~0.2 ms, lz4 (level 9) ~0.1 ms,
zstd ~0.03 ms, snappy ~0.01 ms of compression, plus the decompression of a compressed source.
"""

from __future__ import annotations

import struct

import crc32c

from exactly.errors import CorruptRecordError, KafkaError
from exactly.records.batch import (
    ATTR_COMPRESSION_MASK,
    BATCH_HEADER_SIZE,
    CRC_OFFSET,
    CRC_START,
    LOG_OVERHEAD,
    RecordBatch,
)
from exactly.records.compression import Compression, compress
from exactly.storage.config import BrokerCompressionType, LogConfig

_TARGETS = {
    BrokerCompressionType.UNCOMPRESSED: Compression.NONE,
    BrokerCompressionType.GZIP: Compression.GZIP,
    BrokerCompressionType.SNAPPY: Compression.SNAPPY,
    BrokerCompressionType.LZ4: Compression.LZ4,
    BrokerCompressionType.ZSTD: Compression.ZSTD,
}
_LENGTH = struct.Struct(">i")
_ATTRIBUTES = struct.Struct(">h")
_LENGTH_OFFSET = 8
_ATTRIBUTES_OFFSET = 21


def target_codec(config: LogConfig) -> Compression | None:
    """The codec every stored batch must have, or None (`producer`: keep the client's)."""
    return _TARGETS.get(config.compression_type)


def _level(config: LogConfig, codec: Compression) -> int | None:
    if codec == Compression.GZIP:
        return config.compression_gzip_level
    if codec == Compression.LZ4:
        return config.compression_lz4_level
    if codec == Compression.ZSTD:
        return config.compression_zstd_level
    return None


def needs_recompression(buf: memoryview, positions: list[int], codec: Compression) -> bool:
    return any(RecordBatch(buf, pos).compression != codec for pos in positions)


def recompress(buf: memoryview, positions: list[int], config: LogConfig) -> bytes:
    """The batches at `positions` with the topic's codec (KafkaError when a record is malformed)."""
    codec = target_codec(config)
    assert codec is not None
    level = _level(config, codec)
    out = bytearray()
    for pos in positions:
        batch = RecordBatch(buf, pos)
        if batch.compression == codec:
            out += buf[pos : batch.end]
            continue
        try:
            records = batch.records_data()
        except CorruptRecordError as e:
            raise KafkaError(e.code, str(e)) from e
        blob = compress(codec, records, level)
        start = len(out)
        out += buf[pos : pos + BATCH_HEADER_SIZE]
        out += blob
        _LENGTH.pack_into(out, start + _LENGTH_OFFSET, BATCH_HEADER_SIZE - LOG_OVERHEAD + len(blob))
        attributes = (batch.attributes & ~ATTR_COMPRESSION_MASK) | int(codec)
        _ATTRIBUTES.pack_into(out, start + _ATTRIBUTES_OFFSET, attributes)
        crc = crc32c.crc32c(memoryview(out)[start + CRC_START :])
        out[start + CRC_OFFSET : start + CRC_OFFSET + 4] = crc.to_bytes(4, "big")
    return bytes(out)
