"""The transaction coordinator (Kafka's `TransactionCoordinator` + `TransactionStateManager`), sans-IO.

Plain synchronous code: every operation validates a request against the transactional.id's
`TransactionMetadata` and answers with a `TxnResult` — an error to return at once, or a prepared
`TxnTransit` (the record to append to `__transaction_state`) and what to answer once it is durable. The
caller (`exactly.broker.transactions`) appends the record, waits for it to be durable, then calls
`complete_transition`, which applies it and, for PrepareCommit/PrepareAbort, hands back the
`MarkerJob` to run: COMMIT/ABORT markers to every partition of the transaction, then `complete_markers`
for the CompleteCommit/CompleteAbort record. A crash anywhere in between is recovered by `load_record`
(replaying the log) followed by `pending_marker_jobs`.

Requests and their answers (Kafka 3.x / 4.x with transaction version 1; error remaps for old request
versions are the handlers' business):

* InitProducerId(transactional.id, timeout, [producer id, epoch] (KIP-360)): a new id gets a producer id;
  otherwise the epoch is bumped (fencing older instances) or, when exhausted, the producer id rotated.
  An Ongoing transaction is fenced and aborted first (PrepareEpochFence -> PrepareAbort with epoch+1),
  answering CONCURRENT_TRANSACTIONS so the client retries after the abort. A retried KIP-360 request
  whose epoch equals the last epoch gets the current one again.
* AddPartitionsToTxn / AddOffsetsToTxn: -> Ongoing with the partitions added (no record when they are
  all in the transaction already).
* EndTxn(commit|abort): Ongoing -> PrepareX, markers, CompleteX. A fenced producer gets PRODUCER_FENCED
  before any state check. While PrepareX's markers are written every EndTxn answers
  CONCURRENT_TRANSACTIONS (Kafka holds a pending CompleteX then); afterwards a retry gets NONE and the
  other decision INVALID_TXN_STATE — except the abort of a transaction the coordinator never started
  because its AddPartitions was answered CONCURRENT_TRANSACTIONS (librdkafka sends that EndTxn), which
  is done (NONE).
* verify (KIP-890 part 1): before a partition accepts a producer's first transactional batch.
* Timeouts: `abort_timed_out` fences and aborts Ongoing transactions older than their timeout.
* Expiry: `expire` writes tombstones for ids idle longer than `transactional.id.expiration.ms`.

Two-phase commit extension (docs/two-phase-commit.md; the Spark sink's design (b)):

* PrepareTxn(id, query, batch, partition): Ongoing -> Prepared, tagged; answered once durable. A prepare
  for a batch that is decided, or older than the query's highest decided batch (`decided_hw`), is a
  zombie's: its transaction is aborted (epoch + 1) and it gets PRODUCER_FENCED.
* CommitBatch(query, batch, winners): decided before -> the stored decision (ALREADY_DECIDED) and a
  re-drive. Else every winner must be Prepared for (query, batch); the decision record is appended
  (`BatchResult.record`), and once it is durable `complete_decision` applies it and returns the
  transitions that carry it out (`redrive`): winners -> PrepareCommit, every other Prepared transaction
  of the query whose batch is decided or older than `decided_hw` -> PrepareAbort. Markers follow as for
  EndTxn.
* AbortBatch(query, batch | -1): decided -> nothing (roll forward); else PrepareAbort for the batch's (or
  every undecided batch's) Prepared transactions. No record beyond the PrepareAbort records.
* Recovery: after loading, `redrive_all` re-derives the transitions of every decided batch whose
  transactions are still Prepared (a crash after the decision record, before or between transitions);
  PrepareX transactions resume their markers through `pending_marker_jobs` as usual.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from exactly.errors import ErrorCode
from exactly.group.partitioning import partition_for
from exactly.txn.decisions import BatchDecisionRecord, Decisions
from exactly.txn.metadata import (
    NO_PRODUCER_EPOCH,
    TransactionMetadata,
    TxnTransit,
    is_epoch_exhausted,
)
from exactly.txn.records import Partitions, PreparedTag, TransactionLogValue
from exactly.txn.state import TxnState

__all__ = ["BatchResult", "MarkerJob", "TransactionCoordinator", "TxnConfig", "TxnResult"]

_S = TxnState
_NONE = ErrorCode.NONE


@dataclass(frozen=True, slots=True)
class TxnConfig:
    num_partitions: int = 50  # transaction.state.log.num.partitions
    max_timeout_ms: int = 900_000  # transaction.max.timeout.ms
    id_expiration_ms: int = 604_800_000  # transactional.id.expiration.ms
    coordinator_epoch: int = 0  # single node: the epoch of every __transaction_state partition
    prepared_max_age_ms: int = 604_800_000  # transaction.prepared.max.age.ms (-1: never)


@dataclass(frozen=True, slots=True)
class MarkerJob:
    """Write a COMMIT/ABORT marker for `producer_id` to every partition, then record CompleteX."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    partitions: Partitions


@dataclass(frozen=True, slots=True)
class TxnResult:
    """The answer to a request: `error` (and the producer id/epoch for InitProducerId) once `transit`,
    if any, has been appended, made durable and completed."""

    transactional_id: str
    error: ErrorCode = _NONE
    transit: TxnTransit | None = None
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass(frozen=True, slots=True)
class BatchResult:
    """The answer to CommitBatch / AbortBatch.

    `decision`: the batch's decision (new or stored), None when there is none. `record`: the decision is
    new — append it and call `complete_decision` once durable (or `abort_decision` if the append failed)
    before answering. `already_decided`: decided by an earlier request. `aborts`: PrepareAbort
    transitions to append (AbortBatch) before answering.
    """

    query_id: str
    batch_id: int
    error: ErrorCode = _NONE
    message: str | None = None
    decision: BatchDecisionRecord | None = None
    record: bool = False
    already_decided: bool = False
    aborts: tuple[TxnResult, ...] = ()


class TransactionCoordinator:
    def __init__(
        self,
        config: TxnConfig,
        allocate_producer_id: Callable[[], int],
        now_ms: Callable[[], int],
    ) -> None:
        self.config = config
        self._allocate = allocate_producer_id
        self._now = now_ms
        self.transactions: dict[str, TransactionMetadata] = {}
        self.decisions = Decisions()
        self._deciding: set[tuple[str, int]] = set()  # decision records being appended

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.config.num_partitions)

    # --- InitProducerId ----------------------------------------------------------------------------------

    def init_producer_id(
        self,
        transactional_id: str,
        timeout_ms: int,
        expected_producer_id: int = -1,
        expected_epoch: int = -1,
    ) -> TxnResult:
        if not transactional_id:
            return TxnResult(transactional_id, ErrorCode.INVALID_REQUEST)
        if timeout_ms <= 0 or timeout_ms > self.config.max_timeout_ms:
            return TxnResult(transactional_id, ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        expected = expected_producer_id >= 0 or expected_epoch >= 0
        now = self._now()
        txn = self.transactions.get(transactional_id)
        if txn is None:
            txn = TransactionMetadata(transactional_id, self._allocate(), NO_PRODUCER_EPOCH, timeout_ms)
            self.transactions[transactional_id] = txn
        if txn.pending_state is not None:
            return TxnResult(transactional_id, ErrorCode.CONCURRENT_TRANSACTIONS)
        if expected and not (
            txn.producer_epoch == NO_PRODUCER_EPOCH
            or expected_producer_id == txn.producer_id
            or (expected_producer_id == txn.previous_producer_id and is_epoch_exhausted(expected_epoch))
        ):
            return TxnResult(transactional_id, ErrorCode.PRODUCER_FENCED)
        if txn.state.is_prepare or txn.state is _S.PREPARED:
            # PREPARED: the transaction belongs to its batch's decision; a new instance waits for it.
            return TxnResult(transactional_id, ErrorCode.CONCURRENT_TRANSACTIONS)
        if txn.state is _S.ONGOING:
            # A new instance finds the old one's transaction open: fence it (epoch + 1) and abort it;
            # the client retries and gets its epoch once the abort is complete.
            return self._fence_and_abort(txn, ErrorCode.CONCURRENT_TRANSACTIONS)
        if not (txn.state is _S.EMPTY or txn.state.is_complete):
            return TxnResult(transactional_id, ErrorCode.UNKNOWN_SERVER_ERROR)
        if is_epoch_exhausted(txn.producer_epoch) and (not expected or expected_epoch == txn.producer_epoch):
            transit = txn.prepare_transition(
                _S.EMPTY,
                now=now,
                producer_id=self._allocate(),
                producer_epoch=0,
                last_producer_epoch=txn.producer_epoch if expected else NO_PRODUCER_EPOCH,
                timeout_ms=timeout_ms,
                partitions=frozenset(),
                start_timestamp=-1,
            )
            return TxnResult(transactional_id, _NONE, transit, transit.producer_id, transit.producer_epoch)
        bumped = txn.producer_epoch + 1
        if not expected or txn.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == txn.producer_epoch:
            epoch, last_epoch = bumped, txn.producer_epoch
            if not expected:
                last_epoch = NO_PRODUCER_EPOCH
        elif expected_epoch == txn.last_producer_epoch:
            epoch, last_epoch = txn.producer_epoch, txn.last_producer_epoch  # a retry of the last bump
        else:
            return TxnResult(transactional_id, ErrorCode.PRODUCER_FENCED)
        transit = txn.prepare_transition(
            _S.EMPTY,
            now=now,
            producer_epoch=epoch,
            last_producer_epoch=last_epoch,
            timeout_ms=timeout_ms,
            partitions=frozenset(),
            start_timestamp=-1,
        )
        return TxnResult(transactional_id, _NONE, transit, transit.producer_id, transit.producer_epoch)

    def _fence_and_abort(self, txn: TransactionMetadata, error: ErrorCode) -> TxnResult:
        epoch = txn.fence_epoch()
        txn.prepare_fence()
        transit = txn.prepare_transition(
            _S.PREPARE_ABORT, now=self._now(), producer_epoch=epoch, last_producer_epoch=NO_PRODUCER_EPOCH
        )
        return TxnResult(txn.transactional_id, error, transit, transit.producer_id, transit.producer_epoch)

    # --- adding partitions ------------------------------------------------------------------------------

    def _check_producer(self, transactional_id: str, producer_id: int, epoch: int) -> ErrorCode:
        txn = self.transactions.get(transactional_id)
        if txn is None or txn.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if txn.producer_epoch != epoch:
            return ErrorCode.PRODUCER_FENCED
        if txn.pending_state is not None or txn.state.is_prepare:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        return _NONE

    def add_partitions(
        self, transactional_id: str, producer_id: int, epoch: int, partitions: Iterable[tuple[str, int]]
    ) -> TxnResult:
        error = self._check_producer(transactional_id, producer_id, epoch)
        if error == ErrorCode.CONCURRENT_TRANSACTIONS:
            txn = self.transactions[transactional_id]
            if txn.state is not _S.ONGOING:
                txn.unstarted_transaction = True  # the client's next transaction; the last is completing
        if error:
            return TxnResult(transactional_id, error)
        txn = self.transactions[transactional_id]
        wanted = frozenset(partitions)
        if txn.state is _S.ONGOING and wanted <= txn.partitions:
            return TxnResult(transactional_id)
        if txn.state not in (_S.ONGOING, _S.EMPTY) and not txn.state.is_complete:
            return TxnResult(transactional_id, ErrorCode.INVALID_TXN_STATE)
        now = self._now()
        start = txn.start_timestamp if txn.state is _S.ONGOING else now
        transit = txn.prepare_transition(
            _S.ONGOING, now=now, partitions=frozenset(txn.partitions) | wanted, start_timestamp=start
        )
        return TxnResult(transactional_id, _NONE, transit)

    def verify(
        self, transactional_id: str, producer_id: int, epoch: int, topic: str, partition: int
    ) -> ErrorCode:
        """KIP-890 part 1: may this producer start writing transactionally to this partition?"""
        txn = self.transactions.get(transactional_id)
        if txn is None or txn.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if txn.producer_epoch != epoch:
            return ErrorCode.PRODUCER_FENCED
        if txn.state is not _S.ONGOING or (topic, partition) not in txn.partitions:
            return ErrorCode.INVALID_TXN_STATE
        return _NONE

    # --- EndTxn -----------------------------------------------------------------------------------------

    def end_transaction(self, transactional_id: str, producer_id: int, epoch: int, commit: bool) -> TxnResult:
        txn = self.transactions.get(transactional_id)
        if txn is None or txn.producer_id != producer_id:
            return TxnResult(transactional_id, ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        if txn.producer_epoch != epoch:
            return TxnResult(transactional_id, ErrorCode.PRODUCER_FENCED)
        if txn.pending_state is not None or txn.state.is_prepare:
            # PrepareX: its markers are being written, which Kafka holds as a pending CompleteX.
            return TxnResult(transactional_id, ErrorCode.CONCURRENT_TRANSACTIONS)
        state = txn.state
        if state is _S.ONGOING:
            transit = txn.prepare_transition(
                _S.PREPARE_COMMIT if commit else _S.PREPARE_ABORT, now=self._now()
            )
            return TxnResult(transactional_id, _NONE, transit, producer_id, epoch)
        if state is (_S.COMPLETE_COMMIT if commit else _S.COMPLETE_ABORT):
            return TxnResult(transactional_id)  # a retry of a transaction that has ended
        if not commit and txn.unstarted_transaction:
            # The abort of a transaction that never started here: its AddPartitionsToTxn was refused
            # with CONCURRENT_TRANSACTIONS while the previous one completed, and librdkafka aborts such a
            # transaction with EndTxn instead of retrying the AddPartitions. Nothing was added, so no
            # partition holds its data: the abort is done. (Kafka answers INVALID_TXN_STATE, which
            # librdkafka treats as fatal; an abort after a commit the client itself made still gets it.)
            txn.unstarted_transaction = False
            return TxnResult(transactional_id)
        return TxnResult(transactional_id, ErrorCode.INVALID_TXN_STATE)

    # --- applying ---------------------------------------------------------------------------------------

    def complete_transition(self, transactional_id: str, transit: TxnTransit) -> MarkerJob | None:
        """The record of `transit` is durable: apply it. Returns the markers to write for a PrepareX."""
        txn = self.transactions[transactional_id]
        if transit.state is _S.DEAD:
            txn.abort_transition()
            del self.transactions[transactional_id]
            return None
        txn.complete_transition(transit)
        return self._marker_job(txn)

    def abort_transition(self, transactional_id: str) -> None:
        """The record could not be appended: the id stays as it was (a new id is kept, as Kafka does)."""
        txn = self.transactions.get(transactional_id)
        if txn is not None:
            txn.abort_transition()

    def _marker_job(self, txn: TransactionMetadata) -> MarkerJob | None:
        if not txn.state.is_prepare:
            return None
        return MarkerJob(
            txn.transactional_id,
            txn.producer_id,
            txn.producer_epoch,
            txn.state is _S.PREPARE_COMMIT,
            self.config.coordinator_epoch,
            frozenset(txn.partitions),
        )

    def complete_markers(self, job: MarkerJob) -> TxnResult | None:
        """Every partition has its marker: prepare CompleteX (None if the id moved on meanwhile)."""
        txn = self.transactions.get(job.transactional_id)
        if (
            txn is None
            or txn.pending is not None
            or not txn.state.is_prepare
            or txn.producer_id != job.producer_id
            or txn.producer_epoch != job.producer_epoch
        ):
            return None
        target = _S.COMPLETE_COMMIT if txn.state is _S.PREPARE_COMMIT else _S.COMPLETE_ABORT
        transit = txn.prepare_transition(target, now=self._now(), partitions=frozenset())
        return TxnResult(job.transactional_id, _NONE, transit)

    # --- time -------------------------------------------------------------------------------------------

    def abort_timed_out(self, now: int | None = None) -> list[TxnResult]:
        """Fence (epoch + 1) and abort every Ongoing transaction older than its timeout, and every Prepared
        one prepared more than transaction.prepared.max.age.ms ago."""
        at = self._now() if now is None else now
        return [
            self._abort_prepared(txn, _NONE)
            if txn.state is _S.PREPARED
            else self._fence_and_abort(txn, _NONE)
            for txn in list(self.transactions.values())
            if txn.is_timed_out(at, self.config.prepared_max_age_ms)
        ]

    def expire(self, now: int | None = None) -> list[TxnResult]:
        """Tombstones for ids with no transaction and no activity for transactional.id.expiration.ms."""
        at = self._now() if now is None else now
        out: list[TxnResult] = []
        for txn in list(self.transactions.values()):
            if (
                txn.pending_state is None
                and txn.state.can_expire
                and txn.last_update_timestamp + self.config.id_expiration_ms <= at
            ):
                out.append(TxnResult(txn.transactional_id, _NONE, txn.prepare_transition(_S.DEAD, now=at)))
        return out

    # --- loading ----------------------------------------------------------------------------------------

    def load_record(self, transactional_id: str, value: TransactionLogValue | None) -> None:
        """Replay one `__transaction_state` record (start-up): the last record of an id is its state."""
        if value is None:
            self.transactions.pop(transactional_id, None)
            return
        txn = self.transactions.get(transactional_id)
        if txn is None:
            self.transactions[transactional_id] = TransactionMetadata.from_value(transactional_id, value)
        else:
            txn.apply_loaded(value)

    def load_decision(self, decision: BatchDecisionRecord) -> None:
        """Replay one batch decision record (start-up); `redrive_all` then carries out what is missing."""
        self.decisions.add(decision)

    def pending_marker_jobs(self) -> Iterator[MarkerJob]:
        """After loading: the transactions whose decision is recorded but whose markers may be missing."""
        for txn in self.transactions.values():
            job = self._marker_job(txn)
            if job is not None:
                yield job

    # --- describing -------------------------------------------------------------------------------------

    def list_transactions(
        self, states: Iterable[str] = (), producer_ids: Iterable[int] = (), min_duration_ms: int = -1
    ) -> list[TransactionMetadata]:
        state_filter = set(states)
        pid_filter = set(producer_ids)
        now = self._now()
        out: list[TransactionMetadata] = []
        for txn in self.transactions.values():
            if state_filter and txn.state.kafka_name not in state_filter:
                continue
            if pid_filter and txn.producer_id not in pid_filter:
                continue
            if min_duration_ms >= 0 and now - txn.start_timestamp < min_duration_ms:
                continue
            out.append(txn)
        return out

    # --- two-phase commit: PrepareTxn ----------------------------------------------------------------------

    def prepare(self, transactional_id: str, query_id: str, batch_id: int, partition: int) -> TxnResult:
        if not transactional_id or not query_id or batch_id < 0 or partition < 0:
            return TxnResult(transactional_id, ErrorCode.INVALID_REQUEST)
        txn = self.transactions.get(transactional_id)
        if txn is None:
            return TxnResult(transactional_id, ErrorCode.TRANSACTIONAL_ID_NOT_FOUND)
        if txn.pending_state is not None:
            return TxnResult(transactional_id, ErrorCode.CONCURRENT_TRANSACTIONS)
        if txn.state is _S.PREPARED:
            tag = txn.prepared
            same = tag is not None and (tag.query_id, tag.batch_id, tag.partition) == (
                query_id,
                batch_id,
                partition,
            )
            return TxnResult(transactional_id, _NONE if same else ErrorCode.INVALID_TXN_STATE)
        if txn.state is not _S.ONGOING:
            return TxnResult(transactional_id, ErrorCode.INVALID_TXN_STATE)
        if self.batch_closed(query_id, batch_id):
            # A zombie preparing after its batch was decided: never part of the outcome.
            return self._fence_and_abort(txn, ErrorCode.PRODUCER_FENCED)
        now = self._now()
        transit = txn.prepare_transition(
            _S.PREPARED, now=now, prepared=PreparedTag(query_id, batch_id, partition, now)
        )
        return TxnResult(transactional_id, _NONE, transit, txn.producer_id, txn.producer_epoch)

    def batch_closed(self, query_id: str, batch_id: int) -> bool:
        """Decided, or older than the query's highest decided batch: nothing more may join it."""
        return self.decisions.get(query_id, batch_id) is not None or batch_id <= self.decisions.decided_hw(
            query_id
        )

    def _abort_prepared(self, txn: TransactionMetadata, error: ErrorCode) -> TxnResult:
        """Prepared -> PrepareAbort with epoch + 1 (fencing the producer, should it still be alive)."""
        transit = txn.prepare_transition(
            _S.PREPARE_ABORT,
            now=self._now(),
            producer_epoch=txn.fence_epoch(),
            last_producer_epoch=NO_PRODUCER_EPOCH,
        )
        return TxnResult(txn.transactional_id, error, transit, transit.producer_id, transit.producer_epoch)

    def settle(self, transactional_id: str) -> TxnResult | None:
        """The transition a Prepared transaction owes to a recorded decision (None: it waits)."""
        txn = self.transactions.get(transactional_id)
        if txn is None or txn.state is not _S.PREPARED or txn.pending_state is not None:
            return None
        tag = txn.prepared
        assert tag is not None
        decision = self.decisions.get(tag.query_id, tag.batch_id)
        if decision is not None and transactional_id in decision.winners:
            transit = txn.prepare_transition(_S.PREPARE_COMMIT, now=self._now())
            return TxnResult(transactional_id, _NONE, transit, txn.producer_id, txn.producer_epoch)
        if decision is not None or tag.batch_id <= self.decisions.decided_hw(tag.query_id):
            return self._abort_prepared(txn, _NONE)
        return None

    def redrive(self, query_id: str) -> list[TxnResult]:
        """Carry out the query's decisions: the transitions of its Prepared transactions that are owed."""
        out: list[TxnResult] = []
        for txn in list(self.transactions.values()):
            if txn.state is _S.PREPARED and txn.prepared is not None and txn.prepared.query_id == query_id:
                result = self.settle(txn.transactional_id)
                if result is not None:
                    out.append(result)
        return out

    def redrive_all(self) -> list[TxnResult]:
        """After loading: every transition owed to a recorded decision (a crash cut the fan-out short)."""
        out: list[TxnResult] = []
        for txn_id in list(self.transactions):
            result = self.settle(txn_id)
            if result is not None:
                out.append(result)
        return out

    # --- two-phase commit: CommitBatch / AbortBatch --------------------------------------------------------

    def commit_batch(self, query_id: str, batch_id: int, winners: Iterable[str]) -> BatchResult:
        wanted = tuple(winners)
        if not query_id or batch_id < 0 or len(set(wanted)) != len(wanted) or "" in wanted:
            return BatchResult(
                query_id,
                batch_id,
                ErrorCode.INVALID_REQUEST,
                "needs a query id, a batch id >= 0, distinct ids",
            )
        if (query_id, batch_id) in self._deciding:
            return BatchResult(query_id, batch_id, ErrorCode.CONCURRENT_TRANSACTIONS)
        decided = self.decisions.get(query_id, batch_id)
        if decided is not None:
            return BatchResult(query_id, batch_id, decision=decided, already_decided=True)
        hw = self.decisions.decided_hw(query_id)
        if batch_id <= hw:
            return BatchResult(
                query_id,
                batch_id,
                ErrorCode.INVALID_TXN_STATE,
                f"batch {batch_id} of query {query_id!r} was never decided and batch {hw} is: "
                "its prepared work has been aborted",
            )
        problems: list[str] = []
        for txn_id in wanted:
            txn = self.transactions.get(txn_id)
            if txn is None:
                problems.append(f"{txn_id!r} is unknown")
            elif txn.state is not _S.PREPARED or txn.pending_state is not None:
                state = txn.pending_state or txn.state
                problems.append(f"{txn_id!r} is {state.kafka_name}, not Prepared")
            elif txn.prepared is None or (txn.prepared.query_id, txn.prepared.batch_id) != (
                query_id,
                batch_id,
            ):
                tag = txn.prepared
                where = f"({tag.query_id!r}, {tag.batch_id})" if tag is not None else "nothing"
                problems.append(f"{txn_id!r} is prepared for {where}")
        if problems:
            return BatchResult(
                query_id,
                batch_id,
                ErrorCode.INVALID_TXN_STATE,
                f"batch {batch_id} of query {query_id!r} not decided: " + "; ".join(problems),
            )
        decision = BatchDecisionRecord(query_id, batch_id, wanted, self._now())
        self._deciding.add((query_id, batch_id))
        return BatchResult(query_id, batch_id, decision=decision, record=True)

    def complete_decision(self, decision: BatchDecisionRecord) -> list[TxnResult]:
        """The decision record is durable: apply it; returns the transitions that carry it out."""
        self._deciding.discard((decision.query_id, decision.batch_id))
        self.decisions.add(decision)
        return self.redrive(decision.query_id)

    def abort_decision(self, decision: BatchDecisionRecord) -> None:
        """The decision record could not be appended: nothing is decided."""
        self._deciding.discard((decision.query_id, decision.batch_id))

    def abort_batch(self, query_id: str, batch_id: int) -> BatchResult:
        """Abort the undecided Prepared work of one batch, or of every batch of the query (batch_id -1)."""
        if not query_id or batch_id < -1:
            return BatchResult(query_id, batch_id, ErrorCode.INVALID_REQUEST, "needs a query id, a batch id")
        if batch_id >= 0:
            if (query_id, batch_id) in self._deciding:
                return BatchResult(query_id, batch_id, ErrorCode.CONCURRENT_TRANSACTIONS)
            decided = self.decisions.get(query_id, batch_id)
            if decided is not None:
                return BatchResult(query_id, batch_id, decision=decided, already_decided=True)
        aborts: list[TxnResult] = []
        for txn in list(self.transactions.values()):
            tag = txn.prepared
            if txn.state is not _S.PREPARED or txn.pending_state is not None or tag is None:
                continue
            if tag.query_id != query_id or (batch_id >= 0 and tag.batch_id != batch_id):
                continue
            if (
                self.decisions.get(query_id, tag.batch_id) is not None
                or (query_id, tag.batch_id) in self._deciding
            ):
                continue  # decided (roll forward): settled by its decision, not aborted
            aborts.append(self._abort_prepared(txn, _NONE))
        return BatchResult(query_id, batch_id, aborts=tuple(aborts))

    def list_prepared(self, query_id: str | None = None) -> list[TransactionMetadata]:
        return sorted(
            (
                txn
                for txn in self.transactions.values()
                if txn.state is _S.PREPARED
                and txn.prepared is not None
                and (query_id is None or txn.prepared.query_id == query_id)
            ),
            key=lambda t: (
                (t.prepared.query_id, t.prepared.batch_id, t.prepared.partition, t.transactional_id)
                if t.prepared is not None
                else ("", 0, 0, t.transactional_id)
            ),
        )
