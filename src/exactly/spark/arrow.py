"""Kafka records -> Arrow record batches in the schema of Spark's Kafka source.

Spark schema (DDL), the columns Spark's own Kafka source has, `headers` only with includeHeaders=true:

    key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT,
    timestamp TIMESTAMP, timestampType INT, headers ARRAY<STRUCT<key: STRING, value: BINARY>>

`timestampType` is Kafka's TimestampType id: 0 CreateTime, 1 LogAppendTime, -1 none. `headers` is null
for a record without headers (as in Spark). A user schema may select a subset of these columns, in any
order; the batch's Arrow schema is Spark's conversion of it (`to_arrow_schema`, timestamps in UTC),
which is what pyspark checks a data source's batches against.
"""

from __future__ import annotations

import array
import itertools
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import Message
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

BASE_SCHEMA_DDL = (
    "key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT, "
    "timestamp TIMESTAMP, timestampType INT"
)
HEADERS_DDL = "headers ARRAY<STRUCT<key: STRING, value: BINARY>>"
COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers")


def schema_ddl(include_headers: bool) -> str:
    return f"{BASE_SCHEMA_DDL}, {HEADERS_DDL}" if include_headers else BASE_SCHEMA_DDL


def unknown_columns(schema: StructType) -> list[str]:
    return [name for name in schema.fieldNames() if name not in COLUMNS]


class RecordColumns:
    """Column-wise accumulator of one partition's consumed records; `take()` returns them as one
    RecordBatch. `add` is the hot path: a consume call's records go in column by column through C-level
    `map`s (no Python code runs per record), conversions happen per column in `take`."""

    def __init__(self, schema: StructType, topic: str, partition: int) -> None:
        self._arrow_schema = to_arrow_schema(schema, timezone="UTC")
        self._topic = topic
        self._partition = partition
        self._with_headers = "headers" in schema.fieldNames()
        self._rows_seen = self._bytes_seen = 0  # over every batch: the average record size
        self._reset()

    def rows_fitting(self, batch_bytes: int) -> int:
        """How many more records of the average size so far fit in a batch of `batch_bytes` (1 at least;
        1 before any record was seen, whose size tells)."""
        if not self._rows_seen:
            return 1
        average = max(self._bytes_seen / self._rows_seen, 1.0)
        return max(1, int((batch_bytes - self.bytes) / average))

    def _reset(self) -> None:
        self._keys: list[bytes | None] = []
        self._values: list[bytes | None] = []
        self._offsets: list[int | None] = []  # never None: data records have offsets
        self._timestamp_kinds: list[int] = []  # confluent-kafka's TIMESTAMP_* constants
        self._timestamps_ms: list[int] = []
        self._headers: list[Any] = []  # confluent-kafka's [(key, value)] or None
        self.rows = 0
        self.bytes = 0  # of keys and values

    def add(self, messages: Sequence[Message]) -> None:
        """Append confluent-kafka Messages (data records, not error events)."""
        if not messages:
            return
        keys, values = list(map(Message.key, messages)), list(map(Message.value, messages))
        self._keys += keys
        self._values += values
        added = sum(map(len, filter(None, keys))) + sum(map(len, filter(None, values)))
        self.bytes += added
        self._bytes_seen += added
        self._rows_seen += len(messages)
        self._offsets += map(Message.offset, messages)
        kinds, stamps = zip(*map(Message.timestamp, messages), strict=True)
        self._timestamp_kinds += kinds
        self._timestamps_ms += stamps
        if self._with_headers:
            self._headers += map(Message.headers, messages)
        self.rows += len(messages)

    def _column(self, name: str, arrow_type: pa.DataType) -> pa.Array:
        if name == "key":
            return _binary_array(self._keys, arrow_type)
        if name == "value":
            return _binary_array(self._values, arrow_type)
        if name == "topic":
            return pa.repeat(pa.scalar(self._topic, type=arrow_type), self.rows)
        if name == "partition":
            return pa.repeat(pa.scalar(self._partition, type=arrow_type), self.rows)
        if name == "offset":
            return _int_array(self._offsets, "q", pa.int64()).cast(arrow_type)
        if name == "timestamp":
            millis = _int_array(self._timestamps_ms, "q", pa.int64())
            return pc.multiply(millis, 1000).cast(arrow_type)
        if name == "timestampType":
            # TIMESTAMP_NOT_AVAILABLE / CREATE_TIME / LOG_APPEND_TIME (0, 1, 2) - 1 = Kafka's id (-1, 0, 1)
            kinds = _int_array(self._timestamp_kinds, "i", pa.int32())
            return pc.subtract(kinds, 1).cast(arrow_type)
        headers = [
            [{"key": k, "value": v} for k, v in record_headers] if record_headers else None
            for record_headers in self._headers
        ]
        return pa.array(headers, type=arrow_type)

    def take(self) -> pa.RecordBatch:
        arrays = [self._column(field.name, field.type) for field in self._arrow_schema]
        batch = pa.RecordBatch.from_arrays(arrays, schema=self._arrow_schema)
        self._reset()
        return batch


def _int_array(values: list[Any], typecode: str, arrow_type: pa.DataType) -> pa.Array:
    """A column of ints without nulls, from one buffer (`array.array` packs the list in C)."""
    return pa.Array.from_buffers(arrow_type, len(values), [None, pa.py_buffer(array.array(typecode, values))])


def _binary_array(values: list[bytes | None], arrow_type: pa.DataType) -> pa.Array:
    """A BINARY column. The usual cases are built from two buffers, each allocated once: the values
    joined, and their end offsets (`pa.array` of a list grows its buffers as it goes, and was a third of
    a reading task's CPU); all null (records without keys) is a null array; a mix goes through pa.array."""
    nulls = values.count(None)
    if nulls == 0:
        ends = array.array("i", [0])
        ends.extend(itertools.accumulate(map(len, values)))  # type: ignore[arg-type]
        data = b"".join(values)  # type: ignore[arg-type]
        return pa.Array.from_buffers(arrow_type, len(values), [None, pa.py_buffer(ends), pa.py_buffer(data)])
    if nulls == len(values):
        return pa.nulls(len(values), type=arrow_type)
    return pa.array(values, type=arrow_type)
