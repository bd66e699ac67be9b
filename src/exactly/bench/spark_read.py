"""Batch read of a topic through the Spark data source vs one confluent-kafka consumer (issue 11).

    python -m exactly.bench.spark_read [--records N] [--value-bytes B] [--partitions P] [--runs K]

Starts a broker on a temporary data directory, fills one topic with N committed records (idempotent
producer, values of B bytes), reads it once through Spark unmeasured (the session's first read starts
the read path's Python workers: its time is printed apart), then alternates K times: a Spark batch
read (`spark.read.format("exactly")`, local[2], counting the rows and summing the value lengths so
every record crosses into Spark) and one read_committed confluent-kafka consumer assigned to every
partition, reading to the last stable offset. Prints the median records/s of each and their ratio
(issue 25's target: Spark >= 0.8 x the consumer).
The Spark figure includes job planning and task start-up, as a user's batch read does.

`spark_batch_read_rate` and `consumer_read_rate` are the hooks `exactly bench spark` can call.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from exactly.bench.broker import BROKER_START_TIMEOUT
from exactly.spark.options import FETCH_QUEUE_BACKOFF_MS
from exactly.testing.processes import BrokerProcess


@dataclass(frozen=True, slots=True)
class ReadRate:
    records: int
    value_bytes: int
    seconds: float

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds

    @property
    def mb_per_s(self) -> float:
        return self.value_bytes / self.seconds / 1e6


def spark_batch_read_rate(spark: Any, bootstrap: str, topic: str, **options: str) -> ReadRate:
    """Batch-read every committed record of `topic` through the `exactly` data source (registered in
    `spark`); the time of the whole job, planning included."""
    from pyspark.sql import functions as f

    reader = (
        spark.read.format("exactly").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    started = time.perf_counter()
    row = reader.load().agg(f.count("*").alias("n"), f.sum(f.length("value")).alias("b")).collect()[0]
    return ReadRate(int(row.n), int(row.b or 0), time.perf_counter() - started)


def consumer_read_rate(bootstrap: str, topic: str, timeout: float = 300.0) -> ReadRate:
    """One read_committed confluent-kafka consumer reading every partition of `topic` from the log start
    offset to the last stable offset."""
    from confluent_kafka import Consumer, IsolationLevel, TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    partitions = admin.list_topics(topic, timeout=30).topics[topic].partitions
    tps = [TopicPartition(topic, p) for p in partitions]
    spec = OffsetSpec.latest()  # type: ignore[no-untyped-call]
    ends = admin.list_offsets(dict.fromkeys(tps, spec), isolation_level=IsolationLevel.READ_COMMITTED)
    until = {tp.partition: future.result(30).offset for tp, future in ends.items()}
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "exactly-bench-spark-read",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
            # the data source's consumers' setting (spark/options.py), so that both read alike
            "fetch.queue.backoff.ms": FETCH_QUEUE_BACKOFF_MS,
        }
    )
    started = time.perf_counter()
    consumer.assign([TopicPartition(topic, p, -2) for p in partitions])
    records = value_bytes = 0
    open_partitions = {p for p, end in until.items() if end > 0}
    deadline = time.monotonic() + timeout
    while open_partitions and time.monotonic() < deadline:
        for message in consumer.consume(1000, 1.0):
            partition, offset = message.partition(), message.offset()
            if partition is None or offset is None:
                continue
            if message.error() is not None:
                if offset >= until[partition]:
                    open_partitions.discard(partition)
                continue
            records += 1
            value_bytes += len(message.value() or b"")
            if offset + 1 >= until[partition]:
                open_partitions.discard(partition)
    elapsed = time.perf_counter() - started
    consumer.close()
    if open_partitions:
        raise TimeoutError(f"the consumer did not reach the end of {topic} within {timeout:g} s")
    return ReadRate(records, value_bytes, elapsed)


def fill_topic(bootstrap: str, topic: str, records: int, value_bytes: int, partitions: int) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.cimpl import NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the result arrives
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result()
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 20})
    value = os.urandom(value_bytes)
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.1)
    if producer.flush(300) != 0:
        raise RuntimeError("records left undelivered")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Spark batch read vs one confluent-kafka consumer")
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--value-bytes", type=int, default=1024)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    with tempfile.TemporaryDirectory(prefix="exactly-bench-spark-") as tmp:
        broker = BrokerProcess(Path(tmp) / "data").start(BROKER_START_TIMEOUT)
        bootstrap = broker.bootstrap
        spark = None
        try:
            fill_topic(bootstrap, "bench-read", args.records, args.value_bytes, args.partitions)
            from pyspark.sql import SparkSession

            from exactly.spark import ExactlyDataSource

            spark = (
                SparkSession.builder.master("local[2]")
                .config("spark.ui.enabled", "false")
                .config("spark.driver.memory", "1g")
                .config("spark.ui.showConsoleProgress", "false")
                .getOrCreate()
            )
            spark.sparkContext.setLogLevel("ERROR")
            spark.dataSource.register(ExactlyDataSource)
            cold = spark_batch_read_rate(spark, bootstrap, "bench-read")
            spark_rates, consumer_rates = [], []
            for _ in range(args.runs):
                spark_rates.append(spark_batch_read_rate(spark, bootstrap, "bench-read"))
                consumer_rates.append(consumer_read_rate(bootstrap, "bench-read"))
            assert all(r.records == args.records for r in spark_rates + consumer_rates)
            s = statistics.median(r.records_per_s for r in spark_rates)
            c = statistics.median(r.records_per_s for r in consumer_rates)
            print(
                f"records: {args.records} x {args.value_bytes} B in {args.partitions} partitions, "
                f"{args.runs} runs"
            )
            print(f"spark batch read (local[2]) : {s:10.0f} records/s")
            print(f"one confluent-kafka consumer: {c:10.0f} records/s")
            print(f"ratio spark / consumer      : {s / c:10.2f}")
            print(f"first spark read (cold)     : {cold.seconds:10.2f} s, not in the medians")
        finally:
            if spark is not None:
                spark.stop()
            broker.stop(30)


if __name__ == "__main__":
    main()
