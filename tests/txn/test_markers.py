"""The marker channel's pure decisions: what each partition's answer means, and where markers go."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from exactly.errors import ErrorCode
from exactly.txn.markers import NO_LEADER, MarkerOutcome, group_by_leader, marker_outcome


def test_written_only_on_none() -> None:
    assert marker_outcome(ErrorCode.NONE) is MarkerOutcome.WRITTEN


def test_retried_codes_are_the_leader_moving_the_isr_and_disconnects() -> None:
    for code in (
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.UNKNOWN_SERVER_ERROR,
    ):
        assert marker_outcome(code) is MarkerOutcome.RETRY, code


def test_dropped_when_a_newer_producer_or_coordinator_moved_on() -> None:
    assert marker_outcome(ErrorCode.INVALID_PRODUCER_EPOCH) is MarkerOutcome.DROP
    assert marker_outcome(ErrorCode.TRANSACTION_COORDINATOR_FENCED) is MarkerOutcome.DROP


def test_grouped_by_leader_with_unknown_leaders_apart() -> None:
    leaders = {("a", 0): 1, ("a", 1): 2, ("b", 0): 1, ("b", 1): -1, ("c", 0): 3}
    groups = group_by_leader(
        [("b", 0), ("a", 0), ("a", 1), ("b", 1), ("c", 0), ("a", 0)], lambda t, p: leaders[(t, p)]
    )
    assert groups == {1: [("a", 0), ("b", 0)], 2: [("a", 1)], NO_LEADER: [("b", 1)], 3: [("c", 0)]}


@given(
    st.dictionaries(
        st.tuples(st.sampled_from(["x", "y", "z"]), st.integers(0, 20)), st.integers(-3, 4), max_size=30
    )
)
def test_grouping_partitions_every_partition_once(leaders: dict[tuple[str, int], int]) -> None:
    groups = group_by_leader(list(leaders), lambda t, p: leaders[(t, p)])
    seen = [tp for group in groups.values() for tp in group]
    assert sorted(seen) == sorted(leaders)
    for broker, group in groups.items():
        assert group == sorted(group)
        for tp in group:
            expected = leaders[tp] if leaders[tp] >= 0 else NO_LEADER
            assert broker == expected
