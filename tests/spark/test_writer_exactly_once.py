"""The exactly-once writer (design (b): prepared task transactions, one idempotent decision per batch)
against the real broker with the two-phase commit extension, on Spark local[2,3] (task retries allowed).

Every test reads the topic back record by record with a read_committed consumer and checks that each
input row is there exactly once; where a failure left extra data in the log, a read_uncommitted
consumer shows that the data really was written (and then hidden by an abort).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from exactly.client.twopc import TwoPhaseClient
from exactly.spark.preflight import ColumnLayout
from exactly.spark.writer import ExactlyCommitMessage, ExactlyStreamWriter
from exactly.spark.writer_options import writer_options
from exactly.testing.processes import BrokerProcess
from tests.cli.helpers import run_cli
from tests.spark.kafka_io import create_topic, read_committed, read_records

pytestmark = [pytest.mark.interop, pytest.mark.slow]

SPARK_MASTER = "local[2,3]"
ROOT = Path(__file__).resolve().parents[2]
FAIL_TASK_ONCE = ("exactly.writer.hooks", "exactly.testing.spark_hooks:FailTaskOnce")  # argument: partition


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def write_files(directory: Path, files: int, rows: int) -> list[tuple[bytes, bytes]]:
    """`files` JSON files of `rows` rows; returns the (key, value) records the job must write."""
    directory.mkdir(parents=True, exist_ok=True)
    expected = []
    for f in range(files):
        lines = []
        for i in range(rows):
            row_id = f * 1000 + i
            lines.append(json.dumps({"id": row_id, "name": f"name-{row_id}"}) + "\n")
            expected.append((str(row_id).encode(), f"name-{row_id}".encode()))
        (directory / f"part-{f:03d}.json").write_text("".join(lines))
    return sorted(expected)


def start_query(
    spark: Any, broker: BrokerProcess, source: Path, ckpt: Path, topic: str, **options: str
) -> Any:
    stream = (
        spark.readStream.schema("id long, name string")
        .option("maxFilesPerTrigger", 1)
        .json(str(source))
        .repartition(2)
        .selectExpr("CAST(id AS STRING) AS key", "name AS value")
    )
    writer = (
        stream.writeStream.format("exactly")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", topic)
        .option("checkpointLocation", str(ckpt))
    )
    for key, value in options.items():
        writer = writer.option(key, value)
    return writer.trigger(availableNow=True).start()


def run_query(spark: Any, broker: BrokerProcess, source: Path, ckpt: Path, topic: str, **options: str) -> Any:
    query = start_query(spark, broker, source, ckpt, topic, **options)
    assert query.awaitTermination(180), "query did not finish"
    assert query.exception() is None, query.exception()
    return query


def records_of(bootstrap: str, topic: str, minimum: int) -> list[tuple[bytes, bytes]]:
    return sorted(
        (r.key, r.value) for r in read_committed(bootstrap, topic, minimum=minimum) if r.key is not None
    )


# --- df.write -------------------------------------------------------------------------------------


def test_batch_write_is_one_atomic_job(spark: Any, broker: BrokerProcess) -> None:
    topic = unique("atomic")
    create_topic(broker.bootstrap, topic, 3)
    rows = [(f"k{i}", f"v{i}") for i in range(300)]
    df = spark.createDataFrame(rows, "key string, value string").repartition(3)
    df.write.format("exactly").option("kafka.bootstrap.servers", broker.bootstrap).option(
        "topic", topic
    ).mode("append").save()
    got = read_committed(broker.bootstrap, topic, minimum=300)
    assert sorted((r.key, r.value) for r in got) == sorted((k.encode(), v.encode()) for k, v in rows)


def test_batch_write_failed_attempt_is_not_visible(spark: Any, broker: BrokerProcess) -> None:
    topic = unique("atomic-retry")
    create_topic(broker.bootstrap, topic, 2)
    rows = [(f"k{i}", f"v{i}") for i in range(100)]
    df = spark.createDataFrame(rows, "key string, value string").repartition(2)
    df.write.format("exactly").option("kafka.bootstrap.servers", broker.bootstrap).option(
        "topic", topic
    ).option(*FAIL_TASK_ONCE).option("exactly.writer.hooks.argument", "1").mode("append").save()
    got = read_committed(broker.bootstrap, topic, minimum=100)
    assert sorted((r.key, r.value) for r in got) == sorted((k.encode(), v.encode()) for k, v in rows)
    everything = read_records(broker.bootstrap, topic, minimum=101, isolation="read_uncommitted")
    assert len(everything) > 100  # the failed attempt's rows are in the log, aborted


# --- streaming --------------------------------------------------------------------------------------


def test_failed_task_attempt_is_aborted(spark: Any, broker: BrokerProcess, tmp_path: Path) -> None:
    topic = unique("retry")
    create_topic(broker.bootstrap, topic, 2)
    expected = write_files(tmp_path / "in", files=3, rows=40)
    query = run_query(
        spark,
        broker,
        tmp_path / "in",
        tmp_path / "ckpt",
        topic,
        **{FAIL_TASK_ONCE[0]: FAIL_TASK_ONCE[1], "exactly.writer.hooks.argument": "1"},
    )
    assert [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]] == [40, 40, 40]
    assert records_of(broker.bootstrap, topic, 120) == expected
    # every batch's partition 1 was written twice: attempt 0 prepared its rows and failed
    everything = read_records(broker.bootstrap, topic, minimum=121, isolation="read_uncommitted")
    assert len(everything) > 120


def test_replayed_batch_after_commit_log_loss_is_not_duplicated(
    spark: Any, broker: BrokerProcess, tmp_path: Path
) -> None:
    topic = unique("replay")
    create_topic(broker.bootstrap, topic, 2)
    expected = write_files(tmp_path / "in", files=3, rows=30)
    ckpt = tmp_path / "ckpt"
    run_query(spark, broker, tmp_path / "in", ckpt, topic)
    assert records_of(broker.bootstrap, topic, 90) == expected
    # as if the driver died after the sink's commit and before Spark's commit log: batch 2 runs again
    (ckpt / "commits" / "2").unlink()
    (ckpt / "commits" / ".2.crc").unlink(missing_ok=True)
    query = run_query(spark, broker, tmp_path / "in", ckpt, topic)
    assert [(p["batchId"], p["numInputRows"]) for p in query.recentProgress] == [(2, 30)]
    assert records_of(broker.bootstrap, topic, 90) == expected
    assert len(read_records(broker.bootstrap, topic, minimum=91, isolation="read_uncommitted")) > 90


def _prepared(bootstrap: str, topic: str, query: str, batch: int, partition: int, values: list[bytes]) -> str:
    """A transaction with `values` in `topic`[`partition`], prepared and tagged (query, batch, partition)."""
    tid = f"test-{uuid.uuid4().hex}"
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid})
    producer.init_transactions(30)
    producer.begin_transaction()
    for value in values:
        producer.produce(topic, value=value, partition=partition)
    assert producer.flush(30) == 0
    with TwoPhaseClient(bootstrap) as client:
        client.prepare(tid, query, batch, partition)
    return tid


def test_speculative_loser_and_repeated_commit(broker: BrokerProcess) -> None:
    """Two attempts of one partition prepared, only the winner's message reaches the driver; then the
    driver commits the batch again, and a replayed attempt prepares after the decision."""
    topic = unique("speculation")
    create_topic(broker.bootstrap, topic, 1)
    query = f"q-{uuid.uuid4().hex}"
    options = writer_options({"kafka.bootstrap.servers": broker.bootstrap, "topic": topic})
    writer = ExactlyStreamWriter(options, ColumnLayout(value="value"))
    winner = _prepared(broker.bootstrap, topic, query, 5, 0, [b"w0", b"w1"])
    loser = _prepared(broker.bootstrap, topic, query, 5, 0, [b"l0", b"l1"])
    message = ExactlyCommitMessage(query, 5, 0, 0, winner, 2)
    writer.commit([message], 5)

    def after_marker(value: bytes) -> list[bytes | None]:
        # a record produced after everything: visible only once no transaction pins the LSO
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        producer.produce(topic, value=value, partition=0)
        assert producer.flush(30) == 0
        got = read_committed(broker.bootstrap, topic, minimum=3 if value == b"after-1" else 4)
        return [r.value for r in sorted(got, key=lambda r: r.offset)]

    assert after_marker(b"after-1") == [b"w0", b"w1", b"after-1"]
    del loser
    writer.commit([message], 5)  # the same decision again: nothing changes
    with TwoPhaseClient(broker.bootstrap) as client:
        decision = client.commit_batch(query, 5, [winner])
    assert decision.already_decided
    assert decision.winners == (winner,)
    # a replay of batch 5 (Spark lost commits/5): new attempt, commit(...) with the new message
    try:
        replay = _prepared(broker.bootstrap, topic, query, 5, 0, [b"r0"])
    except Exception as e:  # noqa: BLE001 - the broker may refuse to prepare into a decided batch
        print(f"prepare after the decision refused: {e}")
    else:
        writer.commit([ExactlyCommitMessage(query, 5, 0, 0, replay, 1)], 5)
    assert after_marker(b"after-2") == [b"w0", b"w1", b"after-1", b"after-2"]


def test_abort_rolls_back_an_undecided_batch_and_not_a_decided_one(broker: BrokerProcess) -> None:
    topic = unique("abort")
    create_topic(broker.bootstrap, topic, 1)
    query = f"q-{uuid.uuid4().hex}"
    options = writer_options({"kafka.bootstrap.servers": broker.bootstrap, "topic": topic})
    writer = ExactlyStreamWriter(options, ColumnLayout(value="value"))
    undecided = _prepared(broker.bootstrap, topic, query, 0, 0, [b"a0"])
    writer.abort([ExactlyCommitMessage(query, 0, 0, 0, undecided, 1), None], 0)
    decided = _prepared(broker.bootstrap, topic, query, 1, 0, [b"c0"])
    message = ExactlyCommitMessage(query, 1, 0, 0, decided, 1)
    writer.commit([message], 1)
    writer.abort([message], 1)  # Spark calls abort when commit raised after the decision: roll forward
    with pytest.raises(RuntimeError, match="no commit message for partitions \\[1\\]"):
        writer.commit([message, None], 2)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce(topic, value=b"after", partition=0)
    assert producer.flush(30) == 0
    got = read_committed(broker.bootstrap, topic, minimum=2)
    assert [r.value for r in sorted(got, key=lambda r: r.offset)] == [b"c0", b"after"]


# --- kill -9 of the driver and of the broker ---------------------------------------------------------


@pytest.fixture
def jobs() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)


def start_job(
    jobs: list[subprocess.Popen[bytes]], broker: BrokerProcess, tmp_path: Path, topic: str, *options: str
) -> subprocess.Popen[bytes]:
    args = [sys.executable, "-m", "tests.spark.stream_job", "--bootstrap", broker.bootstrap]
    args += ["--source", str(tmp_path / "in"), "--checkpoint", str(tmp_path / "ckpt"), "--topic", topic]
    for option in options:
        args += ["--option", option]
    log = open(tmp_path / f"job-{len(jobs)}.log", "wb")  # noqa: SIM115 (the child keeps it)
    proc = subprocess.Popen(args, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    log.close()
    jobs.append(proc)
    return proc


def wait_for(path: Path, proc: subprocess.Popen[bytes], log: Path, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, f"job exited with {proc.returncode}:\n{log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"no {path.name} within {timeout}s:\n{log.read_text()[-3000:]}"
        time.sleep(0.2)


@pytest.mark.parametrize("point", ["before", "after"])
def test_driver_killed_around_the_decision(
    broker: BrokerProcess, tmp_path: Path, jobs: list[subprocess.Popen[bytes]], point: str
) -> None:
    """kill -9 of the driver (and its JVM) while committing batch 1: before the broker's decision, or after
    it and before Spark's commit log. The restarted query replays batch 1; the output is exactly once."""
    topic = unique(f"driver-{point}")
    create_topic(broker.bootstrap, topic, 2)
    expected = write_files(tmp_path / "in", files=3, rows=25)
    marker = tmp_path / "hanging"
    hooks = f"exactly.writer.hooks=exactly.testing.spark_hooks:Hang{point.capitalize()}Decision"
    job = start_job(jobs, broker, tmp_path, topic, hooks, f"exactly.writer.hooks.argument=1:{marker}")
    wait_for(marker, job, tmp_path / "job-0.log")
    os.killpg(job.pid, signal.SIGKILL)
    job.wait(30)
    assert not (tmp_path / "ckpt" / "commits" / "1").exists()
    again = start_job(jobs, broker, tmp_path, topic)
    assert again.wait(240) == 0, (tmp_path / "job-1.log").read_text()[-3000:]
    batches = [
        json.loads(line) for line in (tmp_path / "job-1.log").read_text().splitlines() if line.startswith("{")
    ]
    assert [b["batch"] for b in batches if b["rows"]] == [1, 2]  # batch 1 ran again
    assert records_of(broker.bootstrap, topic, 75) == expected


def test_abandoned_query_is_listed_and_aborted(
    broker: BrokerProcess, tmp_path: Path, jobs: list[subprocess.Popen[bytes]]
) -> None:
    """The driver dies with batch 1 prepared and undecided, and the query is never restarted: its open
    output pins the LSO until an operator finds it and aborts it with `exactly txn`."""
    topic = unique("abandoned")
    create_topic(broker.bootstrap, topic, 2)
    expected = write_files(tmp_path / "in", files=3, rows=20)
    marker = tmp_path / "hanging"
    job = start_job(
        jobs,
        broker,
        tmp_path,
        topic,
        "exactly.writer.hooks=exactly.testing.spark_hooks:HangBeforeDecision",
        f"exactly.writer.hooks.argument=1:{marker}",
    )
    wait_for(marker, job, tmp_path / "job-0.log")
    os.killpg(job.pid, signal.SIGKILL)
    job.wait(30)
    query_id = marker.read_text().split()[0]
    # what an operator runs: `exactly txn list-prepared` shows the abandoned batch and the decided one
    listed = run_cli("txn", "list-prepared", "--query", query_id, bootstrap=broker.bootstrap)
    assert listed.returncode == 0, listed.stderr
    rows = [line.split() for line in listed.stdout.decode().splitlines()[1:]]
    prepared_ids = sorted(row[0] for row in rows)
    assert sorted((row[1], int(row[2]), int(row[3])) for row in rows) == [(query_id, 1, 0), (query_id, 1, 1)]
    decided = run_cli("txn", "list-prepared", "--query", query_id, "--decisions", bootstrap=broker.bootstrap)
    decision_rows = [line.split() for line in decided.stdout.decode().splitlines()[1:]]
    assert [(row[0], int(row[1]), len(row[2].split(","))) for row in decision_rows] == [(query_id, 0, 2)]
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for p in range(2):
        producer.produce(topic, key=b"after", value=b"after", partition=p)
    assert producer.flush(30) == 0
    batch_zero = records_of(broker.bootstrap, topic, 20)  # pinned: "after" is not visible
    files = {int(key) // 1000 for key, _ in batch_zero}
    assert len(files) == 1, files  # one file per batch; which one Spark took first is its choice
    assert batch_zero == [r for r in expected if int(r[0]) // 1000 in files]
    aborted = run_cli("txn", "abort-query", "--query", query_id, bootstrap=broker.bootstrap)
    assert aborted.returncode == 0, aborted.stderr
    out = aborted.stdout.decode().splitlines()
    assert out[0] == f"aborted 2 prepared transactions of query {query_id}"
    assert sorted(out[1:]) == prepared_ids
    with TwoPhaseClient(broker.bootstrap) as client:
        assert client.list_prepared(query_id)[0] == []
    assert records_of(broker.bootstrap, topic, 22) == sorted(
        [*batch_zero, (b"after", b"after"), (b"after", b"after")]
    )


def test_broker_killed_mid_batch(spark: Any, broker: BrokerProcess, tmp_path: Path) -> None:
    topic = unique("broker-kill")
    create_topic(broker.bootstrap, topic, 2)
    expected = write_files(tmp_path / "in", files=8, rows=30)
    query = start_query(spark, broker, tmp_path / "in", tmp_path / "ckpt", topic)
    deadline = time.monotonic() + 120
    while not any(p["numInputRows"] for p in query.recentProgress):
        assert time.monotonic() < deadline, "no batch finished"
        assert query.isActive, query.exception()
        time.sleep(0.2)
    broker.kill()
    broker.start()
    failures = 0
    while True:  # a query that failed on the dead broker is restarted from its checkpoint
        try:
            query.awaitTermination(180)
        except Exception as e:  # noqa: BLE001 - StreamingQueryException: the batch failed
            print(f"query failed: {str(e)[:300]}")
        assert not query.isActive, "query did not finish"
        if query.exception() is None:
            break
        failures += 1
        assert failures < 5, query.exception()
        query = start_query(spark, broker, tmp_path / "in", tmp_path / "ckpt", topic)
    assert records_of(broker.bootstrap, topic, 240) == expected
