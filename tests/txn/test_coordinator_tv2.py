"""Transaction version 2 (KIP-890 part 2) in the pure coordinator: EndTxn v5 bumps the epoch at every
end, rotates the producer id when the epoch is exhausted, tells a retry of the EndTxn that just ended a
transaction from a stale one, and a delayed or duplicated EndTxn can never end the next transaction
(KAFKA-17754). The checklist of shared/reference/kafka4-protocols.md §4 (KIP-890 TV2), then a Hypothesis
state machine: a TV2 client whose every EndTxn may be delivered again at any later moment."""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from exactly.errors import ErrorCode
from exactly.txn import MarkerJob, TxnResult, TxnState
from exactly.txn.coordinator import TV2
from exactly.txn.metadata import MAX_EPOCH
from exactly.txn.records import TransactionLogValue, decode_value, encode_key, encode_value
from tests.txn.helpers import Harness

S = TxnState
E = ErrorCode
TID = "tv2"


def _started(h: Harness, epoch: int | None = None) -> tuple[int, int]:
    """InitProducerId (optionally from a stored epoch), then an Ongoing TV2 transaction on t-0."""
    if epoch is not None:
        value = TransactionLogValue(77, epoch, 60_000, S.EMPTY, frozenset(), 0, -1)
        h.log.append((encode_key(TID), encode_value(value, 1)))
        h.restart()
    init = h.init(TID)
    assert init.error == E.NONE
    added = add(h, init.producer_id, init.producer_epoch, ("t", 0))
    assert added.error == E.NONE
    return init.producer_id, init.producer_epoch


def add(h: Harness, pid: int, epoch: int, *partitions: tuple[str, int]) -> TxnResult:
    return h.apply(h.coordinator.add_partitions(TID, pid, epoch, partitions, transaction_version=TV2))


def end(h: Harness, pid: int, epoch: int, commit: bool) -> TxnResult:
    return h.apply(h.coordinator.end_transaction(TID, pid, epoch, commit, transaction_version=TV2))


def txn_of(h: Harness) -> tuple[TxnState, int, int]:
    txn = h.coordinator.transactions[TID]
    return txn.state, txn.producer_id, txn.producer_epoch


def test_commit_bumps_the_epoch_and_the_next_transaction_uses_it() -> None:
    h = Harness()
    pid, epoch = _started(h)
    result = end(h, pid, epoch, commit=True)
    assert (result.error, result.producer_id, result.producer_epoch) == (E.NONE, pid, epoch + 1)
    assert [(j.producer_id, j.producer_epoch, j.commit) for j in h.jobs] == [(pid, epoch + 1, True)]
    h.finish_markers()
    assert txn_of(h) == (S.COMPLETE_COMMIT, pid, epoch + 1)
    assert add(h, pid, epoch, ("t", 1)).error == E.PRODUCER_FENCED  # the old epoch is gone
    assert add(h, pid, epoch + 1, ("t", 1)).error == E.NONE
    assert txn_of(h) == (S.ONGOING, pid, epoch + 1)


def test_a_retry_after_complete_commit_gets_the_same_answer_and_writes_nothing() -> None:
    h = Harness()
    pid, epoch = _started(h)
    end(h, pid, epoch, commit=True)
    h.finish_markers()
    records = len(h.log)
    retry = end(h, pid, epoch, commit=True)
    assert (retry.error, retry.transit, retry.producer_id, retry.producer_epoch) == (
        E.NONE,
        None,
        pid,
        epoch + 1,
    )
    assert len(h.log) == records
    assert not h.jobs
    # the other decision with the old epoch is not a retry of anything: an invalid transition
    assert end(h, pid, epoch, commit=False).error == E.INVALID_TXN_STATE


def test_a_retry_while_the_markers_are_written_is_concurrent() -> None:
    h = Harness()
    pid, epoch = _started(h)
    end(h, pid, epoch, commit=True)  # PrepareCommit durable, markers not written
    assert end(h, pid, epoch, commit=True).error == E.CONCURRENT_TRANSACTIONS
    assert end(h, pid, epoch + 1, commit=False).error == E.CONCURRENT_TRANSACTIONS


def test_a_delayed_end_txn_cannot_end_the_next_transaction() -> None:
    """KAFKA-17754: EndTxn(commit) of T1 is delayed, its retry commits T1, T2 begins; the delayed one
    arrives: PRODUCER_FENCED, and T2 stays Ongoing with its partitions."""
    h = Harness()
    pid, epoch = _started(h)
    end(h, pid, epoch, commit=True)
    h.finish_markers()
    add(h, pid, epoch + 1, ("t", 0), ("u", 1))
    before = txn_of(h)
    records = len(h.log)
    for commit in (True, False):
        late = end(h, pid, epoch, commit)
        assert (late.error, late.transit) == (E.PRODUCER_FENCED, None)
    assert txn_of(h) == before
    assert len(h.log) == records
    assert h.coordinator.transactions[TID].partitions == {("t", 0), ("u", 1)}
    # T2 ends as its client decides
    aborted = end(h, pid, epoch + 1, commit=False)
    assert (aborted.error, aborted.producer_epoch) == (E.NONE, epoch + 2)
    h.finish_markers()
    assert txn_of(h) == (S.COMPLETE_ABORT, pid, epoch + 2)
    # a late copy of T1's EndTxn after T2 ended is stale too
    assert end(h, pid, epoch, commit=True).error == E.PRODUCER_FENCED


def test_an_exhausted_epoch_rotates_the_producer_id() -> None:
    h = Harness()
    pid, epoch = _started(h, epoch=MAX_EPOCH - 3)  # InitProducerId bumps it to 32765
    assert epoch == MAX_EPOCH - 2
    first = end(h, pid, epoch, commit=True)
    assert (first.producer_id, first.producer_epoch) == (pid, MAX_EPOCH - 1)
    h.finish_markers()
    add(h, pid, MAX_EPOCH - 1, ("t", 0))
    last = end(h, pid, MAX_EPOCH - 1, commit=True)
    new_pid = last.producer_id
    assert new_pid != pid
    assert last.producer_epoch == 0
    # the markers carry the old producer id at the epoch only the coordinator uses
    assert [(j.producer_id, j.producer_epoch) for j in h.jobs] == [(pid, MAX_EPOCH)]
    txn = h.coordinator.transactions[TID]
    assert (txn.state, txn.next_producer_id) == (S.PREPARE_COMMIT, new_pid)
    # the client starts its next transaction with the new producer id before CompleteCommit: retriable
    assert add(h, new_pid, 0, ("t", 0)).error == E.CONCURRENT_TRANSACTIONS
    h.finish_markers()
    assert txn_of(h) == (S.COMPLETE_COMMIT, new_pid, 0)
    assert h.coordinator.transactions[TID].previous_producer_id == pid
    retry = end(h, pid, MAX_EPOCH - 1, commit=True)
    assert (retry.error, retry.transit, retry.producer_id, retry.producer_epoch) == (E.NONE, None, new_pid, 0)
    assert add(h, new_pid, 0, ("t", 0)).error == E.NONE
    # T2 is Ongoing: its AddPartitions record made the new producer id the previous one too (Kafka's
    # prevProducerId is the id before each transition), so the old id is unknown now
    assert end(h, pid, MAX_EPOCH - 1, commit=True).error == E.INVALID_PRODUCER_ID_MAPPING


def test_an_abort_with_nothing_added_bumps_the_epoch() -> None:
    h = Harness()
    init = h.init(TID)
    pid, epoch = init.producer_id, init.producer_epoch
    assert end(h, pid, epoch, commit=True).error == E.INVALID_TXN_STATE  # commit of nothing
    aborted = end(h, pid, epoch, commit=False)
    assert (aborted.error, aborted.producer_epoch) == (E.NONE, epoch + 1)
    assert h.jobs[0].partitions == frozenset()
    h.finish_markers()
    assert txn_of(h) == (S.COMPLETE_ABORT, pid, epoch + 1)
    # from CompleteAbort at the current epoch: a new empty transaction, not a retry
    again = end(h, pid, epoch + 1, commit=False)
    assert (again.error, again.producer_epoch) == (E.NONE, epoch + 2)
    h.finish_markers()
    # and from CompleteCommit
    add(h, pid, epoch + 2, ("t", 0))
    end(h, pid, epoch + 2, commit=True)
    h.finish_markers()
    assert end(h, pid, epoch + 3, commit=False).producer_epoch == epoch + 4


def test_stale_epoch_and_wrong_producer_id() -> None:
    h = Harness()
    pid, epoch = _started(h)
    assert end(h, pid, epoch - 1, commit=True).error == E.PRODUCER_FENCED
    assert end(h, pid, epoch + 1, commit=True).error == E.PRODUCER_FENCED  # a future epoch
    assert end(h, pid + 1, epoch, commit=True).error == E.INVALID_PRODUCER_ID_MAPPING
    assert h.apply(h.coordinator.end_transaction("nobody", pid, epoch, True, TV2)).error == (
        E.INVALID_PRODUCER_ID_MAPPING
    )


def test_a_tv1_end_txn_keeps_tv1_semantics_on_the_same_coordinator() -> None:
    h = Harness()
    init = h.init(TID)
    h.begin(TID)
    result = h.end(TID, commit=True)  # EndTxn <= v4
    assert result.error == E.NONE
    h.finish_markers()
    txn = h.coordinator.transactions[TID]
    assert (txn.state, txn.producer_epoch, txn.client_transaction_version) == (
        S.COMPLETE_COMMIT,
        init.producer_epoch,
        0,
    )
    assert h.end(TID, commit=True).error == E.NONE  # TV1: a retry at the same epoch


def test_the_log_records_what_kafka_4_records_and_replay_restores_it() -> None:
    h = Harness()
    pid, epoch = _started(h, epoch=MAX_EPOCH - 2)  # InitProducerId: 32766, exhausted
    result = end(h, pid, epoch, commit=False)
    new_pid = result.producer_id
    prepare = decode_value(h.log[-1][1])
    assert prepare is not None
    assert (prepare.state, prepare.producer_id, prepare.producer_epoch) == (S.PREPARE_ABORT, pid, MAX_EPOCH)
    assert (prepare.next_producer_id, prepare.client_transaction_version, prepare.previous_producer_id) == (
        new_pid,
        TV2,
        pid,
    )
    h.restart()  # a crash after PrepareAbort: the markers are owed, the rotation is remembered
    assert [(j.producer_id, j.producer_epoch, j.commit) for j in h.jobs] == [(pid, MAX_EPOCH, False)]
    h.finish_markers()
    complete = decode_value(h.log[-1][1])
    assert complete is not None
    assert (complete.state, complete.producer_id, complete.producer_epoch, complete.next_producer_id) == (
        S.COMPLETE_ABORT,
        new_pid,
        0,
        -1,
    )
    assert (complete.previous_producer_id, complete.client_transaction_version) == (pid, TV2)
    h.restart()
    txn = h.coordinator.transactions[TID]
    assert (
        txn.producer_id,
        txn.producer_epoch,
        txn.previous_producer_id,
        txn.client_transaction_version,
    ) == (
        new_pid,
        0,
        pid,
        TV2,
    )
    # the retry of the overflowing EndTxn is recognised after the restart too
    retry = end(h, pid, MAX_EPOCH - 1, commit=False)
    assert (retry.error, retry.producer_id, retry.producer_epoch) == (E.NONE, new_pid, 0)


def test_the_timeout_of_a_tv2_transaction_fences_beyond_a_retry() -> None:
    h = Harness()
    pid, epoch = _started(h)
    h.clock.advance(61_000)
    for result in h.coordinator.abort_timed_out():
        h.apply(result)
    h.finish_markers()
    assert txn_of(h) == (S.COMPLETE_ABORT, pid, epoch + 2)
    late = end(h, pid, epoch, commit=True)  # the client's EndTxn, sent before the timeout
    assert late.error == E.PRODUCER_FENCED


def test_init_producer_id_on_an_ongoing_tv2_transaction_bumps_once() -> None:
    h = Harness()
    pid, epoch = _started(h)
    fenced = h.init(TID)
    assert fenced.error == E.CONCURRENT_TRANSACTIONS
    assert [(j.producer_epoch, j.commit) for j in h.jobs] == [(epoch + 1, False)]
    h.finish_markers()
    again = h.init(TID)
    assert (again.error, again.producer_id, again.producer_epoch) == (E.NONE, pid, epoch + 2)


# --- the state machine -------------------------------------------------------------------------------------


class DelayedEndTxnMachine(RuleBasedStateMachine):
    """One TV2 client drives transactions; every EndTxn it sent may arrive again at any later moment (a
    delayed or duplicated request); the coordinator may crash (replaying its log) at any moment. Checked:
    a request that arrives again never writes anything and never answers anything but the current producer
    id/epoch; every marker job is the decision the client made for that transaction; the client's producer
    id and epoch always agree with the coordinator's; each end bumps the epoch by one (or rotates the
    producer id at 32766)."""

    def __init__(self) -> None:
        super().__init__()
        self.h = Harness()
        self.pid = self.epoch = -1
        self.in_txn = False
        self.sent: list[tuple[int, int, bool]] = []  # every EndTxn the client sent: (pid, epoch, commit)
        self.decided: dict[tuple[int, int], bool] = {}  # (pid, marker epoch) -> commit
        self.seen_jobs = 0

    @initialize(start=st.sampled_from([None, MAX_EPOCH - 6, MAX_EPOCH - 3]))
    def init(self, start: int | None) -> None:
        if start is not None:
            value = TransactionLogValue(500, start, 60_000, S.EMPTY, frozenset(), 0, -1)
            self.h.log.append((encode_key(TID), encode_value(value, 1)))
            self.h.restart()
        result = self.h.init(TID)
        assert result.error == E.NONE
        self.pid, self.epoch = result.producer_id, result.producer_epoch

    def _check_jobs(self) -> None:
        for job in self.h.jobs:
            self._check_job(job)

    def _check_job(self, job: MarkerJob) -> None:
        assert self.decided.get((job.producer_id, job.producer_epoch)) == job.commit, job

    def _settle(self) -> None:
        self._check_jobs()
        self.h.finish_markers()

    @rule(partitions=st.lists(st.tuples(st.sampled_from(["t", "u"]), st.integers(0, 1)), min_size=1))
    def produce(self, partitions: list[tuple[str, int]]) -> None:
        """Produce v12 to some partitions: the leader adds them (the previous end's markers first)."""
        self._settle()
        result = add(self.h, self.pid, self.epoch, *partitions)
        assert result.error == E.NONE
        self.in_txn = True

    @rule(commit=st.booleans(), settle=st.booleans())
    def end_transaction(self, commit: bool, settle: bool) -> None:
        if not self.in_txn:
            commit = False  # a TV2 client ends a transaction that added nothing with an abort
        if self.h.coordinator.transactions[TID].state.is_prepare:
            self._settle()
        result = end(self.h, self.pid, self.epoch, commit)
        assert result.error == E.NONE, result
        marker_epoch = min(self.epoch + 1, MAX_EPOCH)
        self.decided[(self.pid, marker_epoch)] = commit
        self.sent.append((self.pid, self.epoch, commit))
        if self.epoch >= MAX_EPOCH - 1:
            assert result.producer_id != self.pid
            assert result.producer_epoch == 0
        else:
            assert (result.producer_id, result.producer_epoch) == (self.pid, self.epoch + 1)
        self.pid, self.epoch = result.producer_id, result.producer_epoch
        self.in_txn = False
        if settle:
            self._settle()

    @rule(data=st.data())
    def late_end_txn(self, data: st.DataObject) -> None:
        if not self.sent:
            return
        pid, epoch, commit = data.draw(st.sampled_from(self.sent))
        records, jobs = len(self.h.log), len(self.h.jobs)
        result = self.h.apply(self.h.coordinator.end_transaction(TID, pid, epoch, commit, TV2))
        assert result.transit is None, result
        assert (len(self.h.log), len(self.h.jobs)) == (records, jobs)
        if result.error == E.NONE:  # only the retry of the end that just happened, answered as then
            assert (pid, epoch, commit) == self.sent[-1]
            assert not self.in_txn
            assert (result.producer_id, result.producer_epoch) == (self.pid, self.epoch)
        else:
            assert result.error in (
                E.PRODUCER_FENCED,
                E.INVALID_TXN_STATE,
                E.CONCURRENT_TRANSACTIONS,
                E.INVALID_PRODUCER_ID_MAPPING,
            ), result

    @rule()
    def markers(self) -> None:
        self._settle()

    @rule()
    def crash(self) -> None:
        self.h.restart()
        self._check_jobs()

    @invariant()
    def client_and_coordinator_agree(self) -> None:
        if self.pid < 0:
            return
        txn = self.h.coordinator.transactions[TID]
        if txn.state.is_prepare and txn.next_producer_id >= 0:
            assert (txn.next_producer_id, 0) == (self.pid, self.epoch)
        else:
            assert (txn.producer_id, txn.producer_epoch) == (self.pid, self.epoch)
        assert (txn.state is S.ONGOING) == self.in_txn


TestDelayedEndTxn = DelayedEndTxnMachine.TestCase
TestDelayedEndTxn.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
