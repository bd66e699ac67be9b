"""TransactionCoordinator request by request (Kafka's TransactionCoordinator semantics, TV1)."""

from __future__ import annotations

import pytest

from exactly.errors import ErrorCode
from exactly.txn import TxnConfig, TxnState
from exactly.txn.records import TransactionLogValue
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
    assert h.coordinator.end_transaction("app", 1000, 0, commit).error == E.CONCURRENT_TRANSACTIONS
    assert h.coordinator.end_transaction("app", 1000, 0, not commit).error == E.INVALID_TXN_STATE
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
