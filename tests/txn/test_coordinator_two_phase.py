"""The coordinator's two-phase commit extension (docs/two-phase-commit.md): PrepareTxn, CommitBatch,
AbortBatch, the safety timeout, and recovery from a crash at every step of a decision."""

from __future__ import annotations

import pytest

from exactly.errors import ErrorCode
from exactly.txn import TxnConfig, TxnState
from exactly.txn.decisions import BatchDecisionRecord
from tests.txn.helpers import Harness

E = ErrorCode
S = TxnState


@pytest.fixture
def h() -> Harness:
    return Harness()


def states(h: Harness, *ids: str) -> list[TxnState]:
    return [h.state(i) for i in ids]


def ended(h: Harness) -> None:
    """Every marker job runs to completion."""
    h.finish_markers()


# --- PrepareTxn -----------------------------------------------------------------------------------------


def test_prepare_moves_ongoing_to_prepared_with_its_tag(h: Harness) -> None:
    h.clock.advance(5)
    result = h.task("t1", "q", 3, 2)
    assert result.error == E.NONE
    txn = h.coordinator.transactions["t1"]
    assert txn.state is S.PREPARED
    assert txn.prepared is not None
    assert (txn.prepared.query_id, txn.prepared.batch_id, txn.prepared.partition) == ("q", 3, 2)
    assert txn.prepared.prepared_timestamp_ms == h.clock.milliseconds()
    assert txn.partitions == {("out", 2)}


def test_prepare_again_with_the_same_tag_is_a_retry_and_with_another_is_refused(h: Harness) -> None:
    h.task("t1", "q", 3, 2)
    records = len(h.log)
    assert h.coordinator.prepare("t1", "q", 3, 2).error == E.NONE
    assert h.coordinator.prepare("t1", "q", 4, 2).error == E.INVALID_TXN_STATE
    assert len(h.log) == records


@pytest.mark.parametrize(
    ("setup", "error"),
    [
        (lambda h: None, E.TRANSACTIONAL_ID_NOT_FOUND),
        (lambda h: h.init("t1"), E.INVALID_TXN_STATE),  # Empty: nothing to prepare
        (lambda h: (h.init("t1"), h.begin("t1"), h.end("t1", True)), E.INVALID_TXN_STATE),  # PrepareCommit
    ],
)
def test_prepare_needs_an_ongoing_transaction(h: Harness, setup: object, error: ErrorCode) -> None:
    setup(h)  # type: ignore[operator]
    assert h.coordinator.prepare("t1", "q", 0, 0).error == error


def test_prepare_with_bad_arguments_is_an_invalid_request(h: Harness) -> None:
    h.init("t1")
    h.begin("t1")
    for args in (("", "q", 0, 0), ("t1", "", 0, 0), ("t1", "q", -1, 0), ("t1", "q", 0, -1)):
        assert h.coordinator.prepare(*args).error == E.INVALID_REQUEST
    assert h.state("t1") is S.ONGOING


def test_a_prepared_transaction_refuses_the_producer(h: Harness) -> None:
    h.task("t1", "q", 0)
    txn = h.coordinator.transactions["t1"]
    pid, epoch = txn.producer_id, txn.producer_epoch
    assert h.coordinator.end_transaction("t1", pid, epoch, True).error == E.INVALID_TXN_STATE
    assert h.coordinator.end_transaction("t1", pid, epoch, False).error == E.INVALID_TXN_STATE
    assert h.coordinator.add_partitions("t1", pid, epoch, [("other", 0)]).error == E.INVALID_TXN_STATE
    assert h.coordinator.verify("t1", pid, epoch, "other", 0) == E.INVALID_TXN_STATE
    # a new producer instance with the same id waits for the decision; it never aborts it
    assert h.coordinator.init_producer_id("t1", 60_000).error == E.CONCURRENT_TRANSACTIONS
    assert h.state("t1") is S.PREPARED


# --- timeouts --------------------------------------------------------------------------------------------


def test_transaction_timeout_does_not_abort_prepared_but_the_safety_timeout_does() -> None:
    h = Harness(TxnConfig(prepared_max_age_ms=100_000))
    h.init("open", timeout_ms=1000)
    h.begin("open")
    h.task("prep", "q", 0)  # timeout 60 s
    h.clock.advance(70_000)
    aborted = [h.apply(r) for r in h.coordinator.abort_timed_out()]
    assert [r.transactional_id for r in aborted] == ["open"]
    assert h.state("prep") is S.PREPARED
    h.clock.advance(30_001)
    aborted = [h.apply(r) for r in h.coordinator.abort_timed_out()]
    assert [r.transactional_id for r in aborted] == ["prep"]
    assert h.state("prep") is S.PREPARE_ABORT
    assert aborted[0].producer_epoch == 1  # fenced: epoch + 1
    ended(h)
    assert h.state("prep") is S.COMPLETE_ABORT


def test_safety_timeout_minus_one_never_aborts() -> None:
    h = Harness(TxnConfig(prepared_max_age_ms=-1))
    h.task("prep", "q", 0)
    h.clock.advance(10**12)
    assert h.coordinator.abort_timed_out() == []


# --- CommitBatch -----------------------------------------------------------------------------------------


def test_commit_batch_commits_winners_and_aborts_every_other_attempt(h: Harness) -> None:
    h.task("w0", "q", 1, 0)
    h.task("w1", "q", 1, 1)
    h.task("retry-loser", "q", 1, 1)
    h.task("old-undecided", "q", 0, 0)  # an earlier batch never decided (driver died)
    h.task("next", "q", 2, 0)  # a later batch: untouched
    h.task("other-query", "p", 1, 0)
    result = h.commit_batch("q", 1, ["w0", "w1"])
    assert (result.error, result.already_decided, result.record) == (E.NONE, False, True)
    assert result.decision is not None
    assert result.decision.winners == ("w0", "w1")
    assert states(h, "w0", "w1") == [S.PREPARE_COMMIT] * 2
    assert states(h, "retry-loser", "old-undecided") == [S.PREPARE_ABORT] * 2
    assert states(h, "next", "other-query") == [S.PREPARED] * 2
    assert h.coordinator.decisions.decided_hw("q") == 1
    ended(h)
    assert (
        states(h, "w0", "w1", "retry-loser", "old-undecided")
        == [S.COMPLETE_COMMIT] * 2 + [S.COMPLETE_ABORT] * 2
    )
    committed = {job.transactional_id for job in h.coordinator.pending_marker_jobs()}
    assert committed == set()


def test_commit_batch_twice_answers_the_stored_decision(h: Harness) -> None:
    h.task("w0", "q", 1, 0)
    h.commit_batch("q", 1, ["w0"])
    records = len(h.log)
    h.task("replayed", "q", 1, 0)  # impossible after the decision: refused (see zombie test)
    again = h.commit_batch("q", 1, ["replayed"])
    assert (again.error, again.already_decided, again.record) == (E.NONE, True, False)
    assert again.decision is not None
    assert again.decision.winners == ("w0",)
    assert len(h.log) == records + 3  # only the replayed task's own records (init, begin, its abort)


def test_commit_batch_with_a_winner_that_is_not_prepared_for_it_decides_nothing(h: Harness) -> None:
    h.task("good", "q", 1, 0)
    h.task("elsewhere", "q", 2, 0)
    h.init("open")
    h.begin("open")
    for bad, why in (("open", "Ongoing"), ("elsewhere", "('q', 2)"), ("ghost", "unknown")):
        result = h.coordinator.commit_batch("q", 1, ["good", bad])
        assert result.error == E.INVALID_TXN_STATE
        assert result.message is not None
        assert why in result.message
        assert repr(bad) in result.message
        assert not result.record
    assert h.coordinator.decisions.get("q", 1) is None
    assert states(h, "good", "elsewhere", "open") == [S.PREPARED, S.PREPARED, S.ONGOING]


def test_commit_batch_rejects_bad_arguments(h: Harness) -> None:
    h.task("a", "q", 1)
    for args in (("", 1, ["a"]), ("q", -1, ["a"]), ("q", 1, ["a", "a"]), ("q", 1, [""])):
        assert h.coordinator.commit_batch(*args).error == E.INVALID_REQUEST  # type: ignore[arg-type]


def test_an_empty_batch_is_decided_and_aborts_its_attempts(h: Harness) -> None:
    h.task("stray", "q", 1)
    h.commit_batch("q", 1, [])
    assert h.state("stray") is S.PREPARE_ABORT


def test_an_undecided_batch_older_than_a_decided_one_cannot_be_decided(h: Harness) -> None:
    h.task("b2", "q", 2)
    h.commit_batch("q", 2, ["b2"])
    result = h.coordinator.commit_batch("q", 1, [])
    assert result.error == E.INVALID_TXN_STATE
    assert h.coordinator.decisions.get("q", 1) is None


def test_a_concurrent_commit_of_the_same_batch_waits_for_the_record(h: Harness) -> None:
    h.task("a", "q", 1)
    first = h.coordinator.commit_batch("q", 1, ["a"])
    assert first.record
    assert h.coordinator.commit_batch("q", 1, ["a"]).error == E.CONCURRENT_TRANSACTIONS
    assert h.coordinator.abort_batch("q", 1).error == E.CONCURRENT_TRANSACTIONS
    assert first.decision is not None
    h.coordinator.abort_decision(first.decision)  # the append failed: nothing decided
    assert h.coordinator.decisions.get("q", 1) is None
    assert h.state("a") is S.PREPARED
    assert h.commit_batch("q", 1, ["a"]).record


def test_zombie_prepare_after_the_decision_is_fenced_and_aborted(h: Harness) -> None:
    h.task("w", "q", 4)
    h.commit_batch("q", 4, ["w"])
    for zombie, batch in (("late", 4), ("older", 3)):
        h.init(zombie)
        h.begin(zombie)
        epoch = h.coordinator.transactions[zombie].producer_epoch
        result = h.prepare(zombie, "q", batch)
        assert result.error == E.PRODUCER_FENCED
        assert h.state(zombie) is S.PREPARE_ABORT
        assert h.coordinator.transactions[zombie].producer_epoch == epoch + 1
    assert h.coordinator.prepare("fresh", "q", 5, 0).error == E.TRANSACTIONAL_ID_NOT_FOUND
    h.init("fresh")
    h.begin("fresh")
    assert h.prepare("fresh", "q", 5).error == E.NONE  # a later batch is fine


def test_a_prepare_that_lands_while_its_batch_is_decided_is_settled(h: Harness) -> None:
    """The prepare was checked before the decision and its record applied after it: `settle` (which the
    broker calls after every prepare) owes it an abort."""
    h.task("w", "q", 1)
    h.init("slow")
    h.begin("slow")
    pending = h.coordinator.prepare("slow", "q", 1, 0)  # record in flight
    h.commit_batch("q", 1, ["w"])
    h.apply(pending)
    assert h.state("slow") is S.PREPARED
    owed = h.coordinator.settle("slow")
    assert owed is not None
    h.apply(owed)
    assert h.state("slow") is S.PREPARE_ABORT


# --- AbortBatch ------------------------------------------------------------------------------------------


def test_abort_batch_aborts_the_undecided_batch_only(h: Harness) -> None:
    h.task("a0", "q", 1, 0)
    h.task("a1", "q", 1, 1)
    h.task("b", "q", 2, 0)
    result = h.abort_batch("q", 1)
    assert (result.error, result.decision) == (E.NONE, None)
    assert sorted(r.transactional_id for r in result.aborts) == ["a0", "a1"]
    assert states(h, "a0", "a1", "b") == [S.PREPARE_ABORT, S.PREPARE_ABORT, S.PREPARED]
    assert h.coordinator.decisions.get("q", 1) is None  # not a decision: the batch may be retried
    h.task("retry", "q", 1, 0)
    assert h.commit_batch("q", 1, ["retry"]).record


def test_abort_batch_after_the_decision_rolls_forward(h: Harness) -> None:
    h.task("w", "q", 1)
    h.commit_batch("q", 1, ["w"], transitions=0)  # decided; no transition yet
    result = h.abort_batch("q", 1)
    assert result.already_decided
    assert result.aborts == ()
    assert h.state("w") is S.PREPARED  # left for the re-drive, which commits it
    for owed in h.coordinator.redrive("q"):
        h.apply(owed)
    assert h.state("w") is S.PREPARE_COMMIT


def test_abort_query_aborts_every_undecided_batch(h: Harness) -> None:
    h.task("d", "q", 1)
    h.commit_batch("q", 1, ["d"], transitions=0)
    h.task("u2", "q", 2)
    h.task("u3", "q", 3)
    h.task("other", "p", 2)
    result = h.abort_batch("q", -1)
    assert sorted(r.transactional_id for r in result.aborts) == ["u2", "u3"]
    assert states(h, "d", "other") == [S.PREPARED, S.PREPARED]


def test_list_prepared(h: Harness) -> None:
    h.task("b", "q", 2, 1)
    h.task("a", "q", 1, 0)
    h.task("c", "p", 1, 0)
    assert [t.transactional_id for t in h.coordinator.list_prepared("q")] == ["a", "b"]
    assert [t.transactional_id for t in h.coordinator.list_prepared()] == ["c", "a", "b"]
    assert [t.transactional_id for t in h.coordinator.list_transactions(["Prepared"])] == ["b", "a", "c"]


# --- recovery: a crash at every step of a decision ---------------------------------------------------------


def _batch(h: Harness) -> None:
    h.task("w0", "q", 1, 0)
    h.task("w1", "q", 1, 1)
    h.task("l0", "q", 1, 0)
    h.task("l1", "q", 1, 1)


def _outcome(h: Harness) -> dict[str, TxnState]:
    return {i: h.state(i) for i in ("w0", "w1", "l0", "l1")}


DECIDED = {"w0": S.COMPLETE_COMMIT, "w1": S.COMPLETE_COMMIT, "l0": S.COMPLETE_ABORT, "l1": S.COMPLETE_ABORT}


def test_crash_before_the_decision_record_is_durable_decides_nothing(h: Harness) -> None:
    _batch(h)
    result = h.coordinator.commit_batch("q", 1, ["w0", "w1"])
    assert result.record  # ... and the append never made it
    h.restart()
    assert set(_outcome(h).values()) == {S.PREPARED}
    assert h.coordinator.decisions.get("q", 1) is None
    # the driver's retry (same or new winners) decides
    h.commit_batch("q", 1, ["w0", "l1"])
    ended(h)
    assert _outcome(h) == {
        "w0": S.COMPLETE_COMMIT,
        "l1": S.COMPLETE_COMMIT,
        "w1": S.COMPLETE_ABORT,
        "l0": S.COMPLETE_ABORT,
    }


@pytest.mark.parametrize("transitions", [0, 1, 2, 3])
def test_crash_after_the_decision_with_some_transitions_redrives_the_same_outcome(
    h: Harness, transitions: int
) -> None:
    _batch(h)
    h.commit_batch("q", 1, ["w0", "w1"], transitions=transitions)
    h.jobs.clear()  # the markers of what moved were not written either
    owed = h.restart()
    assert len(owed) == 4 - transitions
    assert h.coordinator.decisions.get("q", 1) is not None
    ended(h)
    assert _outcome(h) == DECIDED
    # the replayed driver's commit: the stored decision, nothing moves
    again = h.commit_batch("q", 1, ["l0"])
    assert again.already_decided
    assert again.decision is not None
    assert again.decision.winners == ("w0", "w1")
    assert _outcome(h) == DECIDED


@pytest.mark.parametrize("markers_done", [0, 1, 2, 3])
def test_crash_with_markers_half_written_finishes_them(h: Harness, markers_done: int) -> None:
    _batch(h)
    h.commit_batch("q", 1, ["w0", "w1"])
    for _ in range(markers_done):  # some transactions got their markers and CompleteX
        job = h.jobs.pop(0)
        result = h.coordinator.complete_markers(job)
        assert result is not None
        h.apply(result)
    h.restart()
    assert len(h.jobs) == 4 - markers_done  # the rest resume their markers
    ended(h)
    assert _outcome(h) == DECIDED


def test_crash_after_everything_changes_nothing(h: Harness) -> None:
    _batch(h)
    h.commit_batch("q", 1, ["w0", "w1"])
    ended(h)
    assert h.restart() == []
    assert h.jobs == []
    assert _outcome(h) == DECIDED
    assert h.coordinator.decisions.decided_hw("q") == 1


def test_prepared_transactions_survive_a_crash_undecided(h: Harness) -> None:
    _batch(h)
    h.restart()
    assert set(_outcome(h).values()) == {S.PREPARED}
    tag = h.coordinator.transactions["l1"].prepared
    assert tag is not None
    assert (tag.query_id, tag.batch_id, tag.partition) == ("q", 1, 1)
    h.clock.advance(10**8)  # 28 hours: far past transaction.timeout.ms (60 s), below the 7-day safety timeout
    assert h.coordinator.abort_timed_out() == []


def test_a_replayed_duplicate_decision_record_changes_nothing(h: Harness) -> None:
    _batch(h)
    h.commit_batch("q", 1, ["w0", "w1"])
    h.append_decision(BatchDecisionRecord("q", 1, ("l0",), 99))  # cannot happen; decided once anyway
    h.restart()
    ended(h)
    assert _outcome(h) == DECIDED


# --- leadership moves -----------------------------------------------------------------------------------


def test_unloading_a_partition_forgets_its_ids_and_decisions_only() -> None:
    h = Harness(TxnConfig(num_partitions=4))
    ids = [f"t{i}" for i in range(12)]
    for i, txn_id in enumerate(ids):
        assert h.task(txn_id, f"q{i}", 1).error == E.NONE
    for i in range(len(ids)):
        h.commit_batch(f"q{i}", 1, [ids[i]])
    moved = h.coordinator.partition_for(ids[0])
    staying = [t for t in ids if h.coordinator.partition_for(t) != moved]
    assert staying
    assert len(staying) < len(ids)
    h.coordinator.unload_partition(moved)
    assert sorted(h.coordinator.transactions) == sorted(staying)
    kept = {d.query_id for d in h.coordinator.decisions.all()}
    assert kept == {q for q in (f"q{i}" for i in range(len(ids))) if h.coordinator.partition_for(q) != moved}
    for i in range(len(ids)):
        query = f"q{i}"
        expected = 1 if h.coordinator.partition_for(query) != moved else -1
        assert h.coordinator.decisions.decided_hw(query) == expected
