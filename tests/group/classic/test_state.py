"""The transition table of `exactly.group.classic.state`."""

from __future__ import annotations

import pytest

from exactly.group.classic.state import (
    STORED_EVENTS,
    TRANSITIONS,
    ClassicGroupState,
    GroupEvent,
    IllegalTransition,
    next_state,
)

S = ClassicGroupState
E = GroupEvent


def test_kafkas_valid_previous_states_are_covered() -> None:
    """Every transition Kafka's ClassicGroupState allows between live states is in the table."""
    kafka = {
        S.PREPARING_REBALANCE: {S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY},
        S.COMPLETING_REBALANCE: {S.PREPARING_REBALANCE},
        S.STABLE: {S.COMPLETING_REBALANCE},
        S.EMPTY: {S.PREPARING_REBALANCE},
    }
    ours: dict[ClassicGroupState, set[ClassicGroupState]] = {}
    for (before, _), after in TRANSITIONS.items():
        ours.setdefault(after, set()).add(before)
    for after, befores in kafka.items():
        assert befores <= ours[after], after


def test_rendezvous_never_reaches_stable_or_empty() -> None:
    """Stable and Empty are reached only by replaying a stored record (state.py, rule 2)."""
    for (before, event), after in TRANSITIONS.items():
        if after in (S.STABLE, S.EMPTY, S.DEAD) and before is not after:
            assert event in STORED_EVENTS, (before, event, after)
        if event not in STORED_EVENTS:
            assert after in (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE), (before, event)


def test_dead_is_final_and_missing_rows_raise() -> None:
    assert not [key for key in TRANSITIONS if key[0] is S.DEAD]
    with pytest.raises(IllegalTransition, match="JOIN_COMPLETED in state Stable"):
        next_state(S.STABLE, E.JOIN_COMPLETED)
    with pytest.raises(IllegalTransition):
        next_state(S.EMPTY, E.JOIN_COMPLETED)
    assert next_state(S.COMPLETING_REBALANCE, E.GENERATION_STORED) is S.STABLE
