"""The writer of the `exactly` PySpark data source: ``df.write`` and ``df.writeStream``.

Both writers take Arrow record batches (`DataSourceArrowWriter` / `DataSourceStreamArrowWriter`) and
map the columns ``key``, ``value``, ``topic``, ``partition``, ``headers`` onto Kafka records.

guarantee=at-least-once: each task produces with an idempotent producer and flushes; the driver's
commit has nothing to do. A retried task or a replayed micro-batch writes its rows again.

guarantee=exactly-once (design (b) of the Spark notes, over `exactly.client.twopc`):

- a task attempt opens a transaction under a transactional id from its query's bounded pool,
  ``exactly-spark.<query>.<partition>.<slot>`` (`exactly.spark.txn_ids`: 8 ids per Spark partition,
  chosen by batch parity and attempt number among those no Prepared transaction holds), learns its
  producer id and epoch from the coordinator, produces its rows, flushes, and asks the broker to PREPARE
  it tagged (query, batch, partition) for that producer instance. A prepared transaction is never timed
  out by ``transaction.timeout.ms``; the task then drops its producer without committing or aborting.
  Its commit message carries the transactional id (librdkafka never reveals producer id/epoch).
- the driver's ``commit(messages, batchId)`` sends one idempotent decision ``commit_batch(query,
  batch, winners)``: the broker commits the winners and aborts every other transaction tagged (query,
  batch) — failed attempts, speculative losers, attempts of an earlier run of the batch. A second call
  for a decided batch (Spark replays a batch whose ``commits/N`` it did not write) changes nothing and
  aborts the replay's new transactions, so the batch is visible exactly once and as a unit.
- ``abort(messages, batchId)`` asks ``abort_batch`` (a no-op on the broker once decided).

For ``df.write`` the "query" is a fresh uuid per job (created on the driver in `writer()` and pickled to
the tasks with the writer) and the batch is 0: the job is one atomic decision.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from exactly.spark.preflight import ColumnLayout
from exactly.spark.txn_ids import PoolExhaustedError, choose_transactional_id
from exactly.spark.writer_hooks import load_hooks
from exactly.spark.writer_options import Guarantee, WriterOptions
from exactly.txn.placement import TWO_PHASE_ID_PREFIX

if TYPE_CHECKING:
    from exactly.client.twopc import TwoPhaseClient

log = logging.getLogger("exactly.spark.writer")

TRANSACTIONAL_ID_PREFIX = TWO_PHASE_ID_PREFIX  # its ids live with their query (txn/placement.py)
FLUSH_TIMEOUT = 120.0
TXN_TIMEOUT = 60.0
BATCH_JOB_ID = 0  # the batch id of a df.write job


class WriteFailedError(RuntimeError):
    """Records could not be delivered, or the broker refused a transaction step; the task fails."""


@dataclass(frozen=True, slots=True)
class ExactlyCommitMessage(WriterCommitMessage):
    """What one successful task attempt reports to the driver (pickled by Spark)."""

    query_id: str
    batch_id: int
    partition: int
    attempt: int
    transactional_id: str | None  # None: at-least-once, or no rows (nothing to commit)
    rows: int
    skipped: bool = False


@dataclass(frozen=True, slots=True)
class TaskIdentity:
    """Where a task attempt sits: (query, batch, partition, attempt)."""

    query_id: str
    batch_id: int
    partition: int
    attempt: int

    def transactional_id(self, held: set[str]) -> str:
        """The attempt's id from its query's pool, avoiding the ids in `held` (Prepared transactions)."""
        try:
            return choose_transactional_id(self.query_id, self.batch_id, self.partition, self.attempt, held)
        except PoolExhaustedError as e:
            raise WriteFailedError(f"exactly writer: {e}") from None


def task_identity(job_query_id: str | None) -> TaskIdentity:
    """The running task's identity from Spark's TaskContext local properties.

    Streaming tasks carry ``sql.streaming.queryId`` and ``streaming.sql.batchId``; a ``df.write`` job
    has neither, and uses the writer's job id with batch 0."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        raise WriteFailedError("exactly writer: write() must run inside a Spark task")
    query = ctx.getLocalProperty("sql.streaming.queryId") or job_query_id
    batch = ctx.getLocalProperty("streaming.sql.batchId")
    if query is None:
        raise WriteFailedError("exactly writer: no streaming query id in the task's local properties")
    return TaskIdentity(
        query_id=query,
        batch_id=int(batch) if batch is not None else BATCH_JOB_ID,
        partition=ctx.partitionId(),
        attempt=ctx.attemptNumber(),
    )


def _headers(value: Any) -> list[tuple[str, bytes | str | None]] | None:
    if value is None:
        return None
    return [(h["key"], h["value"]) for h in value if h is not None]


def kafka_records(batches: Iterator[Any], layout: ColumnLayout) -> Iterator[dict[str, Any]]:
    """confluent-kafka ``produce`` keyword arguments for every row of the Arrow record batches."""
    for batch in batches:
        if batch.num_rows == 0:
            continue
        names = batch.schema.names
        values = batch.column(names.index(layout.value)).to_pylist()
        optional: list[tuple[str, list[Any]]] = []
        for field, name in (
            ("key", layout.key),
            ("topic", layout.topic),
            ("partition", layout.partition),
            ("headers", layout.headers),
        ):
            if name is not None:
                column = batch.column(names.index(name)).to_pylist()
                optional.append((field, [_headers(h) for h in column] if field == "headers" else column))
        for row, value in enumerate(values):
            record: dict[str, Any] = {"value": value}
            for field, column in optional:
                if column[row] is not None:
                    record[field] = column[row]
            yield record


class _Delivery:
    """Counts delivery reports and keeps the first error."""

    def __init__(self) -> None:
        self.delivered = 0
        self.error: str | None = None

    def __call__(self, err: Any, msg: Any) -> None:
        if err is not None:
            if self.error is None:
                self.error = f"{msg.topic()}[{msg.partition()}]: {err.str()}"
        else:
            self.delivered += 1


class _TaskProducer:
    """One confluent-kafka producer for one task attempt (transactional or idempotent)."""

    def __init__(self, options: WriterOptions, transactional_id: str | None) -> None:
        from confluent_kafka import Producer

        self.delivery = _Delivery()
        config: dict[str, Any] = {
            "partitioner": "murmur2_random",  # the Java client's partitioner, as Spark's Kafka sink
            "linger.ms": "5",
            "client.id": "exactly-spark-writer",
            **options.client_config(),
            "enable.idempotence": "true",
            "on_delivery": self.delivery,
        }
        if transactional_id is not None:
            config["transactional.id"] = transactional_id
        self.producer = Producer(config)
        self.transactional = transactional_id is not None
        if self.transactional:
            self.producer.init_transactions(TXN_TIMEOUT)  # the caller begins the transaction

    def produce(self, record: dict[str, Any], default_topic: str | None) -> None:
        if "topic" not in record:
            if default_topic is None:
                raise WriteFailedError("exactly writer: a row has a null topic and no 'topic' option is set")
            record["topic"] = default_topic
        while True:
            try:
                self.producer.produce(**record)
                break
            except BufferError:
                self.producer.poll(0.05)
        self.producer.poll(0)

    def flush(self, rows: int) -> None:
        deadline = time.monotonic() + FLUSH_TIMEOUT
        while self.producer.flush(1.0) > 0:
            if self.delivery.error is not None or time.monotonic() > deadline:
                break
        if self.delivery.error is not None:
            raise WriteFailedError(f"exactly writer: delivery failed: {self.delivery.error}")
        if self.delivery.delivered != rows:
            raise WriteFailedError(
                f"exactly writer: {rows - self.delivery.delivered} of {rows} records not delivered "
                f"within {FLUSH_TIMEOUT:g} s"
            )

    def abort_quietly(self) -> None:
        if self.transactional:
            try:
                self.producer.abort_transaction(10.0)
            except Exception as e:  # noqa: BLE001 (best effort: the broker times the transaction out)
                log.info("exactly writer: abort after a failed task: %s", e)


class _WriterCore:
    """What the batch and the stream writer share: options, layout, the task side of the protocol."""

    def __init__(self, options: WriterOptions, layout: ColumnLayout, job_query_id: str | None) -> None:
        self.options = options
        self.layout = layout
        self.job_query_id = job_query_id

    def write(self, batches: Iterator[Any]) -> ExactlyCommitMessage:
        task = task_identity(self.job_query_id)
        if self.options.guarantee is Guarantee.EXACTLY_ONCE:
            message = self._write_prepared(batches, task)
        else:
            message = self._write_idempotent(batches, task)
        load_hooks(self.options.hooks).task_written(task.partition, task.attempt, message.rows)
        return message

    def _write_idempotent(self, batches: Iterator[Any], task: TaskIdentity) -> ExactlyCommitMessage:
        producer = _TaskProducer(self.options, None)
        rows = 0
        for record in kafka_records(batches, self.layout):
            producer.produce(record, self.options.topic)
            rows += 1
        producer.flush(rows)
        return ExactlyCommitMessage(
            task.query_id, task.batch_id, task.partition, task.attempt, None, rows, skipped=rows == 0
        )

    def _write_prepared(self, batches: Iterator[Any], task: TaskIdentity) -> ExactlyCommitMessage:
        from exactly.client.twopc import TwoPhaseClient

        with TwoPhaseClient(self.options.bootstrap_servers, config=self.options.client_config()) as client:
            return self._write_prepared_with(client, batches, task)

    def _write_prepared_with(
        self, client: TwoPhaseClient, batches: Iterator[Any], task: TaskIdentity
    ) -> ExactlyCommitMessage:
        from exactly.client.twopc import TwoPhaseCommitError
        from exactly.errors import ErrorCode

        producer: _TaskProducer | None = None
        transactional_id = ""
        producer_id, producer_epoch = -1, -1
        rows = 0
        try:
            for record in kafka_records(batches, self.layout):
                if producer is None:  # a task without rows opens no transaction
                    prepared, _ = client.list_prepared(task.query_id)
                    transactional_id = task.transactional_id({t.transactional_id for t in prepared})
                    producer = _TaskProducer(self.options, transactional_id)
                    # This instance's (producer id, epoch): an instance that took the id over since
                    # fences this one's AddPartitionsToTxn, so a task that gets to prepare names itself.
                    producer_id, producer_epoch = client.producer_of(transactional_id)
                    producer.producer.begin_transaction()
                producer.produce(record, self.options.topic)
                rows += 1
            if producer is None:
                return ExactlyCommitMessage(
                    task.query_id, task.batch_id, task.partition, task.attempt, None, 0, skipped=True
                )
            producer.flush(rows)
        except BaseException:
            if producer is not None:
                producer.abort_quietly()
            raise
        try:
            client.prepare(
                transactional_id, task.query_id, task.batch_id, task.partition, producer_id, producer_epoch
            )
        except TwoPhaseCommitError as e:
            if e.code is not ErrorCode.PRODUCER_FENCED:
                raise
            # The batch was decided before (Spark replays a batch whose commit log entry it lost): the
            # broker aborted this attempt's transaction, and the decided output stands.
            log.warning(
                "exactly writer: query %s batch %d partition %d is already decided; %d rows dropped",
                task.query_id,
                task.batch_id,
                task.partition,
                rows,
            )
            return ExactlyCommitMessage(
                task.query_id, task.batch_id, task.partition, task.attempt, None, rows, skipped=True
            )
        # The producer is dropped without commit or abort: the driver's decision ends the transaction.
        return ExactlyCommitMessage(
            task.query_id, task.batch_id, task.partition, task.attempt, transactional_id, rows
        )

    def commit(self, messages: Sequence[WriterCommitMessage | None], batch_id: int) -> None:
        """The driver's decision for one batch (idempotent: Spark may call it again after a restart)."""
        missing = [i for i, m in enumerate(messages) if m is None]
        if missing:
            raise WriteFailedError(
                f"exactly writer: batch {batch_id} has no commit message for partitions {missing}"
            )
        reports = [_as_commit_message(m) for m in messages]
        rows = sum(m.rows for m in reports if not m.skipped)
        if self.options.guarantee is Guarantee.AT_LEAST_ONCE:
            log.info("exactly writer: batch %d: %d rows delivered (at-least-once)", batch_id, rows)
            return
        query_id = _query_of(reports, self.job_query_id, batch_id)
        if query_id is None:
            log.info("exactly writer: batch %d had no tasks; nothing to decide", batch_id)
            return
        from exactly.client.twopc import TwoPhaseClient

        winners = [m.transactional_id for m in reports if m.transactional_id is not None]
        hooks = load_hooks(self.options.hooks)
        hooks.before_decision(query_id, batch_id)
        with TwoPhaseClient(self.options.bootstrap_servers, config=self.options.client_config()) as client:
            decision = client.commit_batch(query_id, batch_id, winners)
        log.info(
            "exactly writer: query %s batch %d committed: %d transactions, %d rows%s",
            query_id,
            batch_id,
            len(decision.winners),
            rows,
            " (already decided before: this is a replay)" if decision.already_decided else "",
        )
        hooks.after_decision(query_id, batch_id)

    def abort(self, messages: Sequence[WriterCommitMessage | None], batch_id: int) -> None:
        """Best effort: abort what the batch prepared (a no-op on the broker once the batch is decided)."""
        if self.options.guarantee is Guarantee.AT_LEAST_ONCE:
            log.info("exactly writer: batch %d aborted; delivered rows stay (at-least-once)", batch_id)
            return
        reports = [_as_commit_message(m) for m in messages if m is not None]
        query_id = _query_of(reports, self.job_query_id, batch_id) or _checkpoint_query_id(
            self.options.checkpoint_location
        )
        if query_id is None:
            # Nothing names the query; its next decision, an operator (`exactly txn`) or the broker's
            # safety timeout ends whatever the batch prepared.
            log.warning("exactly writer: batch %d aborted with no commit message; nothing to abort", batch_id)
            return
        from exactly.client.twopc import TwoPhaseClient

        with TwoPhaseClient(self.options.bootstrap_servers, config=self.options.client_config()) as client:
            decision = client.abort_batch(query_id, batch_id)
        if decision is not None:
            log.warning(
                "exactly writer: abort of query %s batch %d ignored: the batch was already committed",
                query_id,
                batch_id,
            )


def _checkpoint_query_id(location: str | None) -> str | None:
    """The streaming query id from ``<checkpointLocation>/metadata`` (``{"id": ...}``), when the
    checkpoint is on a file system this driver process can read directly; otherwise None."""
    if location is None:
        return None
    path = Path(location.removeprefix("file://").removeprefix("file:")) / "metadata"
    try:
        query_id = json.loads(path.read_text().splitlines()[0]).get("id")
    except (OSError, ValueError, IndexError, AttributeError):
        return None
    return query_id if isinstance(query_id, str) else None


def _as_commit_message(message: WriterCommitMessage | None) -> ExactlyCommitMessage:
    if not isinstance(message, ExactlyCommitMessage):
        raise WriteFailedError(f"exactly writer: unexpected commit message {message!r}")
    return message


def _query_of(reports: Sequence[ExactlyCommitMessage], fallback: str | None, batch_id: int) -> str | None:
    queries = {m.query_id for m in reports}
    batches = {m.batch_id for m in reports}
    if len(queries) > 1 or (batches and batches != {batch_id}):
        raise WriteFailedError(
            f"exactly writer: commit messages of batch {batch_id} name queries {sorted(queries)} "
            f"and batches {sorted(batches)}"
        )
    return next(iter(queries)) if queries else fallback


class ExactlyBatchWriter(DataSourceArrowWriter):
    """``df.write.format("exactly")``: one atomic job (exactly-once) or idempotent tasks."""

    def __init__(self, options: WriterOptions, layout: ColumnLayout) -> None:
        self.core = _WriterCore(options, layout, job_query_id=f"job-{uuid.uuid4().hex}")

    def write(self, iterator: Iterator[Any]) -> ExactlyCommitMessage:
        return self.core.write(iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        self.core.commit(messages, BATCH_JOB_ID)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        self.core.abort(messages, BATCH_JOB_ID)


class ExactlyStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("exactly")``: one decision per micro-batch."""

    def __init__(self, options: WriterOptions, layout: ColumnLayout) -> None:
        self.core = _WriterCore(options, layout, job_query_id=None)

    def write(self, iterator: Iterator[Any]) -> ExactlyCommitMessage:
        return self.core.write(iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        self.core.commit(messages, batchId)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        self.core.abort(messages, batchId)
