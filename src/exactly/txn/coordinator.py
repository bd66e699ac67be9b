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
* EndTxn v5 (transaction version 2, KIP-890 part 2; `transaction_version=2`): every PrepareCommit/
  PrepareAbort bumps the epoch (markers carry the bumped epoch) and the answer is the producer id and
  epoch the client goes on with — a new producer id at epoch 0 when the bump would exhaust the epoch
  (`next_producer_id`, applied by CompleteX). Checked in Kafka 4's order: a transition in progress (or
  markers being written) -> CONCURRENT_TRANSACTIONS; an unknown producer id (but the retry of the
  transaction that rotated it) -> INVALID_PRODUCER_ID_MAPPING; then the epoch by state: Empty/Ongoing
  need the current epoch, CompleteCommit/CompleteAbort also accept the epoch before the last bump (the
  retry of the EndTxn that just ended the transaction: NONE with the current producer id and epoch,
  nothing written) and the exhausted epoch of the previous producer id; anything else PRODUCER_FENCED.
  So a delayed or duplicated EndTxn can never end the next transaction (KAFKA-17754). An abort from
  Empty/CompleteX at the current epoch is a new empty transaction (bumped too). A fence of a TV2
  transaction by the timeout scan bumps twice (fence + TV2 abort, as Kafka 4), so the client's
  in-flight EndTxn cannot pass for a retry.
* add_partitions with `transaction_version=2`: the implicit add of Produce v12 / TxnOffsetCommit v5
  (the partition leader's AddPartitionsToTxn v4+ without VerifyOnly); records the client's version.
* verify (KIP-890 part 1): before a partition accepts a producer's first transactional batch.
* Timeouts: `abort_timed_out` fences and aborts Ongoing transactions older than their timeout.
* Expiry: `expire` writes tombstones for ids idle longer than `transactional.id.expiration.ms`.

Two-phase commit extension (PrepareTxn, CommitBatch, AbortBatch): `two_phase.py`, mixed in.

Placement: a transactional id lives in partition `hash(id) % partitions` of `__transaction_state`
(Kafka's rule), except the ids of the two-phase commit's tasks, `exactly-spark.<query>.<rest>` (the
Spark sink's pooled ids `exactly-spark.<query>.<partition>.<slot>`, and the older per-attempt form),
which live in their query's partition (`placement_key`): the batch decisions of a query and every
transaction they decide then share one partition, so one leader decides and carries out a batch, and a
failover moves them together. Clients never compute this; they ask FindCoordinator, which uses it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from exactly.errors import ErrorCode
from exactly.group.partitioning import partition_for
from exactly.txn.decisions import BatchDecisionRecord, Decisions
from exactly.txn.metadata import (
    MAX_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TransactionMetadata,
    TxnTransit,
    is_epoch_exhausted,
)
from exactly.txn.placement import placement_key
from exactly.txn.records import TransactionLogValue
from exactly.txn.results import BatchResult, MarkerJob, TxnConfig, TxnResult
from exactly.txn.state import TxnState
from exactly.txn.two_phase import PreparedIndex, TwoPhaseCommit

__all__ = ["TV2", "BatchResult", "MarkerJob", "TransactionCoordinator", "TxnConfig", "TxnResult"]

#: the `transaction.version` feature level (and ClientTransactionVersion) that bumps the epoch at every
#: transaction end; requests of older clients are recorded with client transaction version 0, as Kafka's
TV2 = 2

_S = TxnState
_NONE = ErrorCode.NONE


class TransactionCoordinator(TwoPhaseCommit):
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
        self.prepared_index = PreparedIndex()  # Prepared ids by (query, batch): kept at every change
        self._deciding: set[tuple[str, int]] = set()  # decision records being appended
        # partition of __transaction_state -> its coordinator epoch (in a cluster: its leader epoch)
        self.coordinator_epochs: dict[int, int] = {}

    def partition_for(self, key: str) -> int:
        """The `__transaction_state` partition of a transactional id or a two-phase commit query id."""
        return partition_for(placement_key(key), self.config.num_partitions)

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

    def _fence_and_abort(
        self, txn: TransactionMetadata, error: ErrorCode, *, tv2_bump: bool = False
    ) -> TxnResult:
        """PrepareEpochFence -> PrepareAbort at epoch + 1; `tv2_bump` (the timeout scan on a transaction
        version 2 transaction): + 2, the fence and the TV2 abort's own bump, as Kafka 4 writes it."""
        epoch = txn.fence_epoch()
        if tv2_bump and txn.client_transaction_version >= TV2:
            epoch = min(epoch + 1, MAX_EPOCH)
        txn.prepare_fence()
        transit = txn.prepare_transition(
            _S.PREPARE_ABORT,
            now=self._now(),
            producer_epoch=epoch,
            last_producer_epoch=NO_PRODUCER_EPOCH,
            next_producer_id=NO_PRODUCER_ID,
        )
        return TxnResult(txn.transactional_id, error, transit, transit.producer_id, transit.producer_epoch)

    # --- adding partitions ------------------------------------------------------------------------------

    def _check_producer(self, transactional_id: str, producer_id: int, epoch: int) -> ErrorCode:
        txn = self.transactions.get(transactional_id)
        if txn is not None and _completing_rotation(txn, producer_id):
            return ErrorCode.CONCURRENT_TRANSACTIONS  # the new producer id is the client's once CompleteX is
        if txn is None or txn.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if txn.producer_epoch != epoch:
            return ErrorCode.PRODUCER_FENCED
        if txn.pending_state is not None or txn.state.is_prepare:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        return _NONE

    def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        partitions: Iterable[tuple[str, int]],
        transaction_version: int = 0,
    ) -> TxnResult:
        """AddPartitionsToTxn / AddOffsetsToTxn (`transaction_version` 0), or the implicit add of a
        transaction version 2 client's Produce v12 / TxnOffsetCommit v5 (2)."""
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
            _S.ONGOING,
            now=now,
            partitions=frozenset(txn.partitions) | wanted,
            start_timestamp=start,
            client_transaction_version=transaction_version,
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

    def end_transaction(
        self, transactional_id: str, producer_id: int, epoch: int, commit: bool, transaction_version: int = 0
    ) -> TxnResult:
        """EndTxn; `transaction_version` 2 (EndTxn v5) bumps the epoch (see the module docstring)."""
        if transaction_version >= TV2:
            return self._end_transaction_v2(transactional_id, producer_id, epoch, commit)
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

    def _end_transaction_v2(
        self, transactional_id: str, producer_id: int, epoch: int, commit: bool
    ) -> TxnResult:
        txn = self.transactions.get(transactional_id)
        if txn is None:
            return TxnResult(transactional_id, ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        if txn.pending_state is not None or txn.state.is_prepare or _completing_rotation(txn, producer_id):
            # a transition is being appended, or PrepareX's markers are written (Kafka's pending CompleteX)
            return TxnResult(transactional_id, ErrorCode.CONCURRENT_TRANSACTIONS)
        state = txn.state
        retry_of_overflow = (
            txn.previous_producer_id == producer_id
            and txn.producer_id != producer_id
            and epoch == MAX_EPOCH - 1
            and txn.producer_epoch == 0
        )
        if txn.producer_id != producer_id and not retry_of_overflow:
            return TxnResult(transactional_id, ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        retry_of_bump = not retry_of_overflow and txn.producer_epoch == epoch + 1
        is_retry = retry_of_bump or retry_of_overflow
        current = not retry_of_overflow and epoch == txn.producer_epoch
        valid = current or (state.is_complete and is_retry)
        if not valid or state is _S.DEAD:
            return TxnResult(transactional_id, ErrorCode.PRODUCER_FENCED)
        done = TxnResult(transactional_id, _NONE, None, txn.producer_id, txn.producer_epoch)
        if state is _S.ONGOING:
            return self._prepare_end_v2(txn, commit, empty=False)
        if state is _S.COMPLETE_COMMIT:
            if commit:
                return done if is_retry else TxnResult(transactional_id, ErrorCode.INVALID_TXN_STATE)
            return (
                TxnResult(transactional_id, ErrorCode.INVALID_TXN_STATE)
                if is_retry
                else (self._prepare_end_v2(txn, commit, empty=True))
            )
        if state is _S.COMPLETE_ABORT:
            if not commit:
                return done if is_retry else self._prepare_end_v2(txn, commit, empty=True)
            return TxnResult(transactional_id, ErrorCode.INVALID_TXN_STATE)
        if state is _S.EMPTY and not commit:
            return self._prepare_end_v2(txn, commit, empty=True)
        return TxnResult(transactional_id, ErrorCode.INVALID_TXN_STATE)  # Empty commit; Prepared (2PC)

    def _prepare_end_v2(self, txn: TransactionMetadata, commit: bool, *, empty: bool) -> TxnResult:
        """PrepareCommit/PrepareAbort with the epoch bumped (Kafka's prepareAbortOrCommit for TV2); `empty`:
        an abort with no partition added (from Empty or CompleteX), started now."""
        now = self._now()
        next_producer_id = self._allocate() if is_epoch_exhausted(txn.producer_epoch) else NO_PRODUCER_ID
        transit = txn.prepare_transition(
            _S.PREPARE_COMMIT if commit else _S.PREPARE_ABORT,
            now=now,
            producer_epoch=min(txn.producer_epoch + 1, MAX_EPOCH),
            last_producer_epoch=txn.producer_epoch,
            next_producer_id=next_producer_id,
            client_transaction_version=TV2,
            partitions=frozenset() if empty else None,
            start_timestamp=now if empty else None,
        )
        return TxnResult(
            txn.transactional_id, _NONE, transit, transit.client_producer_id, transit.client_producer_epoch
        )

    # --- applying ---------------------------------------------------------------------------------------

    def complete_transition(self, transactional_id: str, transit: TxnTransit) -> MarkerJob | None:
        """The record of `transit` is durable: apply it. Returns the markers to write for a PrepareX."""
        txn = self.transactions[transactional_id]
        if transit.state is _S.DEAD:
            txn.abort_transition()
            del self.transactions[transactional_id]
            self.prepared_index.update(None, transactional_id)
            return None
        txn.complete_transition(transit)
        self.prepared_index.update(txn, transactional_id)
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
            self.coordinator_epoch(self.partition_for(txn.transactional_id)),
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
        rotate = txn.client_transaction_version >= TV2 and txn.next_producer_id != NO_PRODUCER_ID
        transit = txn.prepare_transition(
            target,
            now=self._now(),
            partitions=frozenset(),
            # TV2 over an exhausted epoch: the client goes on with the new producer id at epoch 0
            producer_id=txn.next_producer_id if rotate else None,
            producer_epoch=0 if rotate else None,
            next_producer_id=NO_PRODUCER_ID,
        )
        return TxnResult(job.transactional_id, _NONE, transit)

    # --- time -------------------------------------------------------------------------------------------

    def abort_timed_out(self, now: int | None = None) -> list[TxnResult]:
        """Fence (epoch + 1) and abort every Ongoing transaction older than its timeout, and every Prepared
        one prepared more than transaction.prepared.max.age.ms ago."""
        at = self._now() if now is None else now
        return [
            self._abort_prepared(txn, _NONE)
            if txn.state is _S.PREPARED
            else self._fence_and_abort(txn, _NONE, tv2_bump=True)
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
            self.prepared_index.update(None, transactional_id)
            return
        txn = self.transactions.get(transactional_id)
        if txn is None:
            txn = self.transactions[transactional_id] = TransactionMetadata.from_value(
                transactional_id, value
            )
        else:
            txn.apply_loaded(value)
        self.prepared_index.update(txn, transactional_id)

    def coordinator_epoch(self, partition: int) -> int:
        """The epoch markers of `partition`'s transactions carry (fences markers of older coordinators)."""
        return self.coordinator_epochs.get(partition, self.config.coordinator_epoch)

    def unload_partition(self, partition: int) -> None:
        """Another coordinator owns `partition` of `__transaction_state` now (Kafka's
        `removeTransactionsForTxnTopicPartition`): forget its transactional ids and batch decisions."""
        self.coordinator_epochs.pop(partition, None)
        for tid in [tid for tid in self.transactions if self.partition_for(tid) == partition]:
            del self.transactions[tid]
            self.prepared_index.update(None, tid)
        self.decisions.remove_queries(lambda query_id: self.partition_for(query_id) != partition)

    def load_decision(self, decision: BatchDecisionRecord) -> None:
        """Replay one batch decision record (start-up); `redrive_all` then carries out what is missing."""
        self.decisions.add(decision)

    def pending_marker_jobs(self, partition: int | None = None) -> Iterator[MarkerJob]:
        """After loading: the transactions (of `partition`, or all) whose decision is recorded but whose
        markers may be missing."""
        for txn in self.transactions.values():
            if partition is not None and self.partition_for(txn.transactional_id) != partition:
                continue
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
            if state_filter and not ({txn.state.kafka_name, txn.state.reported_name} & state_filter):
                continue  # a Prepared transaction matches "Ongoing" (as reported) and "Prepared"
            if pid_filter and txn.producer_id not in pid_filter:
                continue
            if min_duration_ms >= 0 and now - txn.start_timestamp < min_duration_ms:
                continue
            out.append(txn)
        return out


def _completing_rotation(txn: TransactionMetadata, producer_id: int) -> bool:
    """A TV2 PrepareX that rotates the producer id is completing, and `producer_id` is the new one (the
    client has its EndTxn answer and may already start the next transaction with it)."""
    return (
        txn.next_producer_id != NO_PRODUCER_ID
        and producer_id == txn.next_producer_id
        and (txn.state.is_prepare or txn.pending is not None)
    )
