"""The `spark` workload: the Spark exactly-once pipeline under the harness's faults.

The worker process (`python -m exactly.verify.worker spark ...`) is a Spark driver (local[1]) running one
Structured Streaming query: `spark-in` read with the `exactly` source (read_committed), every record's
value copied unchanged into the same partition of `spark-out` by the `exactly` sink (exactly-once: one
prepared transaction per task, committed with the batch), with its checkpoint in `<run dir>/spark/`, shared
by every incarnation. The runner seeds `spark-in` (proc `seeder`) and feeds it for the whole run (worker
`spark-feeder`, an idempotent producer recording `send` ops); the nemesis kills the driver -9 like any other
client, and the next incarnation resumes from the checkpoint. A query that fails (the broker went away) is
restarted in the same process once the broker answers again.

History: one `spark-batch` op per finished micro-batch (value `{"batch": N, "rows": R}`), and
`spark-query-failed` ops (error: the failure). The checker compares `spark-out` with `spark-in` in the final
read_committed scan as multisets (eos-dup / eos-missing); `spark-out`'s values are not unique per offset (a
retried batch's aborted copy stays in the log), as for `copy-out`.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import time
from typing import TYPE_CHECKING, Any

from exactly.verify.history import OpType

if TYPE_CHECKING:
    from exactly.verify.runner import Run
    from exactly.verify.worker import Worker

INPUT = "spark-in"
OUTPUT = "spark-out"
TRIGGER = "2 seconds"
BROKER_WAIT_S = 120.0


def _session() -> Any:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from exactly.spark import ExactlyDataSource

    spark = (
        SparkSession.builder.master("local[1]")
        .appName("exactly-verify")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "512m")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(ExactlyDataSource)
    return spark


def _start(spark: Any, w: Worker) -> Any:
    records = (
        spark.readStream.format("exactly")
        .option("kafka.bootstrap.servers", w.args.bootstrap)
        .option("subscribe", INPUT)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "5000")
        .load()
    )
    return (
        records.select("value", "partition")
        .writeStream.format("exactly")
        .option("kafka.bootstrap.servers", w.args.bootstrap)
        .option("topic", OUTPUT)
        .option("checkpointLocation", str(w.args.run_dir / "spark" / "checkpoint"))
        .queryName("exactly-verify")
        .trigger(processingTime=TRIGGER)
        .start()
    )


def _wait_for_broker(bootstrap: str) -> None:
    host, _, port = bootstrap.rpartition(":")
    deadline = time.monotonic() + BROKER_WAIT_S
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, int(port)), timeout=1.0):
                return
        except OSError:
            time.sleep(0.5)


def run_spark(w: Worker) -> None:
    from exactly.verify.worker import Stop

    spark = _session()
    try:
        while not Stop.requested:
            try:
                query = _start(spark, w)
            except Exception as e:  # noqa: BLE001 (start fails while the broker is away: retried)
                w.history.record("spark-query-failed", OpType.FAIL, error=" ".join(str(e).split())[:500])
                _wait_for_broker(w.args.bootstrap)
                time.sleep(1.0)
                continue
            seen: set[int] = set()
            while query.isActive and not Stop.requested:
                with contextlib.suppress(Exception):  # a failed query: recorded below
                    query.awaitTermination(0.5)
                _record_batches(w, query, seen)
            if Stop.requested:
                query.stop()
                _record_batches(w, query, seen)
                return
            error = " ".join(str(query.exception()).split())[:500]
            w.history.record("spark-query-failed", OpType.FAIL, error=error)
            _wait_for_broker(w.args.bootstrap)
    finally:
        spark.stop()


def _record_batches(w: Worker, query: Any, seen: set[int]) -> None:
    for progress in query.recentProgress:
        batch = progress["batchId"]
        if batch not in seen:
            seen.add(batch)
            w.history.record("spark-batch", OpType.OK, {"batch": batch, "rows": progress["numInputRows"]})


def wait_for_spark(run: Run, timeout: float = 240.0) -> bool:
    """In the final phase, once the feeder stopped: until `spark-out` holds as many committed records as
    `spark-in` (the query caught up), or `timeout`; the checker judges what is there."""
    from exactly.verify.worker import key_of

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sample = run.sample_offsets()
        if sample is not None:
            ends = {k: hwm for k, (_, _, hwm) in sample.items() if k.startswith(("spark-in:", "spark-out:"))}
            try:
                read = run.scan("read_committed", ends, timeout=60)
            except Exception:  # noqa: BLE001 (the RunError of a slow scan: try again)
                read = {}
            n_in = sum(len(read.get(key_of(INPUT, p), [])) for p in range(run.config.partitions))
            n_out = sum(len(read.get(key_of(OUTPUT, p), [])) for p in range(run.config.partitions))
            if read and n_out >= n_in:
                return True
        time.sleep(2.0)
    return False
