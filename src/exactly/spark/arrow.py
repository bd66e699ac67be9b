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

from typing import Any

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

BASE_SCHEMA_DDL = (
    "key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT, "
    "timestamp TIMESTAMP, timestampType INT"
)
HEADERS_DDL = "headers ARRAY<STRUCT<key: STRING, value: BINARY>>"
COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers")

# confluent-kafka's TIMESTAMP_NOT_AVAILABLE / CREATE_TIME / LOG_APPEND_TIME -> Kafka's TimestampType id
_TIMESTAMP_TYPE_ID = {0: -1, 1: 0, 2: 1}


def schema_ddl(include_headers: bool) -> str:
    return f"{BASE_SCHEMA_DDL}, {HEADERS_DDL}" if include_headers else BASE_SCHEMA_DDL


def unknown_columns(schema: StructType) -> list[str]:
    return [name for name in schema.fieldNames() if name not in COLUMNS]


class RecordColumns:
    """Column-wise accumulator of one partition's consumed records; `take()` returns them as one
    RecordBatch. `add` is the per-record hot path: plain appends, conversions happen per column."""

    def __init__(self, schema: StructType, topic: str, partition: int) -> None:
        self._arrow_schema = to_arrow_schema(schema, timezone="UTC")
        self._topic = topic
        self._partition = partition
        self._with_headers = "headers" in schema.fieldNames()
        self._reset()

    def _reset(self) -> None:
        self._keys: list[bytes | None] = []
        self._values: list[bytes | None] = []
        self._offsets: list[int] = []
        self._timestamps: list[tuple[int, int]] = []  # confluent-kafka's (type, milliseconds)
        self._headers: list[list[tuple[str, bytes | None]] | None] = []
        self.rows = 0

    def add(self, message: Any) -> None:
        """Append one confluent-kafka Message (a data record, not an error event)."""
        self._keys.append(message.key())
        self._values.append(message.value())
        self._offsets.append(message.offset())
        self._timestamps.append(message.timestamp())
        if self._with_headers:
            self._headers.append(message.headers())
        self.rows += 1

    def _column(self, name: str, arrow_type: pa.DataType) -> pa.Array:
        if name == "key":
            return pa.array(self._keys, type=arrow_type)
        if name == "value":
            return pa.array(self._values, type=arrow_type)
        if name == "topic":
            return pa.array([self._topic] * self.rows, type=arrow_type)
        if name == "partition":
            return pa.array([self._partition] * self.rows, type=arrow_type)
        if name == "offset":
            return pa.array(self._offsets, type=arrow_type)
        if name == "timestamp":
            return pa.array([ms * 1000 for _, ms in self._timestamps], type=arrow_type)
        if name == "timestampType":
            return pa.array(
                [_TIMESTAMP_TYPE_ID.get(kind, -1) for kind, _ in self._timestamps], type=arrow_type
            )
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
