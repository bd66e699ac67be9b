"""The transaction state machine against the seeds' table (shared/vectors/txn-state-transitions.json),
extended with the two-phase commit extension's rows (tests/txn/vectors.py)."""

from __future__ import annotations

import itertools

import pytest

from exactly.txn.state import TRANSITIONS, IllegalTransition, TxnState, check_transition
from tests.txn.vectors import SEEDS, VECTORS


def test_state_ids_are_the_seeds() -> None:
    assert {s.kafka_name: s.value for s in TxnState} == VECTORS["states"]


def test_legal_previous_states_are_exactly_the_seeds() -> None:
    expected = {
        TxnState.from_kafka_name(target): {TxnState.from_kafka_name(p) for p in previous}
        for target, previous in VECTORS["legal_previous_states"].items()
    }
    assert {target: set(previous) for target, (previous, _) in TRANSITIONS.items()} == expected


@pytest.mark.parametrize(("current", "target"), list(itertools.product(TxnState, TxnState)))
def test_every_pair_is_legal_or_raises(current: TxnState, target: TxnState) -> None:
    legal = current.kafka_name in VECTORS["legal_previous_states"][target.kafka_name]
    if legal:
        check_transition(current, target)
    else:
        with pytest.raises(IllegalTransition, match=f"{current.kafka_name} to {target.kafka_name}"):
            check_transition(current, target)


@pytest.mark.parametrize("trigger", VECTORS["triggers"], ids=lambda t: f"{t[0]}->{t[2]}")
def test_triggers_are_legal(trigger: list[str]) -> None:
    source, _, target = trigger
    check_transition(TxnState.from_kafka_name(source), TxnState.from_kafka_name(target))


@pytest.mark.parametrize("path", VECTORS["common_paths"], ids="->".join)
def test_common_paths_walk(path: list[str]) -> None:
    for source, target in itertools.pairwise(path):
        check_transition(TxnState.from_kafka_name(source), TxnState.from_kafka_name(target))


def test_every_transition_has_a_reason() -> None:
    assert set(TRANSITIONS) == set(TxnState)
    assert all(reason for _, reason in TRANSITIONS.values())


def test_unknown_state_name() -> None:
    with pytest.raises(ValueError, match="unknown transaction state"):
        TxnState.from_kafka_name("Committed")


def test_the_seeds_rows_are_kept() -> None:
    """The extension only adds: every state id and legal transition of the seeds is unchanged."""
    assert {name: TxnState.from_kafka_name(name).value for name in SEEDS["states"]} == SEEDS["states"]
    for target, previous in SEEDS["legal_previous_states"].items():
        allowed, _ = TRANSITIONS[TxnState.from_kafka_name(target)]
        assert {TxnState.from_kafka_name(p) for p in previous} <= allowed


def test_prepared_leaves_only_by_a_decision() -> None:
    leaving = {target for target, (previous, _) in TRANSITIONS.items() if TxnState.PREPARED in previous}
    assert leaving == {TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT}
    assert TRANSITIONS[TxnState.PREPARED][0] == {TxnState.ONGOING}
