"""TransactionCoordinator request by request (Kafka's TransactionCoordinator semantics, TV1)."""

from __future__ import annotations

import dataclasses

import pytest

from exactly.errors import ErrorCode
from exactly.txn import MarkerJob, TxnConfig, TxnState
from exactly.txn.records import TransactionLogValue, encode_key, encode_value
from tests.txn.helpers import Harness

E = ErrorCode
S = TxnState


@pytest.fixture
def h() -> Harness:
    return Harness()


def state(h: Harness, txn_id: str = "app") -> TxnState:
    return h.coordinator.transactions[txn_id].state


def test_init_allocates_a_producer_id_at_epoch_zero(h: Harness) -> None:
    result = h.init("app")
    assert (result.error, result.producer_id, result.producer_epoch) == (E.NONE, 1000, 0)
    assert state(h) is S.EMPTY
    assert len(h.log) == 1


def test_reinit_bumps_the_epoch_and_fences_the_old_instance(h: Harness) -> None:
    h.init("app")
    second = h.init("app")
    assert (second.producer_id, second.producer_epoch) == (1000, 1)
    c = h.coordinator
    assert c.add_partitions("app", 1000, 0, [("t", 0)]).error == E.PRODUCER_FENCED
    assert c.end_transaction("app", 1000, 0, True).error == E.PRODUCER_FENCED
    assert c.verify("app", 1000, 0, "t", 0) == E.PRODUCER_FENCED
    assert c.add_partitions("app", 1000, 1, [("t", 0)]).error == E.NONE


@pytest.mark.parametrize("timeout", [0, -1, 900_001])
def test_invalid_timeout(h: Harness, timeout: int) -> None:
    assert h.coordinator.init_producer_id("app", timeout).error == E.INVALID_TRANSACTION_TIMEOUT
    assert "app" not in h.coordinator.transactions


def test_empty_transactional_id_is_invalid(h: Harness) -> None:
    assert h.coordinator.init_producer_id("", 1000).error == E.INVALID_REQUEST


def test_kip360_bump_retry_and_fence(h: Harness) -> None:
    h.init("app")
    bumped = h.init("app", pid=1000, epoch=0)
    assert (bumped.error, bumped.producer_epoch) == (E.NONE, 1)
    retry = h.init("app", pid=1000, epoch=0)  # the response was lost: same epoch again
    assert (retry.error, retry.producer_id, retry.producer_epoch) == (E.NONE, 1000, 1)
    assert h.init("app", pid=1000, epoch=7).error == E.PRODUCER_FENCED
    assert h.init("app", pid=4242, epoch=1).error == E.PRODUCER_FENCED


def test_exhausted_epoch_rotates_the_producer_id(h: Harness) -> None:
    h.coordinator.load_record(
        "app", TransactionLogValue(7, 32766, 60_000, S.COMPLETE_COMMIT, frozenset(), 1, 1)
    )
    result = h.init("app", pid=7, epoch=32766)
    assert (result.error, result.producer_id, result.producer_epoch) == (E.NONE, 1000, 0)
    txn = h.coordinator.transactions["app"]
    assert txn.previous_producer_id == 7
    # a retry with the old (exhausted) id gets the new one again
    retry = h.init("app", pid=7, epoch=32766)
    assert (retry.error, retry.producer_id, retry.producer_epoch) == (E.NONE, 1000, 0)


def test_init_while_ongoing_fences_and_aborts_first(h: Harness) -> None:
    h.init("app")
    h.begin("app", ("t", 0), ("u", 1))
    result = h.init("app")
    assert result.error == E.CONCURRENT_TRANSACTIONS
    assert state(h) is S.PREPARE_ABORT
    assert h.coordinator.transactions["app"].producer_epoch == 1  # fenced at epoch + 1
    [job] = h.jobs
    assert (job.commit, job.producer_epoch, job.partitions) == (False, 1, frozenset({("t", 0), ("u", 1)}))
    assert h.coordinator.init_producer_id("app", 60_000).error == E.CONCURRENT_TRANSACTIONS  # markers pending
    h.finish_markers()
    assert state(h) is S.COMPLETE_ABORT
    again = h.init("app")
    assert (again.error, again.producer_epoch) == (E.NONE, 2)


def test_pending_transition_answers_concurrent_transactions(h: Harness) -> None:
    h.init("app")
    c = h.coordinator
    pending = c.add_partitions("app", 1000, 0, [("t", 0)])  # prepared, not yet appended
    assert pending.transit is not None
    assert c.add_partitions("app", 1000, 0, [("t", 1)]).error == E.CONCURRENT_TRANSACTIONS
    assert c.end_transaction("app", 1000, 0, True).error == E.CONCURRENT_TRANSACTIONS
    assert c.init_producer_id("app", 1000).error == E.CONCURRENT_TRANSACTIONS
    c.abort_transition("app")  # the append failed: nothing changed
    assert state(h) is S.EMPTY
    assert c.transactions["app"].partitions == set()
    h.begin("app")
    assert state(h) is S.ONGOING


def test_add_partitions_accumulates_and_is_idempotent(h: Harness) -> None:
    h.init("app")
    h.clock.advance(5)
    first = h.begin("app", ("t", 0))
    start = h.coordinator.transactions["app"].start_timestamp
    assert first.transit is not None
    h.clock.advance(5)
    h.begin("app", ("t", 1))
    txn = h.coordinator.transactions["app"]
    assert txn.partitions == {("t", 0), ("t", 1)}
    assert txn.start_timestamp == start  # the transaction started with its first partition
    again = h.coordinator.add_partitions("app", 1000, 0, [("t", 1)])
    assert (again.error, again.transit) == (E.NONE, None)  # nothing to write


def test_unknown_id_or_wrong_producer(h: Harness) -> None:
    c = h.coordinator
    assert c.add_partitions("nope", 1, 0, [("t", 0)]).error == E.INVALID_PRODUCER_ID_MAPPING
    assert c.end_transaction("nope", 1, 0, True).error == E.INVALID_PRODUCER_ID_MAPPING
    assert c.verify("nope", 1, 0, "t", 0) == E.INVALID_PRODUCER_ID_MAPPING
    h.init("app")
    assert c.add_partitions("app", 999, 0, [("t", 0)]).error == E.INVALID_PRODUCER_ID_MAPPING


@pytest.mark.parametrize("commit", [True, False])
def test_end_transaction_prepares_then_completes(h: Harness, commit: bool) -> None:
    h.init("app")
    h.begin("app", ("t", 0), ("__consumer_offsets", 7))
    result = h.end("app", commit)
    assert result.error == E.NONE
    assert state(h) is (S.PREPARE_COMMIT if commit else S.PREPARE_ABORT)
    [job] = h.jobs
    assert job.commit is commit
    assert job.partitions == frozenset({("t", 0), ("__consumer_offsets", 7)})
    # While the markers are written, Kafka holds a pending CompleteX: either decision is told to retry.
    assert h.coordinator.end_transaction("app", 1000, 0, commit).error == E.CONCURRENT_TRANSACTIONS
    assert h.coordinator.end_transaction("app", 1000, 0, not commit).error == E.CONCURRENT_TRANSACTIONS
    h.finish_markers()
    assert state(h) is (S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT)
    assert h.coordinator.transactions["app"].partitions == set()
    retry = h.coordinator.end_transaction("app", 1000, 0, commit)
    assert (retry.error, retry.transit) == (E.NONE, None)  # a retry of an ended transaction
    assert h.coordinator.end_transaction("app", 1000, 0, not commit).error == E.INVALID_TXN_STATE


def test_end_transaction_without_a_transaction(h: Harness) -> None:
    h.init("app")
    assert h.coordinator.end_transaction("app", 1000, 0, True).error == E.INVALID_TXN_STATE
    assert h.coordinator.end_transaction("app", 1000, 0, False).error == E.INVALID_TXN_STATE


def test_verify(h: Harness) -> None:
    h.init("app")
    c = h.coordinator
    assert c.verify("app", 1000, 0, "t", 0) == E.INVALID_TXN_STATE  # nothing added yet
    h.begin("app", ("t", 0))
    assert c.verify("app", 1000, 0, "t", 0) == E.NONE
    assert c.verify("app", 1000, 0, "t", 1) == E.INVALID_TXN_STATE
    assert c.verify("app", 1000, 1, "t", 0) == E.PRODUCER_FENCED
    h.end("app", True)
    assert c.verify("app", 1000, 0, "t", 0) == E.INVALID_TXN_STATE  # decided: no more data


def test_timeout_scan_aborts_only_old_ongoing_transactions(h: Harness) -> None:
    h.init("old", timeout_ms=1000)
    h.init("young", timeout_ms=10_000)
    h.init("idle", timeout_ms=1000)
    h.begin("old")
    h.begin("young")
    h.clock.advance(1000)
    assert h.coordinator.abort_timed_out() == []  # not older than the timeout yet
    h.clock.advance(1)
    [result] = h.coordinator.abort_timed_out()
    assert result.transactional_id == "old"
    assert result.transit is not None
    assert (result.transit.state, result.transit.producer_epoch) == (S.PREPARE_ABORT, 1)
    assert h.coordinator.abort_timed_out() == []  # pending: not twice
    h.apply(result)
    h.finish_markers()
    assert state(h, "old") is S.COMPLETE_ABORT
    assert state(h, "young") is S.ONGOING
    # the zombie (epoch 0) is fenced everywhere
    assert h.coordinator.end_transaction("old", 1000, 0, True).error == E.PRODUCER_FENCED


def test_expiry_writes_tombstones_for_idle_ids(h: Harness) -> None:
    h = Harness(TxnConfig(id_expiration_ms=5000))
    h.init("idle")
    h.init("busy")
    h.begin("busy")
    h.clock.advance(5000)
    results = h.coordinator.expire()
    assert [r.transactional_id for r in results] == ["idle"]
    assert results[0].transit is not None
    assert results[0].transit.state is S.DEAD
    h.apply(results[0])
    assert "idle" not in h.coordinator.transactions
    assert h.log[-1] == (h.log[-1][0], None)  # a tombstone
    h.restart()
    assert "idle" not in h.coordinator.transactions
    assert state(h, "busy") is S.ONGOING


def test_restart_resumes_decided_transactions(h: Harness) -> None:
    h.init("app")
    h.begin("app", ("t", 0), ("t", 1))
    h.end("app", True)
    h.restart()  # crashed after PrepareCommit, before CompleteCommit
    assert state(h) is S.PREPARE_COMMIT
    [job] = h.jobs
    assert (job.commit, job.partitions) == (True, frozenset({("t", 0), ("t", 1)}))
    h.finish_markers()
    assert state(h) is S.COMPLETE_COMMIT


def test_restart_keeps_ongoing_transactions_for_the_timeout_scan(h: Harness) -> None:
    h.init("app", timeout_ms=1000)
    h.begin("app")
    h.restart()
    assert state(h) is S.ONGOING
    assert h.jobs == []
    h.clock.advance(1001)
    assert [r.transactional_id for r in h.coordinator.abort_timed_out()] == ["app"]


def test_list_transactions_filters(h: Harness) -> None:
    h.init("a")
    h.init("b")
    h.begin("b")
    c = h.coordinator
    assert {t.transactional_id for t in c.list_transactions()} == {"a", "b"}
    assert [t.transactional_id for t in c.list_transactions(states=["Ongoing"])] == ["b"]
    assert [t.transactional_id for t in c.list_transactions(producer_ids=[1000])] == ["a"]
    h.clock.advance(100)
    assert {t.transactional_id for t in c.list_transactions(min_duration_ms=50)} == {"a", "b"}
    assert [t.transactional_id for t in c.list_transactions(min_duration_ms=10**9)] == ["a"]  # start -1


# --- InitProducerId edge cases ----------------------------------------------------------------------------


def loaded(h: Harness, txn_id: str, pid: int, epoch: int, st: TxnState, *parts: tuple[str, int]) -> None:
    """An id as a record of `__transaction_state` left it (also written to the harness's log)."""
    value = TransactionLogValue(pid, epoch, 60_000, st, frozenset(parts), h.clock.milliseconds(), 0)
    h.log.append((encode_key(txn_id), encode_value(value)))
    h.coordinator.load_record(txn_id, value)


@pytest.mark.parametrize("timeout", [1, 900_000])
def test_timeout_bounds_are_inclusive(h: Harness, timeout: int) -> None:
    assert h.init("app", timeout_ms=timeout).error == E.NONE
    assert h.coordinator.transactions["app"].timeout_ms == timeout


def test_reinit_takes_the_new_timeout(h: Harness) -> None:
    h.init("app", timeout_ms=1000)
    h.init("app", timeout_ms=2000)
    assert h.coordinator.transactions["app"].timeout_ms == 2000


def test_kip360_new_id_with_an_expected_producer_accepts_it(h: Harness) -> None:
    """A producer recovering from UNKNOWN_PRODUCER_ID on a coordinator that forgot the id."""
    result = h.init("app", pid=77, epoch=5)
    assert (result.error, result.producer_id, result.producer_epoch) == (E.NONE, 1000, 0)


def test_kip360_bump_records_the_last_epoch_and_a_new_instance_clears_it(h: Harness) -> None:
    h.init("app")
    h.init("app", pid=1000, epoch=0)
    assert h.coordinator.transactions["app"].last_producer_epoch == 0
    h.init("app")  # a new instance: no retry of the old bump may succeed any more
    txn = h.coordinator.transactions["app"]
    assert (txn.producer_epoch, txn.last_producer_epoch) == (2, -1)
    assert h.init("app", pid=1000, epoch=0).error == E.PRODUCER_FENCED


def test_kip360_retry_after_a_restart_is_fenced(h: Harness) -> None:
    """The last epoch is not in the record (Kafka's TV1): a retry spanning a restart is fenced."""
    h.init("app")
    h.init("app", pid=1000, epoch=0)
    h.restart()
    assert h.coordinator.transactions["app"].last_producer_epoch == -1
    assert h.init("app", pid=1000, epoch=0).error == E.PRODUCER_FENCED
    assert h.init("app", pid=1000, epoch=1).producer_epoch == 2


def test_epoch_32765_bumps_to_32766_then_rotates(h: Harness) -> None:
    loaded(h, "app", 7, 32765, S.EMPTY)
    assert h.init("app").producer_epoch == 32766
    result = h.init("app")
    assert (result.producer_id, result.producer_epoch) == (1000, 0)
    txn = h.coordinator.transactions["app"]
    assert (txn.previous_producer_id, txn.last_producer_epoch) == (7, -1)


def test_exhausted_epoch_without_expected_rotates_and_the_old_id_is_fenced(h: Harness) -> None:
    loaded(h, "app", 7, 32766, S.COMPLETE_ABORT)
    result = h.init("app")
    assert (result.error, result.producer_id, result.producer_epoch) == (E.NONE, 1000, 0)
    assert h.coordinator.transactions["app"].previous_producer_id == 7
    # the (7, 32766) instance did not ask for this rotation: its KIP-360 init is fenced
    assert h.init("app", pid=7, epoch=32766).error == E.PRODUCER_FENCED
    assert h.coordinator.add_partitions("app", 7, 32766, [("t", 0)]).error == E.INVALID_PRODUCER_ID_MAPPING


def test_exhausted_epoch_with_a_stale_expected_epoch_is_fenced(h: Harness) -> None:
    loaded(h, "app", 7, 32766, S.EMPTY)
    assert h.init("app", pid=7, epoch=100).error == E.PRODUCER_FENCED
    assert h.init("app", pid=8, epoch=32766).error == E.PRODUCER_FENCED
    assert h.coordinator.transactions["app"].producer_id == 7


def test_init_while_prepared_answers_concurrent_transactions(h: Harness) -> None:
    h.init("app")
    h.begin("app")
    h.end("app", True)
    result = h.coordinator.init_producer_id("app", 60_000)
    assert (result.error, result.transit) == (E.CONCURRENT_TRANSACTIONS, None)
    h.finish_markers()
    assert state(h) is S.COMPLETE_COMMIT  # the decision stands
    assert h.init("app").producer_epoch == 1


def test_fence_append_failure_changes_nothing(h: Harness) -> None:
    h.init("app")
    h.begin("app")
    fence = h.coordinator.init_producer_id("app", 60_000)
    assert fence.transit is not None
    txn = h.coordinator.transactions["app"]
    assert txn.pending_state is S.PREPARE_EPOCH_FENCE
    assert h.coordinator.add_partitions("app", 1000, 0, [("u", 0)]).error == E.CONCURRENT_TRANSACTIONS
    h.coordinator.abort_transition("app")
    assert (txn.state, txn.producer_epoch, txn.fencing) == (S.ONGOING, 0, False)
    assert txn.pending is None
    again = h.init("app")  # the fence is tried again, with the same bumped epoch
    assert again.transit is not None
    assert (again.error, again.transit.state, again.transit.producer_epoch) == (
        E.CONCURRENT_TRANSACTIONS,
        S.PREPARE_ABORT,
        1,
    )


def test_new_id_append_failure_keeps_the_id(h: Harness) -> None:
    result = h.coordinator.init_producer_id("app", 60_000)
    h.coordinator.abort_transition("app")
    txn = h.coordinator.transactions["app"]
    assert (txn.producer_id, txn.producer_epoch, txn.pending) == (result.producer_id, -1, None)
    retry = h.init("app")
    assert (retry.producer_id, retry.producer_epoch) == (result.producer_id, 0)  # same id, not a new one


# --- AddPartitions / EndTxn edge cases -------------------------------------------------------------------


def test_add_partitions_after_a_completed_transaction_starts_a_new_one(h: Harness) -> None:
    h.init("app")
    h.begin("app", ("t", 0))
    h.end("app", False)
    h.finish_markers()
    h.clock.advance(10)
    result = h.begin("app", ("t", 0))  # same partition as before: still a new transaction
    assert result.transit is not None
    txn = h.coordinator.transactions["app"]
    assert (txn.state, txn.partitions, txn.start_timestamp) == (S.ONGOING, {("t", 0)}, h.clock.milliseconds())


def test_add_partitions_while_prepared_answers_concurrent_transactions(h: Harness) -> None:
    h.init("app")
    h.begin("app")
    h.end("app", True)
    assert h.coordinator.add_partitions("app", 1000, 0, [("t", 0)]).error == E.CONCURRENT_TRANSACTIONS
    assert h.coordinator.add_partitions("app", 1000, 0, [("t", 9)]).error == E.CONCURRENT_TRANSACTIONS


def test_end_transaction_errors_come_in_kafkas_order(h: Harness) -> None:
    h.init("app")
    h.begin("app")
    c = h.coordinator
    pending = c.add_partitions("app", 1000, 0, [("t", 5)])
    assert pending.transit is not None
    assert c.end_transaction("app", 999, 0, True).error == E.INVALID_PRODUCER_ID_MAPPING
    assert c.end_transaction("app", 1000, 3, True).error == E.PRODUCER_FENCED
    assert c.end_transaction("app", 1000, 0, True).error == E.CONCURRENT_TRANSACTIONS


def test_marker_job_carries_the_coordinator_epoch(h: Harness) -> None:
    h = Harness(TxnConfig(coordinator_epoch=4))
    h.init("app")
    h.begin("app", ("t", 1))
    h.end("app", True)
    [job] = h.jobs
    assert (job.transactional_id, job.producer_id, job.producer_epoch, job.coordinator_epoch) == (
        "app",
        1000,
        0,
        4,
    )


def test_complete_markers_ignores_stale_jobs(h: Harness) -> None:
    h.init("app")
    h.begin("app")
    h.end("app", True)
    [job] = h.jobs
    h.finish_markers()
    assert h.coordinator.complete_markers(job) is None  # already complete
    assert h.coordinator.complete_markers(dataclasses.replace(job, transactional_id="gone")) is None
    h.begin("app")
    h.end("app", False)
    assert h.coordinator.complete_markers(dataclasses.replace(h.jobs[0], producer_epoch=9)) is None
    first = h.coordinator.complete_markers(h.jobs[0])
    assert first is not None
    assert h.coordinator.complete_markers(h.jobs[0]) is None  # CompleteAbort is pending


# --- verify -----------------------------------------------------------------------------------------------


def test_verify_after_reinit_and_rotation(h: Harness) -> None:
    h.init("app")
    h.begin("app", ("t", 0))
    h.end("app", False)
    h.finish_markers()
    assert h.coordinator.verify("app", 1000, 0, "t", 0) == E.INVALID_TXN_STATE  # the partition left
    h.init("app")
    assert h.coordinator.verify("app", 1000, 0, "t", 0) == E.PRODUCER_FENCED
    assert h.coordinator.verify("app", 1001, 1, "t", 0) == E.INVALID_PRODUCER_ID_MAPPING


# --- timeouts and expiry ----------------------------------------------------------------------------------


def test_abort_timed_out_takes_an_explicit_now_and_skips_pending(h: Harness) -> None:
    h.init("a", timeout_ms=100)
    h.init("b", timeout_ms=100)
    h.begin("a")
    h.begin("b")
    start = h.clock.milliseconds()
    assert h.coordinator.abort_timed_out(now=start + 100) == []
    pending = h.coordinator.add_partitions("b", 1001, 0, [("u", 0)])  # b's append is in flight
    assert pending.transit is not None
    [result] = h.coordinator.abort_timed_out(now=start + 101)
    assert result.transactional_id == "a"
    assert result.error == E.NONE
    assert result.transit is not None
    assert result.transit.partitions == frozenset({("t", 0)})


def test_timed_out_abort_then_the_producer_reinitializes(h: Harness) -> None:
    h.init("app", timeout_ms=100)
    h.begin("app")
    h.clock.advance(101)
    for result in h.coordinator.abort_timed_out():
        h.apply(result)
    h.finish_markers()
    txn = h.coordinator.transactions["app"]
    assert (txn.state, txn.producer_epoch) == (S.COMPLETE_ABORT, 1)
    assert h.coordinator.add_partitions("app", 1000, 0, [("t", 0)]).error == E.PRODUCER_FENCED
    assert h.init("app", pid=1000, epoch=0).error == E.PRODUCER_FENCED  # KIP-360 with the fenced epoch
    assert h.init("app").producer_epoch == 2


@pytest.mark.parametrize(
    ("st", "expires"),
    [
        (S.EMPTY, True),
        (S.COMPLETE_COMMIT, True),
        (S.COMPLETE_ABORT, True),
        (S.ONGOING, False),
        (S.PREPARE_COMMIT, False),
        (S.PREPARE_ABORT, False),
    ],
)
def test_expiry_by_state(st: TxnState, expires: bool) -> None:
    h = Harness(TxnConfig(id_expiration_ms=1000))
    parts = () if st in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT) else (("t", 0),)
    loaded(h, "app", 7, 3, st, *parts)  # last updated now
    h.clock.advance(999)
    assert h.coordinator.expire() == []
    h.clock.advance(1)  # idle for exactly transactional.id.expiration.ms
    results = h.coordinator.expire()
    assert [r.transactional_id for r in results] == (["app"] if expires else [])
    if expires:
        [result] = results
        assert result.transit is not None
        assert (result.transit.state, result.transit.producer_id) == (S.DEAD, 7)
        assert h.coordinator.expire() == []  # pending: once
        assert h.coordinator.init_producer_id("app", 1000).error == E.CONCURRENT_TRANSACTIONS
        h.apply(result)
        assert "app" not in h.coordinator.transactions
        fresh = h.init("app")  # a new life: a new producer id
        assert (fresh.producer_id, fresh.producer_epoch) == (1000, 0)


def test_expiry_append_failure_keeps_the_id(h: Harness) -> None:
    h = Harness(TxnConfig(id_expiration_ms=10))
    h.init("app")
    h.clock.advance(10)
    [result] = h.coordinator.expire()
    assert result.transit is not None
    h.coordinator.abort_transition("app")
    assert state(h) is S.EMPTY
    assert h.coordinator.transactions["app"].pending is None
    assert h.init("app").producer_epoch == 1


def test_activity_postpones_expiry(h: Harness) -> None:
    h = Harness(TxnConfig(id_expiration_ms=1000))
    h.init("app")
    h.clock.advance(600)
    h.begin("app")
    h.end("app", True)
    h.finish_markers()
    h.clock.advance(600)
    assert h.coordinator.expire() == []
    h.clock.advance(400)
    assert [r.transactional_id for r in h.coordinator.expire()] == ["app"]


# --- loading ----------------------------------------------------------------------------------------------


def test_load_record_replays_a_sequence_and_a_tombstone(h: Harness) -> None:
    c = h.coordinator
    c.load_record("app", TransactionLogValue(7, 0, 1000, S.EMPTY, frozenset(), 1, -1))
    c.load_record("app", TransactionLogValue(7, 0, 1000, S.ONGOING, frozenset({("t", 0)}), 2, 2))
    c.load_record("app", TransactionLogValue(7, 0, 1000, S.ONGOING, frozenset({("t", 0), ("u", 1)}), 3, 2))
    txn = c.transactions["app"]
    assert (txn.producer_id, txn.producer_epoch, txn.timeout_ms, txn.state) == (7, 0, 1000, S.ONGOING)
    assert (txn.partitions, txn.start_timestamp, txn.last_update_timestamp) == ({("t", 0), ("u", 1)}, 2, 3)
    c.load_record("other", TransactionLogValue(8, 2, 1000, S.COMPLETE_ABORT, frozenset(), 3, 2))
    c.load_record("app", None)
    assert set(c.transactions) == {"other"}
    c.load_record("never-seen", None)  # a tombstone for an unknown id is fine
    c.load_record("app", TransactionLogValue(9, 0, 1000, S.EMPTY, frozenset(), 4, -1))
    assert c.transactions["app"].producer_id == 9


@pytest.mark.parametrize("commit", [True, False])
def test_pending_marker_jobs_after_loading_a_prepared_record(h: Harness, commit: bool) -> None:
    c = h.coordinator
    c.load_record("idle", TransactionLogValue(6, 0, 1000, S.COMPLETE_COMMIT, frozenset(), 1, 1))
    c.load_record("busy", TransactionLogValue(5, 0, 1000, S.ONGOING, frozenset({("t", 0)}), 1, 1))
    st = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
    c.load_record("app", TransactionLogValue(7, 3, 1000, st, frozenset({("t", 0), ("u", 2)}), 2, 1))
    [job] = c.pending_marker_jobs()
    assert job == MarkerJob("app", 7, 3, commit, 0, frozenset({("t", 0), ("u", 2)}))
    result = c.complete_markers(job)
    assert result is not None
    assert result.transit is not None
    assert result.transit.state is (S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT)
    assert result.transit.partitions == frozenset()
    h.apply(result)
    assert list(c.pending_marker_jobs()) == []


def test_load_record_drops_a_pending_transition(h: Harness) -> None:
    h.init("app")
    h.init("app", pid=1000, epoch=0)
    pending = h.coordinator.add_partitions("app", 1000, 1, [("t", 0)])
    assert pending.transit is not None
    h.coordinator.load_record("app", TransactionLogValue(1000, 1, 60_000, S.EMPTY, frozenset(), 5, -1))
    txn = h.coordinator.transactions["app"]
    assert (txn.pending, txn.fencing, txn.last_producer_epoch, txn.state) == (None, False, -1, S.EMPTY)


def test_restart_replays_the_encoded_log_exactly(h: Harness) -> None:
    h.init("a")
    h.init("b", timeout_ms=5000)
    h.begin("a", ("t", 0))
    h.clock.advance(7)
    h.begin("b", ("u", 1), ("u", 2))
    h.end("b", False)

    def snapshot(h: Harness) -> dict[str, tuple[object, ...]]:
        return {
            i: (
                t.producer_id,
                t.producer_epoch,
                t.timeout_ms,
                t.state,
                frozenset(t.partitions),
                t.start_timestamp,
                t.last_update_timestamp,
            )
            for i, t in h.coordinator.transactions.items()
        }

    before = snapshot(h)
    h.restart()
    assert snapshot(h) == before
    assert [j.transactional_id for j in h.jobs] == ["b"]


# --- Kafka's edge cases: exhausted epochs, fencing and producer-id rotation ----------------------------


def test_fencing_at_an_exhausted_epoch_uses_the_reserved_epoch(h: Harness) -> None:
    loaded(h, "app", 7, 32766, S.ONGOING, ("t", 0))
    fence = h.init("app")  # a new instance finds the old one's transaction open
    assert fence.error == E.CONCURRENT_TRANSACTIONS
    h.finish_markers()
    # the old instance (7, 32766) must be fenced now, as it is for any other epoch
    assert h.coordinator.add_partitions("app", 7, 32766, [("t", 0)]).error == E.PRODUCER_FENCED
    retry = h.init("app")
    assert (retry.producer_id, retry.producer_epoch) == (1000, 0)


def test_timeout_at_an_exhausted_epoch_fences(h: Harness) -> None:
    loaded(h, "app", 7, 32766, S.ONGOING, ("t", 0))
    h.clock.advance(60_001)
    [result] = h.coordinator.abort_timed_out()
    assert result.transit is not None
    assert result.transit.producer_epoch == 32767


def test_fence_clears_the_last_epoch(h: Harness) -> None:
    h.init("app")
    h.init("app", pid=1000, epoch=0)  # KIP-360 bump: epoch 1, last epoch 0
    h.begin("app")
    assert h.init("app").error == E.CONCURRENT_TRANSACTIONS  # a new instance fences (epoch 2) and aborts
    h.finish_markers()
    # the epoch-0 instance must not be handed the fenced epoch 2 as a "retry"
    assert h.init("app", pid=1000, epoch=0).error == E.PRODUCER_FENCED


def test_old_producer_id_cannot_fence_the_rotated_producers_transaction(h: Harness) -> None:
    loaded(h, "app", 7, 32766, S.COMPLETE_COMMIT)
    h.init("app")  # a new instance: rotated to (1000, 0)
    h.begin("app")
    zombie = h.coordinator.init_producer_id("app", 60_000, 7, 32766)
    assert (zombie.error, zombie.transit) == (E.PRODUCER_FENCED, None)
