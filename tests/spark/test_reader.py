"""The reader of the `exactly` data source against the real broker, in Spark local mode.

Records are written with confluent-kafka (committed, aborted and still-open transactions, and plain
idempotent records); what Spark reads is compared record by record (topic, partition, offset, value).
Streaming queries use foreachBatch, which runs in this process, to see every micro-batch's rows.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from exactly.testing.processes import BrokerProcess, free_port
from tests.spark.support import (
    Transaction,
    aborted,
    add_partitions,
    committed,
    kafka_schema,
    new_topic,
    produce,
    unique_name,
    wait_for,
)

pytestmark = [pytest.mark.interop, pytest.mark.slow]

Row = tuple[str, int, int, bytes]  # topic, partition, offset, value
QUERY_TIMEOUT = 120


def _options(reader: Any, bootstrap: str, options: dict[str, str]) -> Any:
    reader = reader.format("exactly").option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader


def _read(spark: Any, bootstrap: str, **options: str) -> Any:
    return _options(spark.read, bootstrap, options).load()


def _rows(df: Any) -> list[Row]:
    return sorted((r.topic, r.partition, r.offset, bytes(r.value)) for r in df.collect())


class BatchLog:
    """foreachBatch target: batch id -> the rows of that micro-batch (a replayed id is kept per run)."""

    def __init__(self) -> None:
        self.batches: dict[int, list[Row]] = {}
        self.lock = threading.Lock()

    def __call__(self, df: Any, batch_id: int) -> None:
        rows = _rows(df)
        with self.lock:
            self.batches[batch_id] = rows

    def values(self) -> list[bytes]:
        with self.lock:
            return sorted(row[3] for rows in self.batches.values() for row in rows)


def _run_available_now(spark: Any, bootstrap: str, checkpoint: Path, **options: str) -> dict[int, list[Row]]:
    """One Trigger.AvailableNow run of a query from `checkpoint`; the rows of each batch it ran."""
    log = BatchLog()
    query = (
        _options(spark.readStream, bootstrap, options)
        .load()
        .writeStream.foreachBatch(log)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(QUERY_TIMEOUT), "the AvailableNow query did not finish"
    assert query.exception() is None, query.exception()
    return log.batches


def _values(batches: dict[int, list[Row]]) -> list[bytes]:
    return sorted(row[3] for rows in batches.values() for row in rows)


def test_batch_read_committed_skips_aborted_and_open(spark: Any, spark_broker: BrokerProcess) -> None:
    bootstrap = spark_broker.bootstrap
    topic = new_topic(bootstrap, "batch", 2)
    committed(bootstrap, topic, [(0, b"a0"), (1, b"a1"), (0, b"a2")])
    aborted(bootstrap, topic, [(0, b"x0"), (1, b"x1")])
    still_open = Transaction(bootstrap, topic, [(1, b"open1")])
    committed(bootstrap, topic, [(0, b"b0"), (1, b"b1")])
    got = [(p, v) for _, p, _, v in _rows(_read(spark, bootstrap, subscribe=topic))]
    # partition 1: b1 comes after the open transaction's first offset, so the LSO hides it too
    assert sorted(got) == [(0, b"a0"), (0, b"a2"), (0, b"b0"), (1, b"a1")]
    still_open.commit()
    got = [(p, v) for _, p, _, v in _rows(_read(spark, bootstrap, subscribe=topic))]
    assert sorted(got) == [(0, b"a0"), (0, b"a2"), (0, b"b0"), (1, b"a1"), (1, b"b1"), (1, b"open1")]
    # read_uncommitted (asked for explicitly) sees the aborted records too
    dirty = _read(spark, bootstrap, subscribe=topic, **{"kafka.isolation.level": "read_uncommitted"})
    assert {v for *_, v in _rows(dirty)} >= {b"x0", b"x1"}


def test_batch_read_starting_and_ending_offsets(spark: Any, spark_broker: BrokerProcess) -> None:
    bootstrap = spark_broker.bootstrap
    topic = new_topic(bootstrap, "range", 2)
    produce(bootstrap, topic, [(p, f"{p}-{i}".encode()) for p in (0, 1) for i in range(10)])
    df = _read(
        spark,
        bootstrap,
        subscribe=topic,
        startingOffsets=f'{{"{topic}":{{"0":2,"1":-2}}}}',
        endingOffsets=f'{{"{topic}":{{"0":5,"1":-1}}}}',
        minPartitions="4",
    )
    expected = [(topic, 0, i, f"0-{i}".encode()) for i in range(2, 5)]
    expected += [(topic, 1, i, f"1-{i}".encode()) for i in range(10)]
    assert _rows(df) == expected
    assert df.rdd.getNumPartitions() >= 4  # minPartitions splits the 13 offsets
    # assign: one partition, from a given offset to latest
    assigned = _read(
        spark,
        bootstrap,
        assign=f'{{"{topic}":[1]}}',
        startingOffsets=f'{{"{topic}":{{"1":7}}}}',
    )
    assert _rows(assigned) == [(topic, 1, i, f"1-{i}".encode()) for i in range(7, 10)]


def test_include_headers_key_and_timestamps(spark: Any, spark_broker: BrokerProcess) -> None:
    bootstrap = spark_broker.bootstrap
    topic = new_topic(bootstrap, "headers")
    before_ms = int(time.time() * 1000)
    produce(bootstrap, topic, [(0, b"with")], key=b"k1", headers=[("h1", b"v1"), ("h2", None)])
    produce(bootstrap, topic, [(0, b"without")])
    df = _read(spark, bootstrap, subscribe=topic, includeHeaders="true")
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
        ("key", "binary"),
        ("value", "binary"),
        ("topic", "string"),
        ("partition", "int"),
        ("offset", "bigint"),
        ("timestamp", "timestamp"),
        ("timestampType", "int"),
        ("headers", "array<struct<key:string,value:binary>>"),
    ]
    rows = df.orderBy("offset").collect()
    assert [bytes(r.value) for r in rows] == [b"with", b"without"]
    assert bytes(rows[0].key) == b"k1"
    assert rows[1].key is None
    assert [(h.key, None if h.value is None else bytes(h.value)) for h in rows[0].headers] == [
        ("h1", b"v1"),
        ("h2", None),
    ]
    assert rows[1].headers is None
    assert {r.timestampType for r in rows} == {0}  # CreateTime
    stamp_ms = rows[0].timestamp.timestamp() * 1000
    assert before_ms - 1000 <= stamp_ms <= time.time() * 1000 + 1000
    without = _read(spark, bootstrap, subscribe=topic)
    assert "headers" not in without.columns


def test_user_schema_selects_and_orders_columns(spark: Any, spark_broker: BrokerProcess) -> None:
    bootstrap = spark_broker.bootstrap
    topic = new_topic(bootstrap, "projected")
    produce(bootstrap, topic, [(0, b"v0"), (0, b"v1")])
    reader = _options(spark.read, bootstrap, {"subscribe": topic})
    rows = reader.schema("offset BIGINT, value BINARY").load().collect()
    assert [(r.offset, bytes(r.value)) for r in rows] == [(0, b"v0"), (1, b"v1")]
    assert rows[0].__fields__ == ["offset", "value"]
    message = _error_of(lambda: reader.schema("value BINARY, colour STRING").load().collect())
    assert "schema has column(s) colour, which a Kafka record does not have" in message


def test_streaming_skips_aborted_and_open_and_replays_identically(
    spark: Any, spark_broker: BrokerProcess, checkpoint: Path
) -> None:
    bootstrap = spark_broker.bootstrap
    topic = new_topic(bootstrap, "stream", 2)
    opts = {"subscribe": topic, "startingOffsets": "earliest"}
    committed(bootstrap, topic, [(0, b"a0"), (1, b"a1"), (0, b"a2"), (1, b"a3")])
    aborted(bootstrap, topic, [(0, b"x0"), (1, b"x1")])
    still_open = Transaction(bootstrap, topic, [(1, b"open1")])
    committed(bootstrap, topic, [(0, b"b0"), (1, b"b1")])

    first = _run_available_now(spark, bootstrap, checkpoint, **opts)
    # b1 waits behind the open transaction on partition 1 (the LSO), b0 does not
    assert _values(first) == [b"a0", b"a1", b"a2", b"a3", b"b0"]

    still_open.commit()
    aborted(bootstrap, topic, [(0, b"x2")])
    committed(bootstrap, topic, [(0, b"c0"), (1, b"c1")])
    second = _run_available_now(spark, bootstrap, checkpoint, **opts)
    assert _values(second) == [b"b1", b"c0", b"c1", b"open1"]
    assert not set(second) & set(first)  # batch ids go on

    # Spark re-executes the last batch when its commit log entry is missing (a crash before
    # commits/N): the replay reads exactly the same committed records, whatever arrived since.
    last = max(second)
    (checkpoint / "commits" / str(last)).unlink()
    (checkpoint / "commits" / f".{last}.crc").unlink(missing_ok=True)
    aborted(bootstrap, topic, [(1, b"x3")])
    committed(bootstrap, topic, [(0, b"d0")])
    third = _run_available_now(spark, bootstrap, checkpoint, **opts)
    assert third[last] == second[last]
    assert sorted(third) == [last, last + 1]
    assert [row[3] for row in third[last + 1]] == [b"d0"]


def test_max_offsets_per_trigger_with_available_now(
    spark: Any, spark_broker: BrokerProcess, checkpoint: Path
) -> None:
    bootstrap = spark_broker.bootstrap
    topic = new_topic(bootstrap, "limit", 2)
    produce(bootstrap, topic, [(p, f"{p}-{i}".encode()) for i in range(30) for p in (0, 1)])
    batches = _run_available_now(
        spark, bootstrap, checkpoint, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger="20"
    )
    assert sorted(batches) == [0, 1, 2]
    for batch_id, rows in batches.items():
        per_partition = [sum(1 for r in rows if r[1] == p) for p in (0, 1)]
        assert per_partition == [10, 10], (batch_id, per_partition)
        for p in (0, 1):  # each batch continues where the previous one stopped
            assert [r[2] for r in rows if r[1] == p] == list(range(batch_id * 10, batch_id * 10 + 10))
    # a record that arrives after the run started waits for the next run
    produce(bootstrap, topic, [(0, b"late")])
    later = _run_available_now(
        spark, bootstrap, checkpoint, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger="20"
    )
    assert list(later.values()) == [[(topic, 0, 30, b"late")]]


def test_subscribe_pattern_picks_up_new_topics_and_partitions(
    spark: Any, spark_broker: BrokerProcess, checkpoint: Path
) -> None:
    bootstrap = spark_broker.bootstrap
    prefix = unique_name("pat")
    first = f"{prefix}-one"
    new_topic_name = f"{prefix}-two"
    from tests.interop.support import create_topic

    create_topic(bootstrap, first, 1)
    committed(bootstrap, first, [(0, b"one-0")])
    log = BatchLog()
    query = (
        _options(
            spark.readStream,
            bootstrap,
            {"subscribePattern": f"{prefix}-.*", "startingOffsets": "earliest"},
        )
        .load()
        .writeStream.foreachBatch(log)
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    try:
        wait_for("the first record", lambda: log.values() == [b"one-0"])
        create_topic(bootstrap, new_topic_name, 1)
        committed(bootstrap, new_topic_name, [(0, b"two-0")])
        wait_for("the new topic's record", lambda: b"two-0" in log.values())
        add_partitions(bootstrap, first, 2)
        committed(bootstrap, first, [(1, b"one-p1")])
        wait_for("the new partition's record", lambda: b"one-p1" in log.values())
        assert query.exception() is None
        assert log.values() == [b"one-0", b"one-p1", b"two-0"]  # each exactly once
    finally:
        query.stop()


# --- bad input: a clear one-line error before any data moves ----------------------------------------


def _error_of(action: Any) -> str:
    with pytest.raises(Exception) as info:
        action()
    return str(info.value)


def test_unknown_option_names_the_known_ones(spark: Any, spark_broker: BrokerProcess) -> None:
    topic = new_topic(spark_broker.bootstrap, "bad")
    bootstrap = spark_broker.bootstrap
    message = _error_of(lambda: _read(spark, bootstrap, subscribe=topic, startingOffset="earliest"))
    assert "unknown reader option 'startingoffset'" in message
    assert "startingOffsets" in message
    assert "kafka.*" in message


def test_unknown_topic(spark: Any, spark_broker: BrokerProcess, checkpoint: Path) -> None:
    missing = unique_name("missing")
    message = _error_of(lambda: _read(spark, spark_broker.bootstrap, subscribe=missing))
    assert f"unknown topic(s) {missing} at {spark_broker.bootstrap}" in message
    # streaming: the query never starts, nothing is written to the checkpoint
    message = _error_of(
        lambda: (
            _options(spark.readStream, spark_broker.bootstrap, {"subscribe": missing})
            .load()
            .writeStream.foreachBatch(BatchLog())
            .option("checkpointLocation", str(checkpoint))
            .start()
            .awaitTermination(QUERY_TIMEOUT)
        )
    )
    assert f"unknown topic(s) {missing}" in message
    assert not (checkpoint / "offsets").exists() or not any((checkpoint / "offsets").iterdir())
    # the broker did not create it either
    again = _error_of(lambda: _read(spark, spark_broker.bootstrap, subscribe=missing))
    assert f"unknown topic(s) {missing}" in again


def test_unreachable_broker_names_the_address(spark: Any) -> None:
    address = f"127.0.0.1:{free_port()}"
    started = time.monotonic()
    message = _error_of(
        lambda: _read(spark, address, subscribe="anything", **{"kafkaConsumer.pollTimeoutMs": "3000"})
    )
    assert f"cannot reach the broker at kafka.bootstrap.servers={address} within 3 s" in message
    assert time.monotonic() - started < 60


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"startingOffsets": '{"t": {"0": 1'}, "startingOffsets: not valid JSON"),
        ({"endingOffsets": "[1, 2]"}, "option 'endingOffsets' must be 'earliest', 'latest' or JSON"),
        ({"assign": "{not json}", "subscribe": None}, "assign: not valid JSON"),
        ({"subscribePattern": "x.*"}, "exactly one of 'subscribe', 'subscribePattern', 'assign' is required"),
        ({"maxOffsetsPerTrigger": "lots"}, "option 'maxOffsetsPerTrigger' must be a positive integer"),
    ],
)
def test_bad_option_values(
    spark: Any, spark_broker: BrokerProcess, options: dict[str, str | None], expected: str
) -> None:
    given = {"subscribe": "t", **options}
    clean = {k: v for k, v in given.items() if v is not None}
    assert expected in _error_of(lambda: _read(spark, spark_broker.bootstrap, **clean))


def test_missing_bootstrap_servers(spark: Any) -> None:
    message = _error_of(lambda: spark.read.format("exactly").option("subscribe", "t").load())
    assert "option 'kafka.bootstrap.servers' is required" in message


def test_data_loss_fails_or_skips_per_fail_on_data_loss(spark: Any, spark_broker: BrokerProcess) -> None:
    from confluent_kafka import TopicPartition as KafkaTopicPartition
    from confluent_kafka.admin import AdminClient

    bootstrap = spark_broker.bootstrap
    topic = new_topic(bootstrap, "loss")
    produce(bootstrap, topic, [(0, f"v{i}".encode()) for i in range(10)])
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_records([KafkaTopicPartition(topic, 0, 4)], request_timeout=30).values():
        assert future.result(30).low_watermark == 4
    from_zero = {"subscribe": topic, "startingOffsets": f'{{"{topic}":{{"0":0}}}}'}
    message = _error_of(lambda: _read(spark, bootstrap, **from_zero).collect())
    assert f"{topic}-0: offsets [0, 4) were deleted before they were read" in message
    assert "set failOnDataLoss=false to skip them" in message
    rows = _rows(_read(spark, bootstrap, failOnDataLoss="false", **from_zero))
    assert [(r[2], r[3]) for r in rows] == [(i, f"v{i}".encode()) for i in range(4, 10)]
    # earliest is the log start offset: nothing lost
    assert [r[2] for r in _rows(_read(spark, bootstrap, subscribe=topic))] == list(range(4, 10))


# --- read_range on its own (what one Spark task does), around offset gaps ---------------------------


def test_read_range_tolerates_gaps_at_both_ends(spark_broker: BrokerProcess) -> None:
    from exactly.spark.offsets import OffsetRange
    from exactly.spark.options import parse_reader_options
    from exactly.spark.reader import read_range

    bootstrap = spark_broker.bootstrap
    topic = new_topic(bootstrap, "gaps")
    committed(bootstrap, topic, [(0, b"c0"), (0, b"c1")])  # 0, 1, marker 2
    aborted(bootstrap, topic, [(0, b"x0"), (0, b"x1")])  # 3, 4, marker 5
    committed(bootstrap, topic, [(0, b"c2")])  # 6, marker 7
    # a stuck read fails after 20 s instead of hanging; every range below ends well before that
    options = parse_reader_options(
        {"kafka.bootstrap.servers": bootstrap, "subscribe": topic, "kafkaConsumer.pollTimeoutMs": "20000"}
    )
    schema = kafka_schema()

    def read(start: int, until: int) -> list[tuple[int, bytes]]:
        batches = list(read_range(options, schema, OffsetRange(topic, 0, start, until)))
        for batch in batches:  # the Arrow schema pyspark checks a data source's batches against
            assert batch.schema.names == schema.fieldNames()
        return [(row["offset"], row["value"]) for batch in batches for row in batch.to_pylist()]

    assert read(0, 8) == [(0, b"c0"), (1, b"c1"), (6, b"c2")]
    assert read(0, 2) == [(0, b"c0"), (1, b"c1")]
    assert read(2, 6) == []  # markers and aborted records only
    assert read(1, 5) == [(1, b"c1")]  # ends inside the aborted transaction
    assert read(3, 7) == [(6, b"c2")]  # starts inside it
    assert read(7, 8) == []  # the last marker alone


def test_read_range_bounds_each_batch_by_bytes(spark_broker: BrokerProcess, monkeypatch: Any) -> None:
    """Arrow batches hold at most BATCH_BYTES of keys and values (a BINARY column holds < 2 GiB), however
    many records fit in a consume call."""
    from exactly.spark import reader
    from exactly.spark.offsets import OffsetRange
    from exactly.spark.options import parse_reader_options

    bootstrap = spark_broker.bootstrap
    topic = new_topic(bootstrap, "bytes")
    values = [bytes([i]) * 1000 for i in range(50)]
    produce(bootstrap, topic, [(0, v) for v in values])
    monkeypatch.setattr(reader, "BATCH_BYTES", 8000)
    options = parse_reader_options({"kafka.bootstrap.servers": bootstrap, "subscribe": topic})
    batches = list(reader.read_range(options, kafka_schema(), OffsetRange(topic, 0, 0, 50)))
    sizes = [sum(len(v) for v in batch.column("value").to_pylist()) for batch in batches]
    assert all(size <= 8000 for size in sizes), sizes
    assert len(batches) >= 7
    assert [row["value"] for batch in batches for row in batch.to_pylist()] == values
