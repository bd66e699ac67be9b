"""The records of `__transaction_state`: Kafka's key and value formats, byte for byte.

One record per state change of a transactional.id, inside an ordinary uncompressed RecordBatch v2 (no
producer id). The partition is `abs(javaHashCode(transactional_id)) % transaction.state.log.num.partitions`;
the topic is compacted, so the last record of an id is its state. All integers are big-endian.

Key (`transaction-coordinator/.../TransactionLogKey.json`)::

    int16   version              0
    string  transactional_id     int16 length + UTF-8

Value (`TransactionLogValue.json`; null value = tombstone: the id expired and is forgotten)::

    int16   version              0 or 1 (exactly writes 0; 1 is flexible: compact strings and arrays,
                                 tagged fields after the struct and after each partition entry)
    int64   producer_id
    int16   producer_epoch
    int32   transaction_timeout_ms
    int8    transaction_status   TxnState id (state.py); never 6 or 7 in a value
    [ ]     transaction_partitions (nullable; null when the status is Empty) — per topic:
        string  topic
        [int32] partition_ids
    int64   transaction_last_update_timestamp_ms
    int64   transaction_start_timestamp_ms    -1 when no transaction is open
    v1 tagged fields: 0 previous_producer_id (int64, default -1): the producer id before this transition,
                      1 next_producer_id (int64, default -1): the producer id a transaction version 2
                          PrepareCommit/PrepareAbort rotates to (its epoch was exhausted),
                      2 client_transaction_version (int16, default 0): 2 when the transaction is driven
                          by a transaction version 2 client (EndTxn v5 / AddPartitionsToTxn v4+ adds),
                      3 next_producer_epoch (int16, default -1; KIP-939, read and kept, never set here),
                      10000 prepared (exactly's two-phase commit extension, docs/two-phase-commit.md):
                          compact_string query_id, int64 batch_id, int32 partition,
                          int64 prepared_timestamp_ms

The value version follows the finalized `transaction.version` (Kafka's `transactionLogValueVersion`): 0
writes v0, 1 and 2 (the default) write v1 with the tagged fields above that differ from their defaults.
The seeds' `__transaction_state` table (seed 000) lists the same fields. New information (the Spark
sink's prepared transactions) goes into new v1 tagged fields: older readers skip them. A Prepared
transaction (TxnState.PREPARED) is stored as status Ongoing (1) with the `prepared` tag, always as v1, so a
Kafka reader sees an Ongoing transaction; PrepareCommit/PrepareAbort records of a prepared transaction keep
the tag (who it was prepared for). Batch decision records share the topic with key version 100
(`decisions.py`); `key_version` tells them apart.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from exactly.errors import CorruptRecordError, ProtocolError
from exactly.protocol import primitives as p
from exactly.txn.state import TxnState

__all__ = [
    "PREPARED_TAG",
    "PreparedTag",
    "TransactionLogValue",
    "decode_key",
    "decode_value",
    "encode_key",
    "encode_value",
    "key_version",
]

_VALUE_V0 = struct.Struct(">hqhib")  # version, producer_id, producer_epoch, timeout, status
_TIMES = struct.Struct(">qq")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")

Partitions = frozenset[tuple[str, int]]

PREPARED_TAG = 10000
_PREPARED_REST = struct.Struct(">qiq")


@dataclass(frozen=True, slots=True)
class PreparedTag:
    """What a Prepared transaction was prepared for (PrepareTxn), and when."""

    query_id: str
    batch_id: int
    partition: int
    prepared_timestamp_ms: int

    def encode(self) -> bytes:
        return p.compact_string(self.query_id) + _PREPARED_REST.pack(
            self.batch_id, self.partition, self.prepared_timestamp_ms
        )

    @classmethod
    def decode(cls, data: bytes) -> PreparedTag:
        buf = memoryview(data)
        query_id, pos = p.read_compact_string(buf, 0)
        batch_id, partition, timestamp = _PREPARED_REST.unpack_from(buf, pos)
        if pos + _PREPARED_REST.size != len(buf):
            raise CorruptRecordError("prepared tag has trailing bytes")
        return cls(query_id, batch_id, partition, timestamp)


@dataclass(frozen=True, slots=True)
class TransactionLogValue:
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    state: TxnState
    partitions: Partitions
    last_update_timestamp_ms: int
    start_timestamp_ms: int
    previous_producer_id: int = -1
    next_producer_id: int = -1
    client_transaction_version: int = 0
    prepared: PreparedTag | None = None
    next_producer_epoch: int = -1
    unknown_tags: tuple[tuple[int, bytes], ...] = field(default=(), compare=False)


def encode_key(transactional_id: str) -> bytes:
    return _I16.pack(0) + p.string(transactional_id)


def key_version(raw: bytes | memoryview) -> int:
    """The version of a `__transaction_state` key: 0 for a transactional id, 100 for a batch decision."""
    if len(raw) < 2:
        raise CorruptRecordError("__transaction_state key shorter than its version")
    (version,) = _I16.unpack_from(raw, 0)
    return int(version)


def decode_key(raw: bytes | memoryview) -> str:
    buf = memoryview(raw)
    try:
        (version,) = _I16.unpack_from(buf, 0)
        if version != 0:
            raise CorruptRecordError(f"unknown __transaction_state key version {version}")
        transactional_id, pos = p.read_string(buf, 2)
    except (struct.error, UnicodeDecodeError, IndexError, ProtocolError) as e:
        raise CorruptRecordError(f"bad __transaction_state key: {e}") from e
    if pos != len(buf):
        raise CorruptRecordError("__transaction_state key has trailing bytes")
    return transactional_id


def _grouped(partitions: Partitions) -> list[tuple[str, list[int]]]:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(partitions):
        by_topic.setdefault(topic, []).append(partition)
    return list(by_topic.items())


def encode_value(value: TransactionLogValue | None, version: int = 0) -> bytes | None:
    if value is None:
        return None
    if value.state in (TxnState.DEAD, TxnState.PREPARE_EPOCH_FENCE):
        raise ValueError(f"{value.state.kafka_name} is never stored")
    if (value.state is TxnState.PREPARED) != (value.prepared is not None) and not value.state.is_prepare:
        raise ValueError("a Prepared transaction, and only one, carries its prepared tag")
    if value.prepared is not None:
        version = 1  # the tag needs the flexible version
    status = TxnState.ONGOING if value.state is TxnState.PREPARED else value.state
    out = bytearray(
        _VALUE_V0.pack(
            version,
            value.producer_id,
            value.producer_epoch,
            value.transaction_timeout_ms,
            status.value,
        )
    )
    grouped = None if value.state is TxnState.EMPTY and not value.partitions else _grouped(value.partitions)
    flexible = version >= 1
    if grouped is None:
        out += b"\x00" if flexible else _I32.pack(-1)
    else:
        out += p.compact_array_len(len(grouped)) if flexible else _I32.pack(len(grouped))
        for topic, ids in grouped:
            out += p.compact_string(topic) if flexible else p.string(topic)
            out += p.compact_array_len(len(ids)) if flexible else _I32.pack(len(ids))
            for partition in ids:
                out += _I32.pack(partition)
            if flexible:
                out += b"\x00"
    out += _TIMES.pack(value.last_update_timestamp_ms, value.start_timestamp_ms)
    if flexible:
        tags: list[tuple[int, bytes]] = []
        if value.previous_producer_id != -1:
            tags.append((0, _I64.pack(value.previous_producer_id)))
        if value.next_producer_id != -1:
            tags.append((1, _I64.pack(value.next_producer_id)))
        if value.client_transaction_version != 0:
            tags.append((2, _I16.pack(value.client_transaction_version)))
        if value.next_producer_epoch != -1:
            tags.append((3, _I16.pack(value.next_producer_epoch)))
        if value.prepared is not None:
            tags.append((PREPARED_TAG, value.prepared.encode()))
        tags.extend(value.unknown_tags)
        out += p.tagged_fields(sorted(tags))
    return bytes(out)


def decode_value(raw: bytes | memoryview | None) -> TransactionLogValue | None:
    """Decode a value (None for a tombstone); raises CorruptRecordError on anything malformed."""
    if raw is None:
        return None
    buf = memoryview(raw)
    try:
        return _decode_value(buf)
    except (struct.error, UnicodeDecodeError, ValueError, IndexError, ProtocolError) as e:
        raise CorruptRecordError(f"bad __transaction_state value: {e}") from e


def _decode_value(buf: memoryview) -> TransactionLogValue:
    version, producer_id, epoch, timeout, status = _VALUE_V0.unpack_from(buf, 0)
    if version not in (0, 1):
        raise CorruptRecordError(f"unknown __transaction_state value version {version}")
    state = TxnState(status)
    if state in (TxnState.DEAD, TxnState.PREPARE_EPOCH_FENCE, TxnState.PREPARED):
        raise CorruptRecordError(f"__transaction_state value with status {state.kafka_name}")
    flexible = version == 1
    pos = _VALUE_V0.size
    if flexible:
        count, pos = p.read_compact_array_len(buf, pos)
    else:
        count, pos = p.read_array_len(buf, pos)
    partitions: set[tuple[str, int]] = set()
    for _ in range(max(count, 0)):
        topic, pos = p.read_compact_string(buf, pos) if flexible else p.read_string(buf, pos)
        if flexible:
            n, pos = p.read_compact_array_len(buf, pos)
        else:
            n, pos = p.read_array_len(buf, pos)
        for _ in range(max(n, 0)):
            (partition,) = _I32.unpack_from(buf, pos)
            pos += 4
            partitions.add((topic, partition))
        if flexible:
            pos = p.skip_tagged_fields(buf, pos)
    last_update, start = _TIMES.unpack_from(buf, pos)
    pos += _TIMES.size
    previous, nxt, client_version, next_epoch = -1, -1, 0, -1
    prepared: PreparedTag | None = None
    unknown: list[tuple[int, bytes]] = []
    if flexible:
        n_tags, pos = p.read_uvarint(buf, pos)
        for _ in range(n_tags):
            tag, data_end, data_start = p.read_tag_header(buf, pos)
            data = bytes(buf[data_start:data_end])
            size, pos = data_end - data_start, data_end
            if tag == 0 and size == 8:
                (previous,) = _I64.unpack(data)
            elif tag == 1 and size == 8:
                (nxt,) = _I64.unpack(data)
            elif tag == 2 and size == 2:
                (client_version,) = _I16.unpack(data)
            elif tag == 3 and size == 2:
                (next_epoch,) = _I16.unpack(data)
            elif tag == PREPARED_TAG:
                prepared = PreparedTag.decode(data)
            else:
                unknown.append((tag, data))
    if pos != len(buf):
        raise CorruptRecordError("__transaction_state value has trailing bytes")
    if prepared is not None and state is TxnState.ONGOING:
        state = TxnState.PREPARED
    elif prepared is not None and not state.is_prepare:
        raise CorruptRecordError(f"prepared tag on a {state.kafka_name} transaction")
    return TransactionLogValue(
        producer_id,
        epoch,
        timeout,
        state,
        frozenset(partitions),
        last_update,
        start,
        previous,
        nxt,
        client_version,
        prepared,
        next_epoch,
        tuple(unknown),
    )
