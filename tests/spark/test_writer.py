"""The `exactly` writer with guarantee=at-least-once, and the checks made before any data moves.

Spark local[2] with one session for the module, the real broker process, results read back record by
record with a read_committed confluent-kafka consumer.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from exactly.testing.processes import BrokerProcess, free_port
from tests.spark.kafka_io import create_topic, read_committed

pytestmark = [pytest.mark.interop, pytest.mark.slow]

HEADERS_TYPE = "array<struct<key:string,value:binary>>"


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def test_batch_write_keys_values_partitions_headers(spark: Any, broker: BrokerProcess) -> None:
    topic = unique("batch")
    create_topic(broker.bootstrap, topic, 3)
    rows = [
        (
            f"k{i}" if i % 5 else None,
            f"v{i}".encode(),
            i % 3,
            [(f"h{i}", f"x{i}".encode()), ("n", None)] if i % 2 else [],
        )
        for i in range(60)
    ]
    df = spark.createDataFrame(rows, f"key string, value binary, partition int, headers {HEADERS_TYPE}")
    (
        df.write.format("exactly")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", topic)
        .option("guarantee", "at-least-once")
        .mode("append")
        .save()
    )
    got = read_committed(broker.bootstrap, topic, minimum=60)
    assert len(got) == 60
    assert {r.value: (r.key, r.partition, r.headers) for r in got} == {
        value: (None if key is None else key.encode(), partition, tuple(headers))
        for key, value, partition, headers in rows
    }
    # per Kafka partition, each task's rows keep the DataFrame's order (task 0: rows 0-29, task 1: 30-59)
    for p in range(3):
        numbers = [int(r.value[1:]) for r in sorted(got, key=lambda r: r.offset) if r.partition == p]
        for task_rows in ([n for n in numbers if n < 30], [n for n in numbers if n >= 30]):
            assert task_rows == sorted(task_rows)


def test_batch_write_topic_column_and_keyed_partitioning(spark: Any, broker: BrokerProcess) -> None:
    first, second = unique("left"), unique("right")
    create_topic(broker.bootstrap, first, 2)
    create_topic(broker.bootstrap, second, 4)
    rows = [(first if i % 2 else second, f"key-{i % 7}", f"value-{i}") for i in range(40)]
    df = spark.createDataFrame(rows, "topic string, key string, value string")
    (
        df.write.format("exactly")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("guarantee", "at-least-once")
        .mode("append")
        .save()
    )
    for topic in (first, second):
        got = read_committed(broker.bootstrap, topic, minimum=20)
        expected = sorted((k.encode(), v.encode()) for t, k, v in rows if t == topic)
        assert sorted((r.key, r.value) for r in got) == expected
        # keyed records: one key, one partition (murmur2, as the Java client and Spark's Kafka sink)
        partitions_of_key: dict[bytes | None, set[int]] = {}
        for r in got:
            partitions_of_key.setdefault(r.key, set()).add(r.partition)
        assert all(len(ps) == 1 for ps in partitions_of_key.values()), partitions_of_key


def test_streaming_write_from_files(spark: Any, broker: BrokerProcess, tmp_path: Path) -> None:
    topic = unique("stream")
    create_topic(broker.bootstrap, topic, 2)
    source = tmp_path / "in"
    source.mkdir()
    for f in range(4):
        (source / f"part-{f}.json").write_text(
            "".join(json.dumps({"id": f * 100 + i, "name": f"n{f}-{i}"}) + "\n" for i in range(25))
        )
    stream = (
        spark.readStream.schema("id long, name string")
        .option("maxFilesPerTrigger", 1)
        .json(str(source))
        .selectExpr("CAST(id AS STRING) AS key", "name AS value")
    )
    query = (
        stream.writeStream.format("exactly")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", topic)
        .option("guarantee", "at-least-once")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120)
    assert query.exception() is None
    assert len([p for p in query.recentProgress if p["numInputRows"] > 0]) == 4  # one batch per file
    got = read_committed(broker.bootstrap, topic, minimum=100)
    assert sorted((r.key, r.value) for r in got) == sorted(
        (str(f * 100 + i).encode(), f"n{f}-{i}".encode()) for f in range(4) for i in range(25)
    )


# --- errors before any data moves ----------------------------------------------------------------------


def write_error(df: Any, **options: str) -> str:
    writer = df.write.format("exactly").mode("append")
    for key, value in options.items():
        writer = writer.option(key.replace("_", "."), value)
    with pytest.raises(Exception) as info:
        writer.save()
    return str(info.value)


def test_missing_value_column(spark: Any, broker: BrokerProcess) -> None:
    df = spark.createDataFrame([("a", "b")], "key string, payload string")
    text = write_error(df, kafka_bootstrap_servers=broker.bootstrap, topic="t", guarantee="at-least-once")
    assert "has no 'value' column" in text
    assert "key, payload" in text


def test_wrong_column_types_and_no_topic(spark: Any, broker: BrokerProcess) -> None:
    df = spark.createDataFrame([(1, 2)], "value int, partition long")
    text = write_error(df, kafka_bootstrap_servers=broker.bootstrap, guarantee="at-least-once")
    assert "column 'value' must be binary or string, got int" in text
    assert "column 'partition' must be int, got bigint" in text
    assert "no topic" in text


def test_unknown_and_bad_options(spark: Any, broker: BrokerProcess) -> None:
    df = spark.createDataFrame([("v",)], "value string")
    text = write_error(
        df,
        kafka_bootstrap_servers=broker.bootstrap,
        topic="t",
        subscribe="oops",
        guarantee="twice",
    )
    assert "unknown option 'subscribe'" in text
    assert "'guarantee' must be 'exactly-once' or 'at-least-once', got 'twice'" in text
    text = write_error(df, topic="t")
    assert "option 'kafka.bootstrap.servers' is required" in text
    text = write_error(df, kafka_bootstrap_servers=broker.bootstrap, topic="t", kafka_transactional_id="x")
    assert "'kafka.transactional.id' is set by the writer itself" in text
    text = write_error(
        df, kafka_bootstrap_servers=broker.bootstrap, topic="t", guarantee="at-least-once", kafka_lingr_ms="5"
    )
    assert "invalid kafka.* setting" in text
    assert "lingr.ms" in text


def test_unreachable_broker_names_the_address(spark: Any) -> None:
    df = spark.createDataFrame([("v",)], "value string")
    address = f"127.0.0.1:{free_port()}"
    text = write_error(df, kafka_bootstrap_servers=address, topic="t", guarantee="at-least-once")
    assert f"cannot reach the broker: tried {address}" in text
    assert "refused" in text.lower()


def test_unknown_topic_without_auto_creation(spark: Any, tmp_path: Path) -> None:
    df = spark.createDataFrame([("v",)], "value string")
    with BrokerProcess(tmp_path / "data", "auto.create.topics.enable=false") as strict:
        topic = unique("missing")
        text = write_error(
            df, kafka_bootstrap_servers=strict.bootstrap, topic=topic, guarantee="at-least-once"
        )
        assert f"topic {topic!r} does not exist" in text
        assert "auto.create.topics.enable=false" in text
        create_topic(strict.bootstrap, topic, 1)
        df.write.format("exactly").option("kafka.bootstrap.servers", strict.bootstrap).option(
            "topic", topic
        ).option("guarantee", "at-least-once").mode("append").save()
        assert [r.value for r in read_committed(strict.bootstrap, topic, minimum=1)] == [b"v"]


def test_unknown_topic_is_created_when_auto_creation_is_on(spark: Any, broker: BrokerProcess) -> None:
    topic = unique("auto")
    df = spark.createDataFrame([(f"v{i}",) for i in range(5)], "value string")
    df.write.format("exactly").option("kafka.bootstrap.servers", broker.bootstrap).option(
        "topic", topic
    ).option("guarantee", "at-least-once").mode("append").save()
    assert sorted(r.value for r in read_committed(broker.bootstrap, topic, minimum=5)) == [
        f"v{i}".encode() for i in range(5)
    ]


def test_refused_without_the_two_phase_commit_extension(spark: Any, tmp_path: Path) -> None:
    """exactly with transaction.two.phase.commit.enable=false stands for any broker without the
    extension (Apache Kafka): exactly-once is refused before any data moves; at-least-once works."""
    df = spark.createDataFrame([(f"v{i}",) for i in range(3)], "value string")
    with BrokerProcess(tmp_path / "data", "transaction.two.phase.commit.enable=false") as plain:
        topic = unique("plain")
        create_topic(plain.bootstrap, topic, 1)
        text = write_error(df, kafka_bootstrap_servers=plain.bootstrap, topic=topic)
        assert f"the broker at {plain.bootstrap} does not offer two-phase commit" in text
        assert "guarantee=at-least-once" in text
        # nothing was written
        assert read_committed(plain.bootstrap, topic, minimum=0) == []
        df.write.format("exactly").option("kafka.bootstrap.servers", plain.bootstrap).option(
            "topic", topic
        ).option("guarantee", "at-least-once").mode("append").save()
        got = read_committed(plain.bootstrap, topic, minimum=3)
        assert sorted(r.value for r in got) == [b"v0", b"v1", b"v2"]
