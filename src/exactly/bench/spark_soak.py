"""A streaming query run for many micro-batches against one broker, sampling what it costs the broker
(issue 23 part 1: a query that runs for a month must not grow the broker).

    python -m exactly.bench.spark_soak [--batches N] [--rows R] [--partitions P] [--tasks T]
        [--trigger-ms MS] [--sample-every K] [--out DIR] [--broker-set key=value ...]
    exactly bench spark-soak ...

Starts a broker on a temporary data directory and a local[2] Spark session, then runs Spark's
deterministic ``rate-micro-batch`` source (R rows a batch, T Spark partitions) into a P-partition topic
with ``guarantee=exactly-once`` and a processing-time trigger of MS ms, until N batches are committed.
Every K batches (and at the end) it samples:

* the broker's resident set size (``/proc/<pid>/status`` VmRSS, MB);
* the transactional ids the coordinator knows (ListTransactions);
* the producer ids each output partition holds (DescribeProducers; the figure is the largest);
* the retained batch decisions of the query (ListPreparedTxns);
* the bytes of ``__transaction_state`` on disk (every segment of every partition). By default the broker
  runs with 64-KiB ``__transaction_state`` segments, a 1-s cleaner backoff and tombstones kept 60 s
  (``log.cleaner.delete.retention.ms``; Kafka's default is a day), so that compaction (which only cleans
  rolled segments) and the removal of old decisions' tombstones show within minutes instead of after a
  100-MB segment and a day. With the defaults the topic grows by one tombstone (~116 bytes) per batch for
  a day, then stays flat.

At the end the topic is read read_committed: its values must be exactly ``0 .. R x decided batches - 1``,
each once (the output is the input). `SoakSample` rows go to ``DIR/raw/spark_soak.csv`` (bench/figures.py
`Sheet` format) and a plot to ``DIR/spark_soak.png`` when DIR is given.

`run_soak` is the hook the slow-marked test calls with a few batches against its own broker.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from exactly.bench.broker import BROKER_START_TIMEOUT
from exactly.bench.figures import Sheet
from exactly.testing.processes import BrokerProcess

__all__ = ["SoakResult", "SoakSample", "broker_rss_mb", "run_soak", "sample_broker"]

TRANSACTION_TOPIC = "__transaction_state"
SOAK_BROKER_SETTINGS = (
    "transaction.state.log.segment.bytes=65536",
    "log.cleaner.backoff.ms=1000",
    "log.cleaner.delete.retention.ms=60000",
)


@dataclass(frozen=True, slots=True)
class SoakSample:
    """What the broker holds after `batch` committed micro-batches, `seconds` into the run."""

    batch: int
    seconds: float
    rss_mb: float
    transactional_ids: int
    max_producer_ids: int  # the most producer ids one output partition holds
    decisions: int
    txn_state_bytes: int


@dataclass(frozen=True, slots=True)
class SoakResult:
    samples: tuple[SoakSample, ...]
    batches: int  # decided batches
    records: int  # records read back (read_committed)
    exact: bool  # the output is 0 .. rows x batches - 1, each once


def broker_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    return float("nan")


def _dir_bytes(data_dir: Path, prefix: str) -> int:
    total = 0
    for part in data_dir.glob(f"{prefix}-*"):
        total += sum(f.stat().st_size for f in part.iterdir() if f.is_file())
    return total


def sample_broker(
    broker: BrokerProcess, topic: str, partitions: int, query_id: str | None, batch: int, started: float
) -> SoakSample:
    """One sample of what the broker holds (admin requests as `exactly txn` sends them)."""
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient

    from exactly.client.twopc import TwoPhaseClient

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="exactly-soak")
    try:
        listed = admin.list_transactions()
        ids = sum(len(listings) for listings in listed.values())
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        producers = admin.describe_producers(tps)
        max_pids = max((len(state.active_producers) for state in producers.values()), default=0)
    finally:
        admin.close()
    decisions = 0
    if query_id is not None:
        with TwoPhaseClient(broker.bootstrap) as client:
            decisions = len(client.list_prepared(query_id)[1])
    return SoakSample(
        batch,
        time.monotonic() - started,
        broker_rss_mb(broker.pid),
        ids,
        max_pids,
        decisions,
        _dir_bytes(broker.data_dir, TRANSACTION_TOPIC),
    )


def _read_values(bootstrap: str, topic: str, partitions: int, timeout: float = 120.0) -> list[int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "exactly-soak-check",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
        }
    )
    consumer.assign([TopicPartition(topic, p, -2) for p in range(partitions)])
    values: list[int] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + timeout
    while len(at_end) < partitions and time.monotonic() < deadline:
        for message in consumer.consume(1000, 1.0):
            error = message.error()
            if error is not None:
                partition = message.partition()
                if partition is not None:
                    at_end.add(partition)
                continue
            values.append(int(message.value() or b"-1"))
    consumer.close()
    return values


def _create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.cimpl import NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result()


def run_soak(
    spark: Any,
    broker: BrokerProcess,
    *,
    batches: int,
    rows: int = 20,
    partitions: int = 4,
    tasks: int = 2,
    trigger_ms: int = 100,
    sample_every: int = 10,
    topic: str = "soak",
    checkpoint: Path,
    on_sample: Callable[[SoakSample], None] | None = None,
    timeout: float = 3600.0,
    stop_after: float | None = None,
) -> SoakResult:
    """Run the query until `batches` are committed, sampling every `sample_every` batches.

    Past `timeout` seconds the soak fails; past `stop_after` seconds it ends early as if `batches`
    had been reached (a long soak cut to the time available, reported with the batches it ran).
    """
    _create_topic(broker.bootstrap, topic, partitions)
    stream = (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", rows)
        .option("numPartitions", tasks)
        .load()
        .selectExpr("CAST(value AS STRING) AS key", "CAST(value AS STRING) AS value")
    )
    query = (
        stream.writeStream.format("exactly")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", topic)
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime=f"{trigger_ms} milliseconds")
        .start()
    )
    started = time.monotonic()
    samples: list[SoakSample] = []
    next_sample = 0
    done = 0
    try:
        deadline = started + timeout
        while done < batches:
            if stop_after is not None and time.monotonic() - started > stop_after:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"{done} of {batches} batches within {timeout:g} s")
            if query.exception() is not None:
                raise RuntimeError(f"the query failed: {query.exception()}")
            progress = query.lastProgress
            done = int(progress["batchId"]) + 1 if progress else 0
            if done >= next_sample:
                sample = sample_broker(broker, topic, partitions, str(query.id), done, started)
                samples.append(sample)
                if on_sample is not None:
                    on_sample(sample)
                next_sample = done + sample_every
            time.sleep(0.05)
    finally:
        query.stop()
    last = sample_broker(broker, topic, partitions, str(query.id), done, started)
    samples.append(last)
    if on_sample is not None:
        on_sample(last)
    values = _read_values(broker.bootstrap, topic, partitions)
    decided = len(values) // rows if rows else 0
    exact = sorted(values) == list(range(len(values))) and len(values) % rows == 0
    return SoakResult(tuple(samples), decided, len(values), exact)


def write_figures(result: SoakResult, out: Path) -> None:
    """`raw/spark_soak.csv` and `spark_soak.png` under `out`."""
    sheet = Sheet("spark_soak")
    for field, unit in (
        ("rss_mb", "MB"),
        ("transactional_ids", "ids"),
        ("max_producer_ids", "producer ids"),
        ("decisions", "decisions"),
        ("txn_state_bytes", "bytes"),
    ):
        sheet.add_indexed(field, ((s.batch, float(getattr(s, field))) for s in result.samples), unit)
    sheet.write(out)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    batches = [s.batch for s in result.samples]
    fig, axes = plt.subplots(2, 2, figsize=(10, 7), sharex=True)
    panels = (
        ("broker RSS (MB)", [s.rss_mb for s in result.samples]),
        ("transactional ids (ListTransactions)", [s.transactional_ids for s in result.samples]),
        ("producer ids per partition (max, DescribeProducers)", [s.max_producer_ids for s in result.samples]),
        ("__transaction_state on disk (KiB)", [s.txn_state_bytes / 1024 for s in result.samples]),
    )
    for ax, (title, values) in zip(axes.flat, panels, strict=True):
        ax.plot(batches, values, marker=".")
        ax.set_title(title, fontsize=10)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    for ax in axes[1]:
        ax.set_xlabel("committed micro-batches")
    fig.suptitle("exactly-once Spark sink: a long-running streaming query (issue 23)")
    fig.tight_layout()
    fig.savefig(out / "spark_soak.png", dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="A long-running exactly-once streaming query's broker cost")
    parser.add_argument("--batches", type=int, default=10_000)
    parser.add_argument("--rows", type=int, default=20)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--tasks", type=int, default=2)
    parser.add_argument("--trigger-ms", type=int, default=100)
    parser.add_argument("--sample-every", type=int, default=50)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument(
        "--max-minutes",
        type=float,
        default=None,
        help="end the soak after this long even if fewer batches are committed (the output says how many)",
    )
    parser.add_argument(
        "--broker-set",
        action="append",
        default=None,
        help="a broker setting key=value (repeatable); default: small __transaction_state segments and "
        "a 1-s cleaner backoff, so compaction shows within minutes rather than after 100 MB",
    )
    args = parser.parse_args(argv)
    settings = args.broker_set if args.broker_set is not None else list(SOAK_BROKER_SETTINGS)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    with tempfile.TemporaryDirectory(prefix="exactly-bench-soak-") as tmp:
        broker = BrokerProcess(Path(tmp) / "data", *settings).start(BROKER_START_TIMEOUT)
        print(f"broker settings: {' '.join(settings) or '(defaults)'}", flush=True)
        spark = None
        try:
            from pyspark.sql import SparkSession

            from exactly.spark import ExactlyDataSource

            spark = (
                SparkSession.builder.master("local[2]")
                .config("spark.ui.enabled", "false")
                .config("spark.driver.memory", "1g")
                .config("spark.ui.showConsoleProgress", "false")
                .config("spark.sql.shuffle.partitions", "2")
                .getOrCreate()
            )
            spark.sparkContext.setLogLevel("ERROR")
            spark.dataSource.register(ExactlyDataSource)
            print("batch  seconds  rss_mb  txn_ids  max_pids  decisions  txn_state_kib", flush=True)

            def show(s: SoakSample) -> None:
                print(
                    f"{s.batch:5d}  {s.seconds:7.1f}  {s.rss_mb:6.1f}  {s.transactional_ids:7d}  "
                    f"{s.max_producer_ids:8d}  {s.decisions:9d}  {s.txn_state_bytes / 1024:13.1f}",
                    flush=True,
                )

            result = run_soak(
                spark,
                broker,
                batches=args.batches,
                rows=args.rows,
                partitions=args.partitions,
                tasks=args.tasks,
                trigger_ms=args.trigger_ms,
                sample_every=args.sample_every,
                checkpoint=Path(tmp) / "checkpoint",
                on_sample=show,
                timeout=max(3600.0, args.batches * 10.0),
                stop_after=None if args.max_minutes is None else args.max_minutes * 60,
            )
            print(
                f"decided batches: {result.batches}; records read back: {result.records}; "
                f"output exactly the input: {result.exact}"
            )
            if args.out is not None:
                args.out.mkdir(parents=True, exist_ok=True)
                write_figures(result, args.out)
                print(f"wrote {args.out / 'raw' / 'spark_soak.csv'} and {args.out / 'spark_soak.png'}")
            if not result.exact:
                raise SystemExit("the output is not exactly the input")
        finally:
            if spark is not None:
                spark.stop()
            broker.stop(30)


if __name__ == "__main__":
    main()
