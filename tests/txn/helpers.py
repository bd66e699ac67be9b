"""A transaction coordinator with a manual clock and an in-memory `__transaction_state` log."""

from __future__ import annotations

import itertools

from exactly.clock import ManualClock
from exactly.txn import MarkerJob, TransactionCoordinator, TxnConfig, TxnResult
from exactly.txn.records import decode_key, decode_value, encode_key, encode_value
from exactly.txn.state import TxnState


class Harness:
    def __init__(self, config: TxnConfig | None = None) -> None:
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
            value = None if result.transit.state is TxnState.DEAD else encode_value(result.transit.to_value())
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

    def restart(self) -> None:
        """A crash: a new coordinator replays the log; decided transactions get their marker jobs back."""
        self.coordinator = self._new()
        for key, value in self.log:
            self.coordinator.load_record(decode_key(key), decode_value(value))
        self.jobs = list(self.coordinator.pending_marker_jobs())

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
