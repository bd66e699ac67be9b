"""A batch job for `spark-submit` (tests/spark/test_deployment.py): registers the data source with
`exactly.spark.register` (which checks the workers), writes ROWS rows to TOPIC (2 partitions), reads
the topic back and prints one JSON line: ``{"values": [...sorted...], "executors": [...]}`` where
executors are the Python interpreters the tasks ran in.

    spark-submit --archives env.tar#environment tests/spark/packed_job.py BOOTSTRAP TOPIC ROWS
"""

from __future__ import annotations

import json
import sys


def _interpreter(_: object) -> str:
    import sys as worker_sys

    return worker_sys.executable


def main() -> int:
    bootstrap, topic, rows = sys.argv[1], sys.argv[2], int(sys.argv[3])
    from pyspark.sql import SparkSession

    from exactly.spark import register

    spark = SparkSession.builder.appName("exactly-packed-job").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    (
        spark.range(rows, numPartitions=2)
        .selectExpr("CAST(id AS STRING) AS key", "CAST(id AS STRING) AS value")
        .write.format("exactly")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .mode("append")
        .save()
    )
    read = (
        spark.read.format("exactly")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .load()
        .selectExpr("CAST(value AS STRING) AS v")
        .collect()
    )
    interpreters = sorted(set(spark.sparkContext.parallelize(range(4), 2).map(_interpreter).collect()))
    print(json.dumps({"values": sorted(int(r.v) for r in read), "executors": interpreters}), flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
