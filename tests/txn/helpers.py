"""A transaction coordinator with a manual clock and an in-memory `__transaction_state` log."""

from __future__ import annotations

import itertools

from exactly.clock import ManualClock
from exactly.txn import MarkerJob, TransactionCoordinator, TxnConfig, TxnResult
from exactly.txn.coordinator import BatchResult
from exactly.txn.decisions import (
    DECISION_KEY_VERSION,
    BatchDecisionRecord,
    decode_decision_key,
    decode_decision_value_or_tombstone,
    encode_decision_key,
    encode_decision_value,
)
from exactly.txn.records import decode_key, decode_value, encode_key, encode_value, key_version
from exactly.txn.state import TxnState


class Harness:
    def __init__(self, config: TxnConfig | None = None, *, log_version: int = 1) -> None:
        self.log_version = (
            log_version  # the TransactionLogValue version written (transaction.version >= 1: 1)
        )
        self.clock = ManualClock()
        self.pids = itertools.count(1000)
        self.log: list[tuple[bytes, bytes | None]] = []  # the records appended, in order
        self.jobs: list[MarkerJob] = []
        self.config = config or TxnConfig()
        self.coordinator = self._new()

    def _new(self) -> TransactionCoordinator:
        return TransactionCoordinator(self.config, lambda: next(self.pids), self.clock.milliseconds)

    def apply(self, result: TxnResult) -> TxnResult:
        """What the broker does: append the transition's record (durably), then complete it."""
        if result.transit is not None:
            value = (
                None
                if result.transit.state is TxnState.DEAD
                else encode_value(result.transit.to_value(), self.log_version)
            )
            self.log.append((encode_key(result.transactional_id), value))
            job = self.coordinator.complete_transition(result.transactional_id, result.transit)
            if job is not None:
                self.jobs.append(job)
        return result

    def finish_markers(self) -> None:
        """Every marker job writes its markers, then CompleteX is recorded."""
        while self.jobs:
            job = self.jobs.pop(0)
            result = self.coordinator.complete_markers(job)
            if result is not None:
                self.apply(result)

    def restart(self, *, redrive: bool = True) -> list[TxnResult]:
        """A crash: a new coordinator replays the log; decided transactions get their marker jobs back,
        and (`redrive`, as the broker's start does) the transitions owed to recorded batch decisions are
        applied. Returns those transitions."""
        self.coordinator = self._new()
        for key, value in self.log:
            if key_version(key) == DECISION_KEY_VERSION:
                query_id, batch_id = decode_decision_key(key)
                decision = decode_decision_value_or_tombstone(query_id, batch_id, value)
                if decision is None:
                    self.coordinator.load_decision_tombstone(query_id, batch_id)
                else:
                    self.coordinator.load_decision(decision)
            else:
                self.coordinator.load_record(decode_key(key), decode_value(value))
        self.jobs = list(self.coordinator.pending_marker_jobs())
        if not redrive:
            return []
        return [self.apply(result) for result in self.coordinator.redrive_all()]

    # --- two-phase commit ------------------------------------------------------------------------------

    def append_decision(self, decision: BatchDecisionRecord, pruned: tuple[int, ...] = ()) -> None:
        for batch_id in pruned:  # their tombstones, in the decision's record batch
            self.log.append((encode_decision_key(decision.query_id, batch_id), None))
        self.log.append(
            (encode_decision_key(decision.query_id, decision.batch_id), encode_decision_value(decision))
        )

    def apply_batch(self, result: BatchResult, *, transitions: int | None = None) -> BatchResult:
        """What the broker does with CommitBatch/AbortBatch: the decision record (durable), then the
        transitions it owes — only the first `transitions` of them when given (a crash or failed appends cut
        it short; the others are dropped as the broker drops a failed append)."""
        owed: list[TxnResult] = list(result.aborts)
        if result.record:
            assert result.decision is not None
            self.append_decision(result.decision, result.pruned)
            owed = self.coordinator.complete_decision(result.decision, result.pruned)
        for item in owed[:transitions]:
            self.apply(item)
        for item in owed[len(owed) if transitions is None else transitions :]:
            self.coordinator.abort_transition(item.transactional_id)  # not appended: as a failed append
        return result

    def prepare(
        self, txn_id: str, query: str, batch: int, partition: int = 0, pid: int = -1, epoch: int = -1
    ) -> TxnResult:
        return self.apply(self.coordinator.prepare(txn_id, query, batch, partition, pid, epoch))

    def commit_batch(self, query: str, batch: int, winners: list[str], **kw: int) -> BatchResult:
        return self.apply_batch(self.coordinator.commit_batch(query, batch, winners), **kw)

    def abort_batch(self, query: str, batch: int) -> BatchResult:
        return self.apply_batch(self.coordinator.abort_batch(query, batch))

    def task(self, txn_id: str, query: str, batch: int, partition: int = 0) -> TxnResult:
        """A Spark task: init, one partition, prepare."""
        self.init(txn_id)
        self.begin(txn_id, ("out", partition))
        return self.prepare(txn_id, query, batch, partition)

    def state(self, txn_id: str) -> TxnState:
        return self.coordinator.transactions[txn_id].state

    def init(self, txn_id: str, timeout_ms: int = 60_000, pid: int = -1, epoch: int = -1) -> TxnResult:
        return self.apply(self.coordinator.init_producer_id(txn_id, timeout_ms, pid, epoch))

    def begin(self, txn_id: str, *partitions: tuple[str, int]) -> TxnResult:
        txn = self.coordinator.transactions[txn_id]
        return self.apply(
            self.coordinator.add_partitions(
                txn_id, txn.producer_id, txn.producer_epoch, partitions or [("t", 0)]
            )
        )

    def end(self, txn_id: str, commit: bool) -> TxnResult:
        txn = self.coordinator.transactions[txn_id]
        return self.apply(
            self.coordinator.end_transaction(txn_id, txn.producer_id, txn.producer_epoch, commit)
        )
