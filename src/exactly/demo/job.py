"""The demo's Spark Structured Streaming job, run as its own driver process (so that it can be killed -9
and restarted from its checkpoint)::

    python -m exactly.demo.job --bootstrap H:P --input TOPIC --output TOPIC --checkpoint DIR
        --stop-at-watermark ISO --batch-result PATH [--watermark-delay "3 days"] [--master local[2]]

It reads the input topic with the `exactly` source (read_committed), parses the flight events
(`exactly.demo.flights`), and counts flights and departures and averages the departure delay per
carrier, origin and hour of event time, with a watermark, in append mode; each window is written once
through the exactly-once sink to the output topic (`exactly.demo.windows`). The query stops itself
after a micro-batch ran with a watermark at or past ``--stop-at-watermark`` (the end-of-input sentinel
was read and every real window emitted). A query that fails (a broker killed under it) is restarted
from the checkpoint in this process, after the broker answers again.

Then the same aggregation runs over a batch read (`spark.read.format("exactly")`) of all committed input,
without the sentinel, and its windows are written to ``--batch-result`` (one JSON line each, written to
a temporary name and renamed), for the first proof.

stdout carries one JSON object per line, for the runner: ``{"event": "started", "query": ID}``,
``{"event": "batch", "batch": N, "rows": R, "watermark": ISO|null, "late_rows": D}`` after every
micro-batch, ``{"event": "query-failed", "error": ...}``, ``{"event": "stream-done"}``,
``{"event": "batch-aggregated", "windows": N}``. Exit code 0 when all of it succeeded.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

EVENT_SCHEMA = (
    "id BIGINT, carrier STRING, flight INT, origin STRING, dest STRING, "
    "scheduled_departure STRING, dep_delay DOUBLE"
)
DEFAULT_WATERMARK_DELAY = "3 days"
TRIGGER_INTERVAL = "1 second"
MAX_QUERY_RESTARTS = 5
BROKER_WAIT_SECONDS = 120.0


def emit(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, **fields}), flush=True)  # noqa: T201 (the runner reads these)


def spark_session(master: str) -> Any:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from exactly.spark import ExactlyDataSource

    spark = (
        SparkSession.builder.master(master)
        .appName("exactly-demo")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(ExactlyDataSource)
    return spark


def window_aggregates(records: Any, watermark_delay: str | None) -> Any:
    """Flight events (a DataFrame of Kafka records) -> one row per (carrier, origin, hour) with the
    output record's ``key`` and ``value`` columns. Streaming: with a watermark on the event time
    (``watermark_delay``); batch: ``None``, and the end-of-input sentinel dropped."""
    from pyspark.sql import functions as F

    events = records.select(F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("e")).select(
        "e.*", F.to_timestamp("e.scheduled_departure").alias("event_time")
    )
    if watermark_delay is not None:
        # no filter before the aggregation: the sentinel must reach the watermark (a filter on another
        # column could be pushed below it); its window is never emitted, the watermark never passes it
        events = events.withWatermark("event_time", watermark_delay)
    else:
        events = events.where(F.col("id") >= 0)
    windows = events.groupBy("carrier", "origin", F.window("event_time", "1 hour").alias("w")).agg(
        F.count(F.lit(1)).alias("flights"),
        F.count("dep_delay").alias("departures"),
        F.avg("dep_delay").alias("mean_dep_delay"),
    )
    hour = F.date_format("w.start", "yyyy-MM-dd'T'HH:mm:ss'Z'")
    value = F.to_json(
        F.struct(
            "carrier",
            "origin",
            hour.alias("hour"),
            "flights",
            "departures",
            "mean_dep_delay",
        ),
        {"ignoreNullFields": "false"},
    )
    return windows.select(F.concat_ws("|", "carrier", "origin", hour).alias("key"), value.alias("value"))


def source(spark: Any, bootstrap: str, topic: str, streaming: bool) -> Any:
    reader = spark.readStream if streaming else spark.read
    return (
        reader.format("exactly")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
    )


def start_query(spark: Any, args: argparse.Namespace) -> Any:
    windows = window_aggregates(source(spark, args.bootstrap, args.input, True), args.watermark_delay)
    return (
        windows.writeStream.format("exactly")
        .outputMode("append")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("topic", args.output)
        .option("checkpointLocation", args.checkpoint)
        .queryName("exactly-demo-windows")
        .trigger(processingTime=TRIGGER_INTERVAL)
        .start()
    )


def parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def report_progress(query: Any, seen: set[int]) -> datetime | None:
    """Print the batches finished since the last call; the newest watermark, if any."""
    watermark: datetime | None = None
    for progress in query.recentProgress:
        batch = progress["batchId"]
        mark = progress["eventTime"].get("watermark")
        if mark is not None:
            watermark = max(watermark or parse_time(mark), parse_time(mark))
        if batch in seen:
            continue
        seen.add(batch)
        late = sum(op.get("numRowsDroppedByWatermark", 0) for op in progress["stateOperators"])
        emit("batch", batch=batch, rows=progress["numInputRows"], watermark=mark, late_rows=late)
    return watermark


def wait_for_broker(bootstrap: str) -> None:
    """Until one of the bootstrap brokers accepts a connection (or `BROKER_WAIT_SECONDS` passed)."""
    addresses = [a.strip().rpartition(":") for a in bootstrap.split(",") if a.strip()]
    deadline = time.monotonic() + BROKER_WAIT_SECONDS
    while time.monotonic() < deadline:
        for host, _, port in addresses:
            try:
                with socket.create_connection((host, int(port)), timeout=1.0):
                    return
            except OSError:
                continue
        time.sleep(0.2)


def run_stream(spark: Any, args: argparse.Namespace) -> None:
    stop_at = parse_time(args.stop_at_watermark)
    restarts = 0
    while True:
        try:
            query = start_query(spark, args)
        except Exception as e:
            restarts += 1
            emit("query-failed", error=" ".join(str(e).split())[:500])
            if restarts > MAX_QUERY_RESTARTS:
                raise
            wait_for_broker(args.bootstrap)
            continue
        emit("started", query=str(query.id))
        seen: set[int] = set()
        while query.isActive:
            with contextlib.suppress(Exception):  # a failed query: reported below from query.exception()
                query.awaitTermination(0.5)
            watermark = report_progress(query, seen)
            if watermark is not None and watermark >= stop_at:
                query.stop()
                emit("stream-done")
                return
        error = query.exception()
        report_progress(query, seen)
        restarts += 1
        emit("query-failed", error=" ".join(str(error).split())[:500])
        if restarts > MAX_QUERY_RESTARTS:
            raise RuntimeError(f"the streaming query failed {restarts} times; last: {error}")
        wait_for_broker(args.bootstrap)


def run_batch(spark: Any, args: argparse.Namespace) -> None:
    windows = window_aggregates(source(spark, args.bootstrap, args.input, False), None)
    rows = windows.select("value").collect()
    target = Path(args.batch_result)
    partial = target.with_name(target.name + ".partial")
    with partial.open("w") as out:
        for row in rows:
            out.write(row["value"] + "\n")
    partial.rename(target)
    emit("batch-aggregated", windows=len(rows))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m exactly.demo.job")
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--stop-at-watermark", required=True)
    parser.add_argument("--batch-result", required=True)
    parser.add_argument("--watermark-delay", default=DEFAULT_WATERMARK_DELAY)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args(argv)
    spark = spark_session(args.master)
    try:
        run_stream(spark, args)
        run_batch(spark, args)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
