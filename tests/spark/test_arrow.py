"""`RecordColumns`: confluent-kafka Messages (real `Message` values, built as a consumer returns them)
to the Arrow batches of Spark's Kafka schema, column by column."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow as pa
from confluent_kafka import Message
from hypothesis import given
from hypothesis import strategies as st
from pyspark.sql.types import StructType

from exactly.spark.arrow import RecordColumns
from tests.spark.support import kafka_schema

payloads = st.one_of(st.none(), st.binary(max_size=40))
headers = st.one_of(st.none(), st.lists(st.tuples(st.text(max_size=5), payloads), min_size=1, max_size=3))
records = st.lists(
    st.tuples(
        payloads,  # key
        payloads,  # value
        st.sampled_from([0, 1, 2]),  # TIMESTAMP_NOT_AVAILABLE, CREATE_TIME, LOG_APPEND_TIME
        st.integers(min_value=0, max_value=2**41),  # milliseconds
        headers,
    ),
    max_size=30,
)


def _messages(topic: str, partition: int, rows: list[Any]) -> list[Message]:
    return [
        Message(
            topic=topic,
            partition=partition,
            offset=100 + i,
            key=key,
            value=value,
            timestamp=(kind, ms),
            headers=hdrs,
        )
        for i, (key, value, kind, ms, hdrs) in enumerate(rows)
    ]


@given(records, st.lists(st.integers(min_value=1, max_value=7), max_size=10))
def test_every_column_holds_what_the_messages_carried(rows: list[Any], chunks: list[int]) -> None:
    schema = kafka_schema(headers=True)
    columns = RecordColumns(schema, "events", 3)
    messages = _messages("events", 3, rows)
    start = 0
    for size in [*chunks, len(messages)]:  # added a consume call's worth at a time
        columns.add(messages[start : start + size])
        start += size
    assert columns.rows == len(rows)
    assert columns.bytes == sum(len(k or b"") + len(v or b"") for k, v, *_ in rows)
    batch = columns.take()
    assert batch.schema.names == schema.fieldNames()
    assert columns.rows == 0
    assert columns.bytes == 0
    expected = [
        {
            "key": key,
            "value": value,
            "topic": "events",
            "partition": 3,
            "offset": 100 + i,
            "timestamp": dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(milliseconds=ms),
            "timestampType": kind - 1,
            "headers": [{"key": k, "value": v} for k, v in hdrs] if hdrs else None,
        }
        for i, (key, value, kind, ms, hdrs) in enumerate(rows)
    ]
    assert batch.to_pylist() == expected


def test_a_user_schema_gets_only_its_columns_in_its_order() -> None:
    schema = StructType([kafka_schema()["offset"], kafka_schema()["value"]])
    columns = RecordColumns(schema, "t", 0)
    columns.add(_messages("t", 0, [(None, b"a", 1, 5, None), (b"k", None, 1, 6, None)]))
    batch = columns.take()
    assert batch.schema == pa.schema([("offset", pa.int64()), ("value", pa.binary())])
    assert batch.to_pylist() == [{"offset": 100, "value": b"a"}, {"offset": 101, "value": None}]


def test_rows_fitting_follows_the_average_record_size() -> None:
    columns = RecordColumns(kafka_schema(), "t", 0)
    assert columns.rows_fitting(1000) == 1  # nothing seen yet: one record tells the size
    columns.add(_messages("t", 0, [(b"kk", b"v" * 98, 1, 0, None)] * 4))  # 100 bytes each
    assert columns.bytes == 400
    assert columns.rows_fitting(1000) == 6  # (1000 - 400) / 100
    assert columns.rows_fitting(300) == 1  # the batch is past the bound: one at least
    columns.take()
    assert columns.rows_fitting(1000) == 10  # the average outlives the batch
