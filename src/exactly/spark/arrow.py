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
    RecordBatch."""

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
        self._timestamps: list[int] = []
        self._timestamp_types: list[int] = []
        self._headers: list[list[dict[str, Any]] | None] = []
        self.rows = 0

    def add(self, message: Any) -> None:
        """Append one confluent-kafka Message (a data record, not an error event)."""
        self._keys.append(message.key())
        self._values.append(message.value())
        self._offsets.append(message.offset())
        timestamp_type, timestamp_ms = message.timestamp()
        self._timestamps.append(timestamp_ms * 1000)
        self._timestamp_types.append(_TIMESTAMP_TYPE_ID.get(timestamp_type, -1))
        if self._with_headers:
            headers = message.headers()
            self._headers.append([{"key": k, "value": v} for k, v in headers] if headers else None)
        self.rows += 1

    def take(self) -> pa.RecordBatch:
        data: dict[str, Any] = {
            "key": self._keys,
            "value": self._values,
            "topic": [self._topic] * self.rows,
            "partition": [self._partition] * self.rows,
            "offset": self._offsets,
            "timestamp": self._timestamps,
            "timestampType": self._timestamp_types,
            "headers": self._headers,
        }
        arrays = [pa.array(data[field.name], type=field.type) for field in self._arrow_schema]
        batch = pa.RecordBatch.from_arrays(arrays, schema=self._arrow_schema)
        self._reset()
        return batch
