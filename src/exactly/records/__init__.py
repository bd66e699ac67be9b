"""Kafka RecordBatch v2: zero-copy batch views, records, compression, control markers, builders.

Pure and synchronous: no sockets, files or clocks. See the module docstrings for the byte layouts.
"""

from exactly.records.batch import (
    ATTR_COMPRESSION_MASK,
    ATTR_CONTROL,
    ATTR_DELETE_HORIZON,
    ATTR_TIMESTAMP_TYPE,
    ATTR_TRANSACTIONAL,
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    BatchHeader,
    RecordBatch,
    TimestampType,
    iter_batches,
    set_base_offset,
    set_crc,
    set_log_append_time,
    set_partition_leader_epoch,
)
from exactly.records.builder import BatchBuilder, build_batch
from exactly.records.compression import DEFAULT_MAX_DECOMPRESSED_SIZE, Compression, compress, decompress
from exactly.records.control import (
    ControlRecordType,
    EndTxnMarker,
    build_end_txn_marker_batch,
    parse_end_txn_marker,
)
from exactly.records.record import Record, decode_record, encode_record

__all__ = [
    "ATTR_COMPRESSION_MASK",
    "ATTR_CONTROL",
    "ATTR_DELETE_HORIZON",
    "ATTR_TIMESTAMP_TYPE",
    "ATTR_TRANSACTIONAL",
    "BATCH_HEADER_SIZE",
    "DEFAULT_MAX_DECOMPRESSED_SIZE",
    "LOG_OVERHEAD",
    "MAGIC",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "NO_SEQUENCE",
    "NO_TIMESTAMP",
    "BatchBuilder",
    "BatchHeader",
    "Compression",
    "ControlRecordType",
    "EndTxnMarker",
    "Record",
    "RecordBatch",
    "TimestampType",
    "build_batch",
    "build_end_txn_marker_batch",
    "compress",
    "decode_record",
    "decompress",
    "encode_record",
    "iter_batches",
    "parse_end_txn_marker",
    "set_base_offset",
    "set_crc",
    "set_log_append_time",
    "set_partition_leader_epoch",
]
