"""The transaction coordinator as a state machine (Hypothesis): random requests, marker completions,
timeout scans, clock moves and crashes (replaying the log). Checked after every step:

* every applied transition is legal (shared/vectors/txn-state-transitions.json via `check_transition`);
* an id's epoch never goes down while its producer id stays the same;
* a crash changes nothing that was applied (the log is the state);
* a decided transaction ends the way it was decided: PrepareCommit is always followed by CompleteCommit,
  PrepareAbort by CompleteAbort, whatever crashes happen in between;
* a fenced (older) epoch can never add partitions or end a transaction.
"""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from exactly.errors import ErrorCode
from exactly.txn import TxnResult, TxnState
from exactly.txn.state import check_transition
from tests.txn.helpers import Harness

IDS = st.sampled_from(["a", "b", "c"])
PARTITIONS = st.lists(st.tuples(st.sampled_from(["t", "u"]), st.integers(0, 2)), min_size=1, max_size=3)


class CoordinatorMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.h = Harness()
        self.epochs: dict[str, tuple[int, int]] = {}  # id -> (producer id, highest epoch seen)
        self.decided: dict[str, bool] = {}  # id -> commit? for a transaction in Prepare*
        self.stale: dict[str, tuple[int, int]] = {}  # id -> a (pid, epoch) that has been fenced

    # --- the harness's apply, checked ---------------------------------------------------------------------

    def apply(self, result: TxnResult) -> None:
        transit = result.transit
        if transit is None:
            return
        txn = self.h.coordinator.transactions[result.transactional_id]
        before = TxnState.PREPARE_EPOCH_FENCE if txn.fencing else txn.state
        check_transition(before, transit.state)
        self.h.apply(result)
        self._observe(result.transactional_id)

    def _observe(self, txn_id: str) -> None:
        txn = self.h.coordinator.transactions.get(txn_id)
        if txn is None:
            return
        pid, epoch = self.epochs.get(txn_id, (txn.producer_id, -1))
        if pid == txn.producer_id:
            assert txn.producer_epoch >= epoch, (txn_id, epoch, txn.producer_epoch)
        if (pid, epoch) != (txn.producer_id, txn.producer_epoch) and epoch >= 0:
            self.stale[txn_id] = (pid, epoch)
        self.epochs[txn_id] = (txn.producer_id, txn.producer_epoch)
        if txn.state.is_prepare:
            commit = txn.state is TxnState.PREPARE_COMMIT
            assert self.decided.setdefault(txn_id, commit) is commit
        elif txn.state.is_complete and txn_id in self.decided:
            assert (txn.state is TxnState.COMPLETE_COMMIT) is self.decided.pop(txn_id)

    # --- rules --------------------------------------------------------------------------------------------

    @rule(txn_id=IDS, timeout=st.sampled_from([100, 1000, 60_000]))
    def init(self, txn_id: str, timeout: int) -> None:
        self.apply(self.h.coordinator.init_producer_id(txn_id, timeout))

    @rule(txn_id=IDS, partitions=PARTITIONS)
    def add_partitions(self, txn_id: str, partitions: list[tuple[str, int]]) -> None:
        txn = self.h.coordinator.transactions.get(txn_id)
        if txn is not None:
            self.apply(
                self.h.coordinator.add_partitions(txn_id, txn.producer_id, txn.producer_epoch, partitions)
            )

    @rule(txn_id=IDS, commit=st.booleans())
    def end(self, txn_id: str, commit: bool) -> None:
        txn = self.h.coordinator.transactions.get(txn_id)
        if txn is not None:
            was_ongoing = txn.state is TxnState.ONGOING
            result = self.h.coordinator.end_transaction(txn_id, txn.producer_id, txn.producer_epoch, commit)
            if was_ongoing:
                assert result.error == ErrorCode.NONE
            self.apply(result)

    @rule(txn_id=IDS, partitions=PARTITIONS, commit=st.booleans())
    def zombie(self, txn_id: str, partitions: list[tuple[str, int]], commit: bool) -> None:
        if txn_id not in self.stale or txn_id not in self.h.coordinator.transactions:
            return
        pid, epoch = self.stale[txn_id]
        c = self.h.coordinator
        assert c.add_partitions(txn_id, pid, epoch, partitions).transit is None
        assert c.end_transaction(txn_id, pid, epoch, commit).transit is None

    @rule()
    def finish_one_marker_job(self) -> None:
        if self.h.jobs:
            job = self.h.jobs.pop(0)
            result = self.h.coordinator.complete_markers(job)
            if result is not None:
                self.apply(result)

    @rule()
    def timeout_scan(self) -> None:
        for result in self.h.coordinator.abort_timed_out():
            self.apply(result)

    @rule(ms=st.integers(0, 2000))
    def advance(self, ms: int) -> None:
        self.h.clock.advance(ms)

    @rule()
    def crash(self) -> None:
        def snapshot() -> dict[str, tuple[object, ...]]:
            return {
                i: (t.producer_id, t.producer_epoch, t.state, frozenset(t.partitions), t.timeout_ms)
                for i, t in self.h.coordinator.transactions.items()
            }

        before = snapshot()
        self.h.restart()
        assert snapshot() == before
        for txn_id in before:
            self._observe(txn_id)

    @invariant()
    def decided_transactions_have_marker_jobs(self) -> None:
        pending = {job.transactional_id for job in self.h.jobs}
        for txn_id, txn in self.h.coordinator.transactions.items():
            if txn.state.is_prepare:
                assert txn_id in pending


TestCoordinatorMachine = CoordinatorMachine.TestCase
TestCoordinatorMachine.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
