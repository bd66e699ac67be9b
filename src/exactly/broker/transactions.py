"""The asyncio side of the transaction coordinator: append its records, write the markers, run its timers.

`exactly.txn.TransactionCoordinator` is synchronous and touches no file; this module drives it:

* `run(op)` runs one coordinator operation. When it prepared a transition, the transition's record is
  appended to the transactional.id's partition of `__transaction_state` and made durable (fsync, shared
  with concurrent appends by the broker's `Flusher`) before `complete_transition` applies it and before
  the client is answered (ARCHITECTURE invariant 2: prepare -> append -> apply). Meanwhile the id is
  pending and other requests for it answer CONCURRENT_TRANSACTIONS.
* Applying PrepareCommit/PrepareAbort returns a `MarkerJob`; a task writes the COMMIT/ABORT marker to
  every partition of the transaction through `write_marker` — the same code the WriteTxnMarkers API
  runs, so a multi-broker cluster only changes the transport — waits until the markers are durable,
  then records CompleteCommit/CompleteAbort. Failed writes are retried with backoff until they succeed;
  a partition whose topic was deleted is skipped. Markers on a `__consumer_offsets` partition also
  materialise (or drop) the transaction's pending offsets in the group coordinator.
* EndTxn is answered once PrepareX is durable (Kafka's order); the markers follow within milliseconds.
* At start-up `load()` replays `__transaction_state` before the broker listens and restarts the marker
  jobs of every transaction whose decision is recorded (PrepareX), so a crash between PrepareCommit and
  CompleteCommit finishes the commit.
* Timers: `transaction.abort.timed.out.transaction.cleanup.interval.ms` fences and aborts transactions
  older than their timeout; `transaction.remove.expired.transaction.cleanup.interval.ms` expires idle ids.
* KIP-890 part 1: `verification_guard` gives partition logs the check that a producer's first
  transactional batch on a partition belongs to its ongoing transaction.
* KIP-890 part 2 (transaction version 2): `append_guard(..., add=True)` first adds the partition to the
  producer's transaction (Produce v12, TxnOffsetCommit v5: no AddPartitionsToTxn/AddOffsetsToTxn round
  trip from the client) — here when this broker coordinates the id, else through the coordinator
  (AddPartitionsToTxn v5 without VerifyOnly) — then checks it like part 1. `__transaction_state` values
  are written as v1 (tagged fields) while the finalized `transaction.version` is 1 or more, v0 at 0.
* Two-phase commit extension (docs/two-phase-commit.md): `prepare` runs PrepareTxn like any request of
  the id; `commit_batch` appends the batch's decision record to the query id's partition (fsync) before
  anything moves, then appends the transitions that carry it out (PrepareCommit for winners, PrepareAbort
  for the rest) and answers once those are durable; `abort_batch` appends PrepareAbort for undecided
  prepared work. Batch requests of one query run one at a time. At start-up, after loading, the
  transitions a crash left owed to a recorded decision are appended (`redrive_all`), and the timeout
  scan does the same each round (so a failed append is retried) and aborts Prepared transactions older
  than transaction.prepared.max.age.ms.
* Testing hooks: `exactly.debug.end.txn.pause` parks every marker job at one step (after PrepareX is
  durable, after the first marker, after all markers; `decision-written`: a CommitBatch after its
  decision record is durable, before any transaction moves) so a test can kill -9 the broker there;
  `exactly.debug.marker.delay.ms` delays every marker job (markers slowed down as by a loaded machine).
* DEBUG logging traces every request of a transactional id: the coordinator's answer, the id's state
  and pending transition, and every applied transition.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from exactly.broker.config import BrokerConfig
from exactly.broker.coordinator_runtime import CoordinatorRuntime
from exactly.broker.marker_channel import Codes, MarkerChannel, Markers
from exactly.broker.replica_manager import DurableTarget, ReplicaManager
from exactly.broker.scheduler import Scheduler
from exactly.broker.topic_manager import TopicManager
from exactly.broker.txn_verifier import TransactionVerifier
from exactly.clock import Clock
from exactly.errors import CorruptRecordError, ErrorCode, KafkaError
from exactly.records.batch import ATTR_CONTROL, RecordBatch
from exactly.records.builder import BatchBuilder
from exactly.records.control import ControlRecordType, EndTxnMarker
from exactly.replication.partition import AppendResult, Partition
from exactly.storage.log import VerificationGuard
from exactly.txn import MarkerJob, TransactionCoordinator, TxnConfig, TxnResult, TxnState
from exactly.txn.coordinator import TV2, BatchResult
from exactly.txn.decisions import (
    DECISION_KEY_VERSION,
    BatchDecisionRecord,
    decode_decision_key,
    decode_decision_value_or_tombstone,
    encode_decision_key,
    encode_decision_value,
)
from exactly.txn.markers import MarkerOutcome, TopicPartition, marker_outcome
from exactly.txn.records import decode_key, decode_value, encode_key, encode_value, key_version

__all__ = ["TRANSACTION_TOPIC", "TransactionService"]

log = logging.getLogger(__name__)

T = TypeVar("T")

TRANSACTION_TOPIC = "__transaction_state"
_RETRY_BACKOFF_S = (0.01, 0.05, 0.1, 0.5, 1.0)
_CONCURRENT_WAIT_S = 1.0
_MARKER_REPLICATION_TIMEOUT_S = 30.0  # a marker's acks=all wait (Kafka: the request timeout)

# Produce and TxnOffsetCommit see these codes when verification fails (Kafka's
# AddPartitionsToTxnManager: PRODUCER_FENCED -> INVALID_PRODUCER_EPOCH; the rest unchanged).
_VERIFY_ERRORS = {ErrorCode.PRODUCER_FENCED: ErrorCode.INVALID_PRODUCER_EPOCH}
# The implicit add's retriable refusals, as Kafka's ReplicaManager answers them to the producer: a code the
# producer retries without a metadata refresh.
_ADD_ERRORS = {
    ErrorCode.PRODUCER_FENCED: ErrorCode.INVALID_PRODUCER_EPOCH,
    ErrorCode.CONCURRENT_TRANSACTIONS: ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.NOT_COORDINATOR: ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE: ErrorCode.NOT_ENOUGH_REPLICAS,
}


@dataclass(slots=True)
class _Turn:
    lock: asyncio.Lock
    users: int = 0


class _TurnOf:
    """`async with` the turn of one key: waits for the key's earlier requests (FIFO), and forgets the key
    when its last user leaves. A plain class: every coordinator request enters one, and a generator-based
    context manager cost more than the uncontended lock."""

    __slots__ = ("_key", "_turn", "_turns")

    def __init__(self, key: str, turns: dict[str, _Turn]) -> None:
        turn = turns.get(key)
        if turn is None:
            turn = turns[key] = _Turn(asyncio.Lock())
        turn.users += 1
        self._key = key
        self._turn = turn
        self._turns = turns

    async def __aenter__(self) -> None:
        try:
            await self._turn.lock.acquire()
        except BaseException:
            self._leave()
            raise

    async def __aexit__(self, *exc: object) -> None:
        self._turn.lock.release()
        self._leave()

    def _leave(self) -> None:
        turn = self._turn
        turn.users -= 1
        if not turn.users:
            del self._turns[self._key]


class TransactionService:
    """Built from what it uses: the broker's configs (a value), the replica manager and topic manager
    (through its `CoordinatorRuntime`, and for markers), the clock, the scheduler and the producer-id
    source. (The group coordinator hears of markers on `__consumer_offsets` from the replica manager.)"""

    def __init__(
        self,
        config: BrokerConfig,
        replicas: ReplicaManager,
        topics: TopicManager,
        clock: Clock,
        scheduler: Scheduler,
        next_producer_id: Callable[[], int],
    ) -> None:
        self._config = config
        self._replicas = replicas
        self._topics = topics
        self._clock = clock
        self._scheduler = scheduler
        partitions = topics.partitions(TRANSACTION_TOPIC) or config.transaction_state_log_num_partitions
        self.coordinator = TransactionCoordinator(
            TxnConfig(
                num_partitions=partitions,
                max_timeout_ms=config.transaction_max_timeout_ms,
                id_expiration_ms=config.transactional_id_expiration_ms,
                prepared_max_age_ms=config.transaction_prepared_max_age_ms,
                decisions_retained_batches=config.transaction_two_phase_decisions_retained_batches,
            ),
            next_producer_id,
            clock.milliseconds,
        )
        self.runtime = CoordinatorRuntime(
            TRANSACTION_TOPIC,
            partitions,
            config.transaction_state_log_segment_bytes,
            replicas,
            topics,
            self._load_partition,
            self._unload_partition,
            replication_factor=config.transaction_state_log_replication_factor,
            min_isr=config.transaction_state_log_min_isr,
        )
        replicas.leadership_listeners.append(self._leadership_changed)
        replicas.marker_listeners.append(self._marker_appended)
        self.markers = MarkerChannel(config.node_id, self._write_own_markers)
        self.verifier: TransactionVerifier | None = None  # in a cluster (set by the broker)
        self._verified: dict[tuple[str, int, int], int] = {}  # (topic, partition, pid) -> verified epoch
        self._tasks: set[asyncio.Task[Any]] = set()  # marker jobs, background and shielded commits
        self._marker_tasks: dict[int, set[asyncio.Task[None]]] = {}  # partition -> its marker jobs
        self._transitions: dict[str, asyncio.Future[None]] = {}  # id -> resolved at its next transition
        self._turns: dict[str, _Turn] = {}  # id -> its requests, one at a time
        self._query_turns: dict[str, _Turn] = {}  # query id -> its batch requests, one at a time
        self.loaded_records = 0
        # since start: transactions whose markers were all written, by outcome; markers appended here
        self.commits = 0
        self.aborts = 0
        self.markers_written = 0

    # --- lifecycle ---------------------------------------------------------------------------------------

    def load(self) -> None:
        """Replay every partition of `__transaction_state` (start-up, before the broker listens)."""
        count, seconds = self.runtime.load_all()
        self.loaded_records = count
        log.info(
            "loaded %d transactional ids (%d records) from %s in %.3f s",
            len(self.coordinator.transactions),
            count,
            TRANSACTION_TOPIC,
            seconds,
        )

    def _load_partition(self, partition: int, batches: Iterator[RecordBatch]) -> int:
        self._unload_partition(partition)  # whatever an earlier term left (Kafka clears the cache first)
        if self._replicas.cluster:
            found = self._replicas.partition(TRANSACTION_TOPIC, partition)
            if found is not None:  # the coordinator epoch is the partition's leader epoch
                self.coordinator.coordinator_epochs[partition] = found.leader_epoch
        count = 0
        for batch in batches:
            if batch.header().attributes & ATTR_CONTROL:
                continue
            for record in batch.records():
                try:
                    if record.key is None:
                        raise CorruptRecordError("record without a key")
                    if key_version(record.key) == DECISION_KEY_VERSION:
                        query_id, batch_id = decode_decision_key(record.key)
                        decision = decode_decision_value_or_tombstone(query_id, batch_id, record.value)
                        if decision is None:  # a pruned decision
                            self.coordinator.load_decision_tombstone(query_id, batch_id)
                        else:
                            self.coordinator.load_decision(decision)
                    else:
                        self.coordinator.load_record(decode_key(record.key), decode_value(record.value))
                except CorruptRecordError as e:
                    log.error("skipping %s record at offset %d: %s", TRANSACTION_TOPIC, record.offset, e)
                    continue
                count += 1
        return count

    def _unload_partition(self, partition: int) -> None:
        """The partition is no longer ours (or is being reloaded): its ids go, its marker jobs stop."""
        for task in self._marker_tasks.pop(partition, set()):
            task.cancel()
        self.coordinator.unload_partition(partition)

    def _leadership_changed(self, partition: Partition) -> None:
        """A `__transaction_state` partition became ours (load it, then resume the marker jobs of its
        PrepareCommit/PrepareAbort transactions with the new coordinator epoch) or another's (resign:
        its ids answer NOT_COORDINATOR at once, its marker jobs stop). Loading is synchronous (nothing
        else runs on the event loop meanwhile), so no request sees a half-loaded partition."""
        self.runtime.leadership_changed(partition)
        if partition.topic != TRANSACTION_TOPIC or not partition.is_leader:
            return
        for job in self.coordinator.pending_marker_jobs(partition.index):
            log.info(
                "%s-%d: resuming %s markers of transactional id %r (producer %d, coordinator epoch %d)",
                TRANSACTION_TOPIC,
                partition.index,
                "COMMIT" if job.commit else "ABORT",
                job.transactional_id,
                job.producer_id,
                job.coordinator_epoch,
            )
            self._start_markers(job)
        for result in self.coordinator.redrive_all():  # decisions recorded before the failover
            log.info(
                "%s-%d: re-driving the batch decision of %r",
                TRANSACTION_TOPIC,
                partition.index,
                result.transactional_id,
            )
            self._background(result)

    def start(self) -> None:
        """Load, resume the marker jobs of decided transactions, start the timers."""
        self.load()
        for job in self.coordinator.pending_marker_jobs():
            log.info(
                "resuming %s markers of transactional id %r (producer %d)",
                "COMMIT" if job.commit else "ABORT",
                job.transactional_id,
                job.producer_id,
            )
            self._start_markers(job)
        for result in self.coordinator.redrive_all():
            log.info(
                "re-driving the batch decision of %r: %s",
                result.transactional_id,
                result.transit.state.kafka_name if result.transit is not None else "-",
            )
            self._background(result)
        config = self._config
        every = self._scheduler.every
        every(config.transaction_abort_timed_out_transaction_cleanup_interval_ms, self.abort_timed_out)
        every(config.transaction_remove_expired_transaction_cleanup_interval_ms, self.expire_ids)

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.markers.stop()
        if self.verifier is not None:
            self.verifier.stop()

    def partition_for(self, key: str) -> int:
        """The partition of the internal topic whose leader coordinates `key`."""
        return self.coordinator.partition_for(key)

    async def ensure_topic(self) -> None:
        """Create `__transaction_state` on first use (compacted, one partition per coordinator shard)."""
        await self.runtime.ensure_topic()

    # --- running operations ------------------------------------------------------------------------------

    async def run(
        self,
        transactional_id: str,
        op: Callable[[TransactionCoordinator], TxnResult],
        what: str = "",
        *,
        answered_first: bool = False,
    ) -> TxnResult:
        """Run an operation on `transactional_id`; its transition (if any) is durable and applied before
        this returns. `answered_first`: the markers the transition starts may wait until the request is
        answered before their append and fsync (EndTxn: it answers once PrepareX is durable, without waiting
        for them; `write_markers`' `behind_answer`). Not for a request that waits for them.

        The requests of one transactional.id run one at a time, in arrival order (across connections
        too), as Kafka's one-request-at-a-time connections and its per-id lock make them: a client may
        pipeline EndTxn behind the AddPartitionsToTxn it sent for the same transaction (librdkafka's
        abort does, issue 10), and that EndTxn must see the transaction the AddPartitions opened.

        CONCURRENT_TRANSACTIONS (a transition of the id is being appended, or its markers are being
        written) is not answered at once: the request waits up to `_CONCURRENT_WAIT_S` for the id's
        next transition and runs again. Clients would retry anyway, after a backoff (librdkafka's
        retry.backoff.ms, 100 ms) that would otherwise stall every transaction that starts right after
        a commit while its markers are written.
        """
        async with self._turn(transactional_id):
            if not self.runtime.coordinates(self.coordinator.partition_for(transactional_id)):
                return TxnResult(transactional_id, ErrorCode.NOT_COORDINATOR)
            await self.ensure_topic()
            loop = asyncio.get_running_loop()
            deadline = loop.time() + _CONCURRENT_WAIT_S
            while True:
                result = op(self.coordinator)
                if log.isEnabledFor(logging.DEBUG):
                    self._trace(what, result)
                if result.transit is not None:
                    # Shielded: the record is appended, so it is applied (or its failure undone) even
                    # when the requester disconnects and its request is cancelled; else the id would
                    # stay pending.
                    committing = self._commit(result, answered_first=answered_first)
                    error = await asyncio.shield(self._spawn(committing))
                    if error:
                        return TxnResult(result.transactional_id, error)
                if result.error != ErrorCode.CONCURRENT_TRANSACTIONS or loop.time() >= deadline:
                    return result
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout_at(deadline):
                        await self._next_transition(result.transactional_id)

    def _turn(self, key: str, turns: dict[str, _Turn] | None = None) -> _TurnOf:
        """Wait for the key's (an id's, or in `turns` a query's) earlier requests to finish (FIFO; no
        wait, so no reordering, when idle)."""
        return _TurnOf(key, self._turns if turns is None else turns)

    def _trace(self, what: str, result: TxnResult) -> None:
        txn = self.coordinator.transactions.get(result.transactional_id)
        log.debug(
            "%s of %r: %s%s (state %s, pending %s)",
            what or "operation",
            result.transactional_id,
            result.error.name,
            f" -> {result.transit.state.kafka_name}" if result.transit is not None else "",
            txn.state.kafka_name if txn is not None else "-",
            txn.pending_state.kafka_name if txn is not None and txn.pending_state is not None else "-",
        )

    async def _next_transition(self, transactional_id: str) -> None:
        waiter = self._transitions.get(transactional_id)
        if waiter is None or waiter.done():
            waiter = asyncio.get_running_loop().create_future()
            self._transitions[transactional_id] = waiter
        await asyncio.shield(waiter)

    def _transitioned(self, transactional_id: str) -> None:
        waiter = self._transitions.pop(transactional_id, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def _commit(
        self, result: TxnResult, *, wait_durable: bool = True, answered_first: bool = False
    ) -> ErrorCode:
        """Append `result`'s transition, wait until it is durable, apply it (and start its markers).

        `wait_durable=False` applies it as soon as it is appended: only for CompleteCommit/CompleteAbort,
        whose loss in a crash is harmless (the PrepareX before it makes the coordinator rewrite the
        markers), and which anything that depends on it follows in the same log, so a later record's
        fsync makes it durable first.
        """
        transit = result.transit
        assert transit is not None
        txn_id = result.transactional_id
        log_version = 1 if self._config.transaction_version >= 1 else 0
        value = None if transit.state is TxnState.DEAD else encode_value(transit.to_value(), log_version)
        builder = BatchBuilder()
        builder.append(self._clock.milliseconds(), encode_key(txn_id), value)
        partition = self.coordinator.partition_for(txn_id)
        epoch = self.coordinator.coordinator_epoch(partition)
        try:
            await self.runtime.write(
                partition, builder.build(), f"transactional id {txn_id!r}", wait_durable=wait_durable
            )
        except KafkaError as e:
            self.coordinator.abort_transition(txn_id)
            self._transitioned(txn_id)
            return e.code
        if (
            txn_id not in self.coordinator.transactions
            or not self.runtime.is_leader(partition)
            or self.coordinator.coordinator_epoch(partition) != epoch
        ):
            self._transitioned(txn_id)  # resigned while the record was appended: the new leader has it
            return ErrorCode.NOT_COORDINATOR
        job = self.coordinator.complete_transition(txn_id, transit)
        log.debug("%r is %s (epoch %d)", txn_id, transit.state.kafka_name, transit.producer_epoch)
        self._transitioned(txn_id)
        if job is not None:
            self._start_markers(job, answered_first=answered_first)
        return ErrorCode.NONE

    # --- markers -----------------------------------------------------------------------------------------

    def write_marker(
        self,
        topic: str,
        partition: int,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
    ) -> AppendResult:
        """Append one COMMIT/ABORT marker (the WriteTxnMarkers path); raises KafkaError."""
        marker = EndTxnMarker(
            ControlRecordType.COMMIT if commit else ControlRecordType.ABORT, coordinator_epoch
        )
        return self._replicas.append_end_txn_marker(topic, partition, producer_id, producer_epoch, marker)

    async def _write_own_markers(
        self, markers: Markers, partitions: Sequence[TopicPartition], *, behind_answer: bool = False
    ) -> Codes:
        """The coordinator's markers to partitions this broker leads. `behind_answer`: they start while
        the EndTxn that decided them is being answered; their fsync lets that answer go out first (one
        fsync less in every EndTxn)."""
        return await self.write_markers(markers, partitions, behind_answer=behind_answer)

    async def write_markers(
        self, markers: Markers, partitions: Sequence[TopicPartition], *, behind_answer: bool = False
    ) -> Codes:
        """Append the markers to partitions this broker leads, then wait until they are durable here and
        committed in their ISR (acks=all): each partition's code. The one path of every marker: the
        coordinator's own, and the WriteTxnMarkers API's. `behind_answer`: they start while an answer is
        being written; they are appended and flushed after it when it is all the loop has
        (`Flusher.answer_written`)."""
        if behind_answer:  # appended after the answer too (when nothing else is handled): not before it
            await self._replicas.flusher.answer_written()
        codes: Codes = {}
        durable: list[tuple[TopicPartition, DurableTarget]] = []
        replicated: list[tuple[TopicPartition, DurableTarget]] = []
        for topic, index in partitions:
            try:
                written = self.write_marker(
                    topic,
                    index,
                    markers.producer_id,
                    markers.producer_epoch,
                    markers.commit,
                    markers.coordinator_epoch,
                )
            except KafkaError as e:
                codes[(topic, index)] = e.code
                continue
            codes[(topic, index)] = ErrorCode.NONE
            self.markers_written += 1
            if written.durable_offset is not None:
                durable.append(((topic, index), (written.partition, written.durable_offset)))
            if written.partition.replicated:
                replicated.append(((topic, index), (written.partition, written.info.last_offset + 1)))
        if durable:
            failures = await self._replicas.wait_durable_each([target for _, target in durable])
            for (key, _), failure in zip(durable, failures, strict=True):
                if failure is not None:
                    codes[key] = failure.code
        replicated = [(key, target) for key, target in replicated if codes[key] == ErrorCode.NONE]
        if replicated:
            outcomes = await self._replicas.wait_replicated(
                [target for _, target in replicated], _MARKER_REPLICATION_TIMEOUT_S
            )
            for (key, _), code in zip(replicated, outcomes, strict=True):
                codes[key] = code
        return codes

    def _start_markers(self, job: MarkerJob, *, answered_first: bool = False) -> None:
        partition = self.coordinator.partition_for(job.transactional_id)
        task = self._spawn(self._write_markers(job, answered_first=answered_first))
        tasks = self._marker_tasks.setdefault(partition, set())
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    def _spawn(self, work: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        """A task the service owns (cancelled at stop), not the request that started it."""
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _coordinating(self, job: MarkerJob) -> bool:
        """This broker still coordinates the job's transactional id in the job's coordinator epoch."""
        partition = self.coordinator.partition_for(job.transactional_id)
        return (
            self.runtime.is_leader(partition)
            and self.coordinator.coordinator_epoch(partition) == job.coordinator_epoch
        )

    async def _write_markers(self, job: MarkerJob, *, answered_first: bool = False) -> None:
        """`answered_first`: the request that decided them is answered without waiting for them, so the
        first attempt's fsync may wait for that answer (later attempts do not: a request waiting for
        these markers may be all the broker handles by then)."""
        await self._debug_pause("prepare-written", job)
        if self._config.debug_marker_delay_ms:
            await asyncio.sleep(self._config.debug_marker_delay_ms / 1000)
        markers = Markers(job.producer_id, job.producer_epoch, job.commit, job.coordinator_epoch)
        remaining = sorted(job.partitions)
        attempt = 0
        first = True
        behind = answered_first
        while remaining:
            if not self._coordinating(job):
                log.info("no longer the coordinator of %r: its markers stop", job.transactional_id)
                return
            sending = remaining
            if first and self._config.debug_end_txn_pause == "first-marker-written":
                sending = remaining[:1]  # one marker, then park (the others are never written)
            codes = await self.markers.send(markers, sending, behind_answer=behind)
            behind = False
            retry: list[TopicPartition] = []
            for (topic, partition), code in sorted(codes.items()):
                outcome = marker_outcome(code)
                if outcome is MarkerOutcome.WRITTEN:
                    continue
                if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and not self._topic_exists(topic):
                    log.warning("skipping marker for %s-%d: the topic no longer exists", topic, partition)
                elif outcome is MarkerOutcome.DROP:
                    log.error(
                        "dropping marker for %s-%d of %r: %s",
                        topic,
                        partition,
                        job.transactional_id,
                        code.name,
                    )
                else:
                    log.log(
                        logging.INFO if attempt < 3 else logging.WARNING,
                        "marker for %s-%d of %r failed (%s), will retry",
                        topic,
                        partition,
                        job.transactional_id,
                        code.name,
                    )
                    retry.append((topic, partition))
            if first and len(retry) < len(sending):
                first = False
                await self._debug_pause("first-marker-written", job)
            remaining = retry + [tp for tp in remaining if tp not in codes]
            if remaining:
                await asyncio.sleep(_RETRY_BACKOFF_S[min(attempt, len(_RETRY_BACKOFF_S) - 1)])
                attempt += 1
        if job.commit:
            self.commits += 1
        else:
            self.aborts += 1
        await self._debug_pause("markers-written", job)
        attempt = 0
        while self._coordinating(job):
            result = self.coordinator.complete_markers(job)
            if result is None:
                return
            if not await self._commit(result, wait_durable=False):
                return
            await asyncio.sleep(_RETRY_BACKOFF_S[min(attempt, len(_RETRY_BACKOFF_S) - 1)])
            attempt += 1

    def _topic_exists(self, topic: str) -> bool:
        return bool(self._topics.partitions(topic))

    async def _debug_pause(self, step: str, job: MarkerJob) -> None:
        if self._config.debug_end_txn_pause != step:
            return
        log.warning("exactly.debug.end.txn.pause: marker job of %r parked at %s", job.transactional_id, step)
        await asyncio.Event().wait()  # until the process is killed or stopped

    # --- KIP-890 part 1 ----------------------------------------------------------------------------------

    def verification_guard(
        self, transactional_id: str, topic: str, partition: int, *, transaction_abortable: bool = False
    ) -> VerificationGuard | None:
        """The check a partition runs before a producer's first transactional batch on it.

        In a cluster only when this broker coordinates the transactional id (None otherwise: the
        append asks the coordinator with `verify_remotely` and runs `remote_guard`: see `append_guard`).

        `transaction_abortable`: the request version knows TRANSACTION_ABORTABLE (Produce v11+), which
        then replaces INVALID_TXN_STATE for a partition that is not in the transaction (Kafka's
        coordinator answers TRANSACTION_ABORTABLE and older versions see INVALID_TXN_STATE)."""

        def guard(producer_id: int, producer_epoch: int, base_sequence: int) -> None:
            code = self.coordinator.verify(transactional_id, producer_id, producer_epoch, topic, partition)
            if code:
                if transaction_abortable and code == ErrorCode.INVALID_TXN_STATE:
                    code = ErrorCode.TRANSACTION_ABORTABLE
                raise KafkaError(
                    _VERIFY_ERRORS.get(code, code),
                    f"producer {producer_id} epoch {producer_epoch} of transactional id {transactional_id!r} "
                    f"may not write to {topic}-{partition} transactionally: {code.name}",
                )

        if self._replicas.cluster and not self.runtime.is_leader(self.partition_for(transactional_id)):
            return None
        return guard

    def verifies_remotely(self, transactional_id: str) -> bool:
        """In a cluster, another broker coordinates the id: verification is `verify_remotely`'s."""
        return self.verifier is not None and not self.runtime.is_leader(self.partition_for(transactional_id))

    async def verify_remotely(
        self,
        transactional_id: str,
        topic: str,
        partition: int,
        producer_id: int,
        producer_epoch: int,
        *,
        transaction_abortable: bool = False,
        add: bool = False,
    ) -> ErrorCode:
        """Ask the id's coordinator (exactly.broker.txn_verifier) before the producer's first transactional
        batch on this partition (`add`: to add the partition to the transaction); a verified producer is
        remembered until its next marker here."""
        assert self.verifier is not None
        found = self._replicas.partition(topic, partition)
        entry = None if found is None else found.log.producer_state.last_entry(producer_id)
        if (
            entry is not None
            and entry.current_txn_first_offset is not None
            and entry.producer_epoch == producer_epoch
        ):
            return ErrorCode.NONE  # already in its transaction here: the append checks nothing
        code = await self.verifier.verify(
            transactional_id, producer_id, producer_epoch, topic, partition, add=add
        )
        if code == ErrorCode.NONE:
            self._verified[(topic, partition, producer_id)] = producer_epoch
            return code
        if add:
            return _ADD_ERRORS.get(code, code)
        if transaction_abortable and code == ErrorCode.INVALID_TXN_STATE:
            code = ErrorCode.TRANSACTION_ABORTABLE
        return _VERIFY_ERRORS.get(code, code)

    async def append_guard(
        self,
        transactional_id: str,
        topic: str,
        partition: int,
        producer_id: int,
        producer_epoch: int,
        *,
        transaction_abortable: bool = False,
        add: bool = False,
    ) -> VerificationGuard | None:
        """The check of a producer's first transactional append to a partition (Produce, TxnOffsetCommit):
        `verification_guard` when this broker coordinates the id; otherwise the coordinator is asked first
        (`verify_remotely`; KafkaError with its answer when it refuses) and the append runs `remote_guard`.

        `add` (Produce v12+, TxnOffsetCommit v5+: a transaction version 2 client): the partition is added
        to the producer's transaction first (durably), then checked the same way."""
        if not self.verifies_remotely(transactional_id):
            if add:
                await self._add_implicitly(transactional_id, topic, partition, producer_id, producer_epoch)
            return self.verification_guard(
                transactional_id, topic, partition, transaction_abortable=transaction_abortable
            )
        code = await self.verify_remotely(
            transactional_id,
            topic,
            partition,
            producer_id,
            producer_epoch,
            transaction_abortable=transaction_abortable,
            add=add,
        )
        if code:
            raise KafkaError(
                code,
                f"the coordinator of {transactional_id!r} refused producer {producer_id} epoch "
                f"{producer_epoch} on {topic}-{partition}: {code.name}",
            )
        return self.remote_guard(topic, partition)

    async def _add_implicitly(
        self, transactional_id: str, topic: str, partition: int, producer_id: int, producer_epoch: int
    ) -> None:
        """Add the partition to the producer's transaction here (this broker coordinates the id); raises
        KafkaError with the code the producer sees when the coordinator refuses."""
        found = self._replicas.partition(topic, partition)
        entry = None if found is None else found.log.producer_state.last_entry(producer_id)
        if (
            entry is not None
            and entry.current_txn_first_offset is not None
            and entry.producer_epoch == producer_epoch
        ):
            return  # already in its transaction here (its marker would have ended it)
        result = await self.run(
            transactional_id,
            lambda c: c.add_partitions(
                transactional_id, producer_id, producer_epoch, [(topic, partition)], transaction_version=TV2
            ),
            "implicit AddPartitionsToTxn",
        )
        if result.error:
            code = _ADD_ERRORS.get(result.error, result.error)
            raise KafkaError(
                code,
                f"producer {producer_id} epoch {producer_epoch} of transactional id {transactional_id!r} "
                f"cannot add {topic}-{partition} to its transaction: {result.error.name}",
            )

    def remote_guard(self, topic: str, partition: int) -> VerificationGuard:
        """The append's check after `verify_remotely`: the verification still holds (no marker came)."""

        def guard(producer_id: int, producer_epoch: int, base_sequence: int) -> None:
            if self._verified.pop((topic, partition, producer_id), None) != producer_epoch:
                raise KafkaError(
                    ErrorCode.NOT_ENOUGH_REPLICAS,
                    f"the transaction of producer {producer_id} on {topic}-{partition} ended while it was "
                    "verified: send again",
                )

        return guard

    def _marker_appended(self, partition: Partition, producer_id: int, committed: bool) -> None:
        if self._verified:
            self._verified.pop((partition.topic, partition.index, producer_id), None)

    def is_prepared(self, transactional_id: str) -> bool:
        """The id's transaction is Prepared (or being prepared): Produce may add nothing to it. (KIP-890's
        guard only checks a producer's first batch on a partition.)"""
        txn = self.coordinator.transactions.get(transactional_id)
        return txn is not None and TxnState.PREPARED in (txn.state, txn.pending_state)

    # --- timers ------------------------------------------------------------------------------------------

    def abort_timed_out(self) -> None:
        """Fence and abort every transaction older than its timeout (and bump its epoch); Prepared ones
        older than transaction.prepared.max.age.ms; and carry out decisions still owed (a failed append)."""
        for result in self.coordinator.redrive_all():
            log.info("re-driving the batch decision of %r", result.transactional_id)
            self._background(result)
        for result in self.coordinator.abort_timed_out():
            log.info(
                "aborting transaction of %r: older than its timeout; producer %d fenced at epoch %d",
                result.transactional_id,
                result.producer_id,
                result.producer_epoch,
            )
            self._background(result)

    def expire_ids(self) -> None:
        for result in self.coordinator.expire():
            log.info("transactional id %r expired", result.transactional_id)
            self._background(result)

    def _background(self, result: TxnResult) -> None:
        self._spawn(self._commit_logged(result))

    async def _commit_logged(self, result: TxnResult) -> None:
        error = await self._commit(result)
        if error:
            log.warning(
                "transition of %r failed (%s); will retry at the next scan",
                result.transactional_id,
                error.name,
            )

    # --- two-phase commit extension ----------------------------------------------------------------------

    async def prepare(
        self,
        transactional_id: str,
        query_id: str,
        batch_id: int,
        partition: int,
        producer_id: int = -1,
        producer_epoch: int = -1,
    ) -> TxnResult:
        """PrepareTxn: Ongoing -> Prepared, durable before this returns."""
        result = await self.run(
            transactional_id,
            lambda c: c.prepare(transactional_id, query_id, batch_id, partition, producer_id, producer_epoch),
            f"PrepareTxn ({query_id!r}, {batch_id}, {partition})",
        )
        if result.error == ErrorCode.NONE:
            # Prepared while its batch was being decided: the decision applies to it at once.
            owed = self.coordinator.settle(transactional_id)
            if owed is not None:
                self._background(owed)
        return result

    async def commit_batch(self, query_id: str, batch_id: int, winners: list[str]) -> BatchResult:
        """CommitBatch: the decision is durable, and so are its transitions, before this returns."""
        async with self._turn(query_id, self._query_turns):
            if not self.runtime.coordinates(self.coordinator.partition_for(query_id)):
                return BatchResult(query_id, batch_id, ErrorCode.NOT_COORDINATOR, "not this broker's query")
            await self.ensure_topic()
            result = self.coordinator.commit_batch(query_id, batch_id, winners)
            log.debug("CommitBatch (%r, %d): %s", query_id, batch_id, result)
            if result.record:
                assert result.decision is not None
                record = self._record_decision(result.decision, result.pruned)
                error = await asyncio.shield(self._spawn(record))
                if error:
                    return BatchResult(query_id, batch_id, error, "cannot record the decision")
            elif result.already_decided:
                await self._carry_out(self.coordinator.redrive(query_id))
            return result

    async def _record_decision(self, decision: BatchDecisionRecord, pruned: Sequence[int] = ()) -> ErrorCode:
        """Append the decision and, in the same record batch, the tombstones of the decisions it prunes."""
        query_id = decision.query_id
        builder = BatchBuilder()
        now = self._clock.milliseconds()
        for batch_id in pruned:
            builder.append(now, encode_decision_key(query_id, batch_id), None)
        builder.append(
            now,
            encode_decision_key(query_id, decision.batch_id),
            encode_decision_value(decision),
        )
        try:
            await self.runtime.write(
                self.coordinator.partition_for(query_id),
                builder.build(),
                f"the decision of batch {decision.batch_id} of {query_id!r}",
            )
        except KafkaError as e:
            self.coordinator.abort_decision(decision)
            return e.code
        log.info(
            "batch %d of query %r decided: %d winner(s) commit",
            decision.batch_id,
            query_id,
            len(decision.winners),
        )
        owed = self.coordinator.complete_decision(decision, pruned)
        if self._config.debug_end_txn_pause == "decision-written":
            log.warning("exactly.debug.end.txn.pause: batch %d of %r parked", decision.batch_id, query_id)
            await asyncio.Event().wait()  # until the process is killed or stopped
        await self._carry_out(owed)
        return ErrorCode.NONE

    async def _carry_out(self, results: list[TxnResult]) -> list[ErrorCode]:
        """Append transitions of several ids at once (their fsyncs are shared); failures are retried by the
        next timeout scan's re-drive."""
        return list(await asyncio.gather(*(self._commit(result) for result in results)))

    async def abort_batch(self, query_id: str, batch_id: int) -> tuple[BatchResult, list[str]]:
        """AbortBatch (batch_id -1: every undecided batch): the aborted ids' PrepareAbort is durable."""
        async with self._turn(query_id, self._query_turns):
            if not self.runtime.coordinates(self.coordinator.partition_for(query_id)):
                return BatchResult(
                    query_id, batch_id, ErrorCode.NOT_COORDINATOR, "not this broker's query"
                ), []
            await self.ensure_topic()
            result = self.coordinator.abort_batch(query_id, batch_id)
            errors = await asyncio.shield(self._spawn(self._carry_out(list(result.aborts))))
            aborted = [r.transactional_id for r, e in zip(result.aborts, errors, strict=True) if not e]
            if aborted:
                log.info("aborted the prepared work of %r batch %d: %s", query_id, batch_id, aborted)
            return result, aborted
