"""`exactly bench spark` (issue 11): the Spark pipeline's three figures, same broker and input, one run.

    python -m exactly.bench.spark [--size-mib N] [--rounds R] [--seconds S]

One broker (`exactly serve`, default durability) on a temporary data directory and one local[2] Spark
session in this process. The input topic `bench-spark-in` (2 partitions) is filled once with N MiB of
1 KiB records by an idempotent producer; it serves phases 1 and 2.

1. Streaming throughput: exactly source -> `key = partition-offset, value = first 100 bytes of value`
   -> exactly sink, 1-second triggers (processingTime='1 second'), maxOffsetsPerTrigger = min(200,000,
   records / 8), from the earliest offset, each round on a fresh checkpoint and output topic for at least
   S seconds and 3 batches with rows: the exactly-once sink (default) vs `guarantee=at-least-once`.
   First one unmeasured warm-up round (at-least-once, --warmup-seconds, default 10: the JVM's JIT, the
   Python workers, the broker's caches; without it the first measured round ran its batches 1.6 x
   slower than the rest). Then R rounds of each, interleaved (A, B, then B, A, ...). A round's
   records/s: the rows of its batches after the first / (end of its last batch - end of its first),
   from Spark's own progress reports (query start-up and the Python workers' start excluded alike).
   Medians, ratio (target >= 0.9).
2. Batch read: `spark.read.format("exactly")` of the whole input topic (count + sum of value lengths,
   planning included) vs ONE read_committed confluent-kafka consumer reading the same topic to its last
   stable offset (`exactly.bench.spark_read`), after one Spark read that is not measured (the session's
   first starts the read path's Python workers). --read-runs K (default 3) runs of each, interleaved;
   medians, ratio (target >= 0.8).
3. Commit-to-visible latency: a producer thread commits one transaction of one record every 100 ms
   (key = index % 4, value = index) and notes `time.time()` when `commit_transaction()` returns; a
   streaming aggregation (count, min and max index per key per 1-second event-time window, watermark
   0 s, outputMode append: the sink refuses update mode; 1-second triggers, exactly-once sink) writes
   `count,min,max` per key and window; a read_committed consumer thread notes the arrival time of every
   output record. Record i is visible when the output of its key's window (min <= i <= max) arrives; so
   the figure includes waiting for the window to close (up to 1 s) and the watermark to pass it. The
   records committed in the first S seconds are measured (the producer goes on until they are seen, so
   the watermark keeps moving); p50/p99 over them, those never seen count as missing.

The table is followed by one JSON line with every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from exactly.bench.broker import percentile
from exactly.bench.spark_read import ReadRate, consumer_read_rate, fill_topic, spark_batch_read_rate
from exactly.bench.txn import start_broker

INPUT_TOPIC = "bench-spark-in"
LATENCY_IN = "bench-spark-latency-in"
LATENCY_OUT = "bench-spark-latency-out"
RECORD_BYTES = 1024
PARTITIONS = 2
MAX_OFFSETS_PER_TRIGGER = 200_000
LATENCY_GAP_S = 0.1
MIN_BATCHES = 3
MAX_EXTRA_S = 180.0
LATENCY_KEYS = 4
WINDOW = "1 second"
# The defaults of `exactly bench spark`, which `exactly bench report` (make bench) runs too, so that
# the two print the same figures (the report once ran 256 MiB in 2 rounds without a warm-up: its
# maxOffsetsPerTrigger was 32,768, the at-least-once sink then waited for the trigger, and its first,
# cold exactly-once round counted: 0.74 x there against 1.10 x here).
DEFAULT_SIZE_MIB = 1024.0
DEFAULT_ROUNDS = 3
DEFAULT_SECONDS = 15.0
DEFAULT_WARMUP_SECONDS = 10.0
DEFAULT_READ_RUNS = 3
EXACTLY_ONCE = "exactly-once"
AT_LEAST_ONCE = "at-least-once"


@dataclass(frozen=True, slots=True)
class StreamRound:
    guarantee: str
    records: int
    seconds: float
    batch_s: float  # median duration of its measured batches: under 1 s means the trigger, not the
    # pipeline, set the pace

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else float("nan")


def _create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def _progress_time(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def stream_round(
    spark: Any, bootstrap: str, work: Path, guarantee: str, number: int, seconds: float, per_trigger: int
) -> StreamRound:
    """One streaming round with a fresh checkpoint and output topic; stops after `seconds`."""
    name = f"{guarantee}-{number}"
    out_topic = f"bench-spark-out-{name}"
    _create_topic(bootstrap, out_topic, PARTITIONS)
    query = (
        spark.readStream.format("exactly")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", INPUT_TOPIC)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(per_trigger))
        .load()
        .selectExpr(
            "CONCAT(CAST(partition AS STRING), '-', CAST(offset AS STRING)) AS key",
            "SUBSTRING(value, 1, 100) AS value",
        )
        .writeStream.format("exactly")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", out_topic)
        .option("guarantee", guarantee)
        .option("checkpointLocation", str(work / f"checkpoint-{name}"))
        .trigger(processingTime="1 second")
        .start()
    )
    started = time.monotonic()
    deadline = started + seconds + MAX_EXTRA_S
    while query.isActive and time.monotonic() < deadline:
        query.awaitTermination(1)
        done = [p for p in query.recentProgress if p["numInputRows"] > 0]
        if time.monotonic() - started >= seconds and len(done) >= MIN_BATCHES:
            break
    progress = list(query.recentProgress)
    query.stop()
    error = query.exception()
    if error is not None:
        raise RuntimeError(f"streaming round {name} failed: {error}")
    batches = [p for p in progress if p["numInputRows"] > 0]
    if len(batches) < MIN_BATCHES:
        raise RuntimeError(
            f"streaming round {name}: {len(batches)} batches with rows in {seconds + MAX_EXTRA_S:g} s"
        )
    # From the end of the first batch (Python workers and connections started) to the end of the last.
    first, last = batches[0], batches[-1]
    return StreamRound(
        guarantee,
        sum(int(p["numInputRows"]) for p in batches[1:]),
        _batch_end(last) - _batch_end(first),
        statistics.median(float(p["durationMs"]["triggerExecution"]) / 1000 for p in batches[1:]),
    )


def _batch_end(progress: dict[str, Any]) -> float:
    return _progress_time(progress["timestamp"]) + float(progress["durationMs"]["triggerExecution"]) / 1000


# --- phase 3: commit to visible ------------------------------------------------------------------------


def _latency_producer(bootstrap: str, committed: dict[int, float], stop: threading.Event) -> None:
    from confluent_kafka import Producer

    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": "bench-spark-latency", "linger.ms": 0}
    )
    producer.init_transactions(30)
    index = 0
    while not stop.is_set():
        started = time.monotonic()
        producer.begin_transaction()
        producer.produce(LATENCY_IN, str(index).encode(), key=str(index % LATENCY_KEYS).encode())
        producer.commit_transaction(30)
        committed[index] = time.time()
        index += 1
        time.sleep(max(0.0, LATENCY_GAP_S - (time.monotonic() - started)))


def _latency_consumer(
    bootstrap: str, arrivals: list[tuple[int, int, int, float]], stop: threading.Event
) -> None:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-spark-latency",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "fetch.wait.max.ms": 10,
        }
    )
    consumer.assign([TopicPartition(LATENCY_OUT, p, -2) for p in range(PARTITIONS)])
    while not stop.is_set():
        message = consumer.poll(0.2)
        if message is None or message.error() is not None:
            continue
        now = time.time()
        key = int((message.key() or b"-1").decode())
        _, first, last = (message.value() or b"0,-1,-1").decode().split(",")
        arrivals.append((key, int(first), int(last), now))
    consumer.close()


def commit_to_visible(
    spark: Any, bootstrap: str, work: Path, seconds: float
) -> tuple[dict[str, float], tuple[float, ...]]:
    """The figures and every measured record's delay (ms)."""
    from pyspark.sql.functions import count, window
    from pyspark.sql.functions import max as max_
    from pyspark.sql.functions import min as min_

    _create_topic(bootstrap, LATENCY_IN, PARTITIONS)
    _create_topic(bootstrap, LATENCY_OUT, PARTITIONS)
    query = (
        spark.readStream.format("exactly")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", LATENCY_IN)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("CAST(key AS STRING) AS k", "CAST(CAST(value AS STRING) AS LONG) AS i", "timestamp")
        .withWatermark("timestamp", "0 seconds")
        .groupBy("k", window("timestamp", WINDOW))
        .agg(count("*").alias("n"), min_("i").alias("first"), max_("i").alias("last"))
        .selectExpr("k AS key", "CONCAT_WS(',', n, first, last) AS value")
        .writeStream.format("exactly")
        .outputMode("append")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", LATENCY_OUT)
        .option("checkpointLocation", str(work / "checkpoint-latency"))
        .trigger(processingTime="1 second")
        .start()
    )
    committed: dict[int, float] = {}
    arrivals: list[tuple[int, int, int, float]] = []
    stop = threading.Event()
    stop_producer = threading.Event()
    consumer = threading.Thread(target=_latency_consumer, args=(bootstrap, arrivals, stop), daemon=True)
    consumer.start()
    # Let the query run its first (empty) batches so the start-up is not counted.
    deadline = time.monotonic() + 120
    while query.isActive and not query.recentProgress and time.monotonic() < deadline:
        query.awaitTermination(1)
    producer = threading.Thread(
        target=_latency_producer, args=(bootstrap, committed, stop_producer), daemon=True
    )
    producer.start()
    query.awaitTermination(seconds)
    # The measured records are those committed so far; the producer goes on (unmeasured) so that later
    # records keep advancing the watermark and the last measured windows close.
    measured = dict(committed)
    last = max(measured, default=-1)
    deadline = time.monotonic() + 60
    while query.isActive and time.monotonic() < deadline:
        if all(_visible_at(i, arrivals) is not None for i in measured if i > last - LATENCY_KEYS):
            break
        query.awaitTermination(0.5)
    stop_producer.set()
    producer.join(60)
    stop.set()
    consumer.join(30)
    query.stop()
    error = query.exception()
    if error is not None:
        raise RuntimeError(f"latency query failed: {error}")
    delays = []
    missing = 0
    for index, commit_time in measured.items():
        seen = _visible_at(index, arrivals)
        if seen is None:
            missing += 1
        else:
            delays.append((seen - commit_time) * 1000)
    figures = {
        "latency_records": float(len(measured)),
        "latency_missing": float(missing),
        "latency_p50_ms": percentile(delays, 0.50),
        "latency_p99_ms": percentile(delays, 0.99),
    }
    return figures, tuple(delays)


def _visible_at(index: int, arrivals: list[tuple[int, int, int, float]]) -> float | None:
    key = index % LATENCY_KEYS
    times = [t for k, first, last, t in list(arrivals) if k == key and first <= index <= last]
    return min(times) if times else None


# --- the run -------------------------------------------------------------------------------------------


def _spark_session() -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from exactly.spark import ExactlyDataSource

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("exactly-bench-spark")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.memory", "1g")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(PARTITIONS))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(ExactlyDataSource)
    return spark


@dataclass(frozen=True, slots=True)
class SparkRun:
    """Every figure of one run and the samples behind them."""

    figures: dict[str, float]
    streams: tuple[StreamRound, ...]
    spark_reads: tuple[ReadRate, ...]
    consumer_reads: tuple[ReadRate, ...]
    cold_read: ReadRate  # the session's first batch read, not in the medians
    latency_ms: tuple[float, ...]  # commit -> aggregate visible, one per measured record


def run(
    size_mib: float,
    rounds: int,
    seconds: float,
    read_runs: int,
    work: Path,
    warmup_seconds: float = DEFAULT_WARMUP_SECONDS,
) -> dict[str, float]:
    return run_samples(size_mib, rounds, seconds, read_runs, work, warmup_seconds).figures


def run_samples(
    size_mib: float,
    rounds: int,
    seconds: float,
    read_runs: int,
    work: Path,
    warmup_seconds: float = DEFAULT_WARMUP_SECONDS,
) -> SparkRun:
    records = max(1, int(size_mib * 1024 * 1024) // RECORD_BYTES)
    broker = start_broker(work)
    spark = None
    try:
        started = time.perf_counter()
        fill_topic(broker.bootstrap, INPUT_TOPIC, records, RECORD_BYTES, PARTITIONS)
        fill_seconds = time.perf_counter() - started
        print(
            f"input: {records} records x {RECORD_BYTES} B in {PARTITIONS} partitions, "
            f"filled in {fill_seconds:.1f} s",
            flush=True,
        )
        spark = _spark_session()

        streams: dict[str, list[StreamRound]] = {EXACTLY_ONCE: [], AT_LEAST_ONCE: []}
        per_trigger = max(1, min(MAX_OFFSETS_PER_TRIGGER, records // 8))
        if warmup_seconds > 0:
            warm = stream_round(spark, broker.bootstrap, work, AT_LEAST_ONCE, -1, warmup_seconds, per_trigger)
            print(
                f"  warm-up round (not measured) : {warm.records_per_s:10.0f} records/s, "
                f"median batch {warm.batch_s:5.2f} s",
                flush=True,
            )
        for number in range(rounds):
            order = (EXACTLY_ONCE, AT_LEAST_ONCE) if number % 2 == 0 else (AT_LEAST_ONCE, EXACTLY_ONCE)
            for guarantee in order:
                result = stream_round(spark, broker.bootstrap, work, guarantee, number, seconds, per_trigger)
                streams[guarantee].append(result)
                print(
                    f"  stream round {number + 1} {guarantee:13}: {result.records_per_s:10.0f} records/s, "
                    f"median batch {result.batch_s:5.2f} s",
                    flush=True,
                )

        # the session's first batch read starts the Python workers of the read path and warms the JVM's
        # code for it: shown, not in the medians (streaming warmed other paths)
        cold = spark_batch_read_rate(spark, broker.bootstrap, INPUT_TOPIC)
        print(f"  first batch read (cold, not measured): {cold.seconds:6.2f} s", flush=True)
        spark_reads: list[ReadRate] = []
        consumer_reads: list[ReadRate] = []
        for number in range(read_runs):
            spark_reads.append(spark_batch_read_rate(spark, broker.bootstrap, INPUT_TOPIC))
            consumer_reads.append(consumer_read_rate(broker.bootstrap, INPUT_TOPIC))
            print(
                f"  read round {number + 1}: spark {spark_reads[-1].records_per_s:10.0f} records/s, "
                f"consumer {consumer_reads[-1].records_per_s:10.0f} records/s",
                flush=True,
            )
        short = [r.records for r in spark_reads + consumer_reads if r.records != records]
        if short:
            raise RuntimeError(f"a read returned {short[0]} records, not {records}")

        latency, delays = commit_to_visible(spark, broker.bootstrap, work, seconds)
    finally:
        if spark is not None:
            spark.stop()
        broker.stop()

    eo = statistics.median(r.records_per_s for r in streams[EXACTLY_ONCE])
    alo = statistics.median(r.records_per_s for r in streams[AT_LEAST_ONCE])
    sr = statistics.median(r.records_per_s for r in spark_reads)
    cr = statistics.median(r.records_per_s for r in consumer_reads)
    report = {
        "input_records": float(records),
        "stream_exactly_once_records_s": eo,
        "stream_at_least_once_records_s": alo,
        "stream_ratio": eo / alo,
        "stream_exactly_once_batch_s": statistics.median(r.batch_s for r in streams[EXACTLY_ONCE]),
        "stream_at_least_once_batch_s": statistics.median(r.batch_s for r in streams[AT_LEAST_ONCE]),
        "read_spark_records_s": sr,
        "read_consumer_records_s": cr,
        "read_spark_mb_s": statistics.median(r.mb_per_s for r in spark_reads),
        "read_consumer_mb_s": statistics.median(r.mb_per_s for r in consumer_reads),
        "read_ratio": sr / cr,
        "read_spark_cold_s": cold.seconds,
        **latency,
    }
    _print_table(report, rounds, seconds, read_runs)
    return SparkRun(
        report,
        tuple(streams[EXACTLY_ONCE] + streams[AT_LEAST_ONCE]),
        tuple(spark_reads),
        tuple(consumer_reads),
        cold,
        delays,
    )


def _print_table(report: dict[str, float], rounds: int, seconds: float, read_runs: int) -> None:
    print()
    print(f"1. streaming, 1-s triggers, {rounds} interleaved rounds of {seconds:g} s each (medians)")
    print(
        f"   exactly-once sink          : {report['stream_exactly_once_records_s']:12.0f} records/s"
        f"  (median batch {report['stream_exactly_once_batch_s']:.2f} s)"
    )
    print(
        f"   at-least-once sink         : {report['stream_at_least_once_records_s']:12.0f} records/s"
        f"  (median batch {report['stream_at_least_once_batch_s']:.2f} s)"
    )
    print(f"   ratio exactly / at-least   : {report['stream_ratio']:12.2f}   (target >= 0.9)")
    print(f"2. batch read of {report['input_records']:.0f} x 1 KiB, {read_runs} run(s) each (medians)")
    print(
        f"   spark batch read (local[2]): {report['read_spark_records_s']:12.0f} records/s"
        f"  {report['read_spark_mb_s']:8.1f} MB/s"
    )
    print(
        f"   one confluent-kafka consumer: {report['read_consumer_records_s']:11.0f} records/s"
        f"  {report['read_consumer_mb_s']:8.1f} MB/s"
    )
    print(f"   ratio spark / consumer     : {report['read_ratio']:12.2f}   (target >= 0.8)")
    print(f"   first spark read (cold)    : {report['read_spark_cold_s']:12.2f} s, not in the medians")
    print(
        f"3. input commit -> aggregate visible (read_committed), {report['latency_records']:.0f} records, "
        f"{report['latency_missing']:.0f} missing"
    )
    print(f"   p50                        : {report['latency_p50_ms']:12.0f} ms")
    print(f"   p99                        : {report['latency_p99_ms']:12.0f} ms")
    print(json.dumps(report))


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description="The Spark pipeline's benchmark (issue 11)")
    parser.add_argument(
        "--size-mib", type=float, default=DEFAULT_SIZE_MIB, help="input topic size (1 KiB records)"
    )
    parser.add_argument(
        "--rounds", type=int, default=DEFAULT_ROUNDS, help="rounds of each streaming mode (interleaved)"
    )
    parser.add_argument(
        "--seconds", type=float, default=DEFAULT_SECONDS, help="length of a streaming round and of phase 3"
    )
    parser.add_argument(
        "--warmup-seconds",
        type=float,
        default=DEFAULT_WARMUP_SECONDS,
        help="unmeasured at-least-once round first (0: none)",
    )
    parser.add_argument(
        "--read-runs", type=int, default=DEFAULT_READ_RUNS, help="runs of each batch read (interleaved)"
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="exactly-bench-spark-") as tmp:
        return run(args.size_mib, args.rounds, args.seconds, args.read_runs, Path(tmp), args.warmup_seconds)


if __name__ == "__main__":
    main()
