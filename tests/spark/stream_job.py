"""A streaming query run as its own driver process, so that a test can kill it with SIGKILL.

    python -m tests.spark.stream_job --bootstrap H:P --source DIR --checkpoint DIR --topic T
        [--master local[2]] [--option key=value ...]

Reads the JSON files of DIR (``{"id": int, "name": str}``; one file per micro-batch), spreads each
batch over 2 partitions and writes ``key=id, value=name`` with the exactly writer (Trigger.AvailableNow).
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
    args = parser.parse_args()
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable

    from pyspark.sql import SparkSession

    from exactly.spark import ExactlyDataSource

    spark = (
        SparkSession.builder.master(args.master)
        .appName("exactly-stream-job")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(ExactlyDataSource)
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
    query = writer.trigger(availableNow=True).start()
    seen: set[int] = set()
    while query.isActive:
        query.awaitTermination(1)
        for progress in query.recentProgress:
            if progress["batchId"] not in seen:
                seen.add(progress["batchId"])
                print(
                    json.dumps({"batch": progress["batchId"], "rows": progress["numInputRows"]}), flush=True
                )
    error = query.exception()
    spark.stop()
    if error is not None:
        print(f"query failed: {error}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
