"""A streaming query run as its own driver process, so that a test can kill it with SIGKILL.

    python -m tests.spark.stream_job --bootstrap H:P --source DIR --checkpoint DIR --topic T
        [--master local[2]] [--option key=value ...]

Reads the JSON files of DIR (``{"id": int, "name": str}``; one file per micro-batch), spreads each
batch over 2 partitions and writes ``key=id, value=name`` with the exactly writer (Trigger.AvailableNow).
With ``--source rate:<rows per batch>:<batches>`` it reads Spark's deterministic ``rate-micro-batch``
source instead (``key=value=str(value)``; nothing read from a file system, for the cluster test) and
stops after that many batches. ``--conf key=value`` sets Spark settings.
Prints one JSON line per finished batch (``{"batch": N, "rows": R}``) and exits 0 when all data is done.
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--option", action="append", default=[])
    parser.add_argument("--conf", action="append", default=[])
    args = parser.parse_args()
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable

    from pyspark.sql import SparkSession

    from exactly.spark import ExactlyDataSource

    builder = (
        SparkSession.builder.master(args.master)
        .appName("exactly-stream-job")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
    )
    for item in args.conf:
        key, _, value = item.partition("=")
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(ExactlyDataSource)
    stop_after: int | None = None
    if args.source.startswith("rate:"):
        _, rows, batches = args.source.split(":")
        stop_after = int(batches)
        stream = (
            spark.readStream.format("rate-micro-batch")
            .option("rowsPerBatch", rows)
            .option("numPartitions", 2)
            .load()
            .selectExpr("CAST(value AS STRING) AS key", "CAST(value AS STRING) AS value")
        )
    else:
        stream = (
            spark.readStream.schema("id long, name string")
            .option("maxFilesPerTrigger", 1)
            .json(args.source)
            .repartition(2)
            .selectExpr("CAST(id AS STRING) AS key", "name AS value")
        )
    writer = (
        stream.writeStream.format("exactly")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("topic", args.topic)
        .option("checkpointLocation", args.checkpoint)
    )
    for item in args.option:
        key, _, value = item.partition("=")
        writer = writer.option(key, value)
    if stop_after is None:
        query = writer.trigger(availableNow=True).start()
    else:
        query = writer.trigger(processingTime="500 milliseconds").start()
    seen: set[int] = set()
    while query.isActive:
        query.awaitTermination(1)
        for progress in query.recentProgress:
            if progress["batchId"] not in seen:
                seen.add(progress["batchId"])
                print(
                    json.dumps({"batch": progress["batchId"], "rows": progress["numInputRows"]}), flush=True
                )
        if stop_after is not None and len(seen) >= stop_after:
            query.stop()
    error = query.exception()
    spark.stop()
    if error is not None:
        print(f"query failed: {error}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
