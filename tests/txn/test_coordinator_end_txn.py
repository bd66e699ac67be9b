"""EndTxn against every state of a transactional.id: fencing first, and librdkafka's abort of a
transaction whose AddPartitionsToTxn was answered CONCURRENT_TRANSACTIONS (issue 10 item 8)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from exactly.errors import ErrorCode
from exactly.txn import TxnState
from tests.txn.helpers import Harness

E = ErrorCode
S = TxnState
PID = 1000


@pytest.fixture
def h() -> Harness:
    return Harness()


def state(h: Harness) -> TxnState:
    return h.coordinator.transactions["app"].state


def _empty(h: Harness) -> None:
    pass


def _ongoing(h: Harness) -> None:
    h.begin("app")


def _adding(h: Harness) -> None:  # an AddPartitions whose Ongoing record is being appended
    h.begin("app")
    assert h.coordinator.add_partitions("app", PID, 1, [("t", 7)]).transit is not None


def _prepare_commit(h: Harness) -> None:
    h.begin("app")
    h.end("app", True)


def _prepare_abort(h: Harness) -> None:
    h.begin("app")
    h.end("app", False)


def _complete_commit(h: Harness) -> None:
    _prepare_commit(h)
    h.finish_markers()


def _complete_abort(h: Harness) -> None:
    _prepare_abort(h)
    h.finish_markers()


def _fencing(h: Harness) -> None:  # the timeout scan's PrepareEpochFence -> PrepareAbort is pending
    h.begin("app")
    h.clock.advance(61_000)
    [fence] = h.coordinator.abort_timed_out()
    assert fence.producer_epoch == 2


STATES: dict[str, Callable[[Harness], None]] = {
    "Empty": _empty,
    "Ongoing": _ongoing,
    "Ongoing+pending": _adding,
    "PrepareCommit": _prepare_commit,
    "PrepareAbort": _prepare_abort,
    "CompleteCommit": _complete_commit,
    "CompleteAbort": _complete_abort,
    "PrepareEpochFence": _fencing,
}


@pytest.mark.parametrize("commit", [True, False])
@pytest.mark.parametrize("setup", STATES.values(), ids=STATES.keys())
def test_a_fenced_producers_end_txn_is_fenced_before_any_state_check(
    h: Harness, setup: Callable[[Harness], None], commit: bool
) -> None:
    """As Kafka's TransactionCoordinator.endTransaction: producer id, then epoch, then pending, then
    state. The current instance runs at epoch 1; epoch 0 is a zombie, epoch 5 never existed."""
    h.init("app")
    h.init("app")  # a second instance: epoch 1 fences epoch 0
    setup(h)
    before = h.coordinator.transactions["app"].state
    for stale in (0, 5):
        result = h.coordinator.end_transaction("app", PID, stale, commit)
        assert (result.error, result.transit) == (E.PRODUCER_FENCED, None)
    assert h.coordinator.end_transaction("app", PID + 1, 1, commit).error == E.INVALID_PRODUCER_ID_MAPPING
    assert h.coordinator.transactions["app"].state is before  # nothing changed


@pytest.mark.parametrize("commit", [True, False])
def test_either_decision_waits_while_markers_are_written(h: Harness, commit: bool) -> None:
    h.init("app")
    h.begin("app")
    h.end("app", commit)
    for decision in (True, False):
        assert h.coordinator.end_transaction("app", PID, 0, decision).error == E.CONCURRENT_TRANSACTIONS


def test_abort_of_a_transaction_refused_while_the_last_one_completed_is_done(h: Harness) -> None:
    """librdkafka: commit; begin; produce; AddPartitions -> CONCURRENT_TRANSACTIONS (the commit's markers
    are still being written); abort_transaction() sends EndTxn(abort) for a transaction the coordinator
    never started. Kafka answers INVALID_TXN_STATE, fatal for the client; nothing was added, so it is
    done."""
    h.init("app")
    h.begin("app", ("t", 0))
    h.end("app", True)
    assert h.coordinator.add_partitions("app", PID, 0, [("t", 1)]).error == E.CONCURRENT_TRANSACTIONS
    assert h.coordinator.end_transaction("app", PID, 0, False).error == E.CONCURRENT_TRANSACTIONS
    h.finish_markers()
    assert state(h) is S.COMPLETE_COMMIT
    log_before = len(h.log)
    abort = h.coordinator.end_transaction("app", PID, 0, False)
    assert (abort.error, abort.transit) == (E.NONE, None)
    assert state(h) is S.COMPLETE_COMMIT
    assert len(h.log) == log_before  # nothing to write, no markers
    assert h.jobs == []
    # Only that one abort: a second one is a client bug again.
    assert h.coordinator.end_transaction("app", PID, 0, False).error == E.INVALID_TXN_STATE
    # The next transaction starts normally.
    assert h.begin("app", ("t", 1)).error == E.NONE
    assert state(h) is S.ONGOING
    assert h.end("app", False).transit is not None
    assert state(h) is S.PREPARE_ABORT


def test_abort_after_the_clients_own_commit_is_still_invalid(h: Harness) -> None:
    """A commit whose answer was lost, then abort_transaction(): the transaction committed, and the
    client must learn that its abort did not happen (Kafka's INVALID_TXN_STATE)."""
    h.init("app")
    h.begin("app")
    h.end("app", True)
    assert h.coordinator.end_transaction("app", PID, 0, False).error == E.CONCURRENT_TRANSACTIONS
    h.finish_markers()
    assert h.coordinator.end_transaction("app", PID, 0, False).error == E.INVALID_TXN_STATE
    assert h.coordinator.end_transaction("app", PID, 0, True).error == E.NONE  # the retry of the commit


def test_a_refused_add_that_is_retried_starts_the_transaction_and_the_abort_is_real(h: Harness) -> None:
    h.init("app")
    h.begin("app")
    h.end("app", True)
    assert h.coordinator.add_partitions("app", PID, 0, [("t", 1)]).error == E.CONCURRENT_TRANSACTIONS
    h.finish_markers()
    assert h.begin("app", ("t", 1)).error == E.NONE  # the client's retry
    abort = h.end("app", False)
    assert abort.error == E.NONE
    assert abort.transit is not None
    assert abort.transit.state is S.PREPARE_ABORT
    h.finish_markers()
    assert state(h) is S.COMPLETE_ABORT
    # The flag went with the transaction that started: an EndTxn(abort) now is a retry (NONE), and a
    # later commit-then-abort is invalid again.
    h.begin("app")
    h.end("app", True)
    h.finish_markers()
    assert h.coordinator.end_transaction("app", PID, 0, False).error == E.INVALID_TXN_STATE


def test_a_new_epoch_does_not_inherit_a_refused_add(h: Harness) -> None:
    h.init("app")
    h.begin("app")
    h.end("app", True)
    assert h.coordinator.add_partitions("app", PID, 0, [("t", 1)]).error == E.CONCURRENT_TRANSACTIONS
    h.finish_markers()
    h.init("app")  # a new instance, epoch 1
    assert h.coordinator.end_transaction("app", PID, 0, False).error == E.PRODUCER_FENCED
    assert h.coordinator.end_transaction("app", PID, 1, False).error == E.INVALID_TXN_STATE


def test_a_refused_add_within_the_open_transaction_does_not_count(h: Harness) -> None:
    """CONCURRENT_TRANSACTIONS while another AddPartitions of the same transaction is appended: the
    transaction has started, so a later EndTxn(abort) after its commit is still invalid."""
    h.init("app")
    h.begin("app")
    pending = h.coordinator.add_partitions("app", PID, 0, [("t", 2)])
    assert h.coordinator.add_partitions("app", PID, 0, [("t", 3)]).error == E.CONCURRENT_TRANSACTIONS
    h.apply(pending)
    h.end("app", True)
    h.finish_markers()
    assert h.coordinator.end_transaction("app", PID, 0, False).error == E.INVALID_TXN_STATE


def test_a_fenced_producers_refused_add_does_not_count(h: Harness) -> None:
    h.init("app")
    h.begin("app")
    h.end("app", True)
    assert h.coordinator.add_partitions("app", PID, 7, [("t", 1)]).error == E.PRODUCER_FENCED
    h.finish_markers()
    assert h.coordinator.end_transaction("app", PID, 0, False).error == E.INVALID_TXN_STATE
