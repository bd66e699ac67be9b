"""The controller's decision for one partition (exactly.cluster.reconcile): new partitions, dead leaders,
dead or drained followers, controlled shutdown, unclean elections, and the last replica standing."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from exactly.cluster.reconcile import (
    Decision,
    decide,
    decide_election,
    decide_preferred,
    partitions_to_rebalance,
)
from exactly.cluster.znodes import NO_LEADER, PartitionState
from exactly.errors import ErrorCode

R = (1, 2, 3)


def test_a_new_partition_is_led_by_its_first_live_replica() -> None:
    decision = decide(R, None, {2, 3}, set(), 5)
    assert decision is not None
    assert decision.state == PartitionState(2, 0, (2, 3), 5)
    assert decide(R, None, set(), set(), 5) is None  # nobody to lead it yet


def test_a_dead_leader_is_replaced_from_the_isr_only() -> None:
    state = PartitionState(1, 7, (1, 3), 2)
    decision = decide(R, state, {2, 3}, set(), 4)
    assert decision is not None
    assert decision.state == PartitionState(3, 8, (3,), 4)  # 2 is live but was not in the ISR


def test_the_last_replica_standing_keeps_the_partition_leaderless() -> None:
    state = PartitionState(1, 7, (1,), 2)
    decision = decide(R, state, {2, 3}, set(), 4)
    assert decision is not None
    assert decision.state == PartitionState(NO_LEADER, 8, (1,), 4)
    assert decide(R, decision.state, {2, 3}, set(), 4) is None  # and stays so
    unclean = decide(R, decision.state, {2, 3}, set(), 4, unclean=True)
    assert unclean is not None
    assert unclean.state.leader == 2
    assert unclean.state.leader_recovery_state == 1


def test_dead_and_drained_followers_leave_the_isr() -> None:
    state = PartitionState(1, 0, (1, 2, 3), 0)
    decision = decide(R, state, {1, 2}, set(), 0)
    assert decision is not None
    assert decision.state == PartitionState(1, 1, (1, 2), 0)
    drained = decide(R, state, {1, 2, 3}, {2}, 0)
    assert drained is not None
    assert drained.state == PartitionState(1, 1, (1, 3), 0)


def test_a_draining_leader_hands_over_and_leaves_the_isr() -> None:
    state = PartitionState(1, 3, (1, 2, 3), 0)
    decision = decide(R, state, {1, 2, 3}, {1}, 0)
    assert decision is not None
    assert decision.state.leader in (2, 3)
    assert 1 not in decision.state.isr
    alone = PartitionState(1, 3, (1,), 0)
    assert decide(R, alone, {1, 2, 3}, {1}, 0) is None  # no other in-sync replica: it keeps leading


def test_preferred_election() -> None:
    assert decide_preferred(R, PartitionState(1, 0, R, 0), {1, 2, 3}, 0) is None
    moved = decide_preferred(R, PartitionState(2, 4, R, 0), {1, 2, 3}, 1)
    assert moved is not None
    assert moved.state == PartitionState(1, 5, R, 1)
    assert decide_preferred(R, PartitionState(2, 4, (2, 3), 0), {1, 2, 3}, 1) is None  # 1 not in sync


@given(
    st.sets(st.integers(1, 3)),
    st.sets(st.integers(1, 3), min_size=1),
    st.sampled_from([NO_LEADER, 1, 2, 3]),
    st.sets(st.integers(1, 3)),
)
def test_decisions_raise_the_epoch_and_elect_only_live_in_sync_replicas(
    live: set[int], isr: set[int], leader: int, draining: set[int]
) -> None:
    if leader != NO_LEADER:
        isr = isr | {leader}  # a state the controller writes always has its leader in the ISR
    state = PartitionState(leader, 10, tuple(sorted(isr)), 0)
    decision = decide(R, state, live, draining, 1)
    if decision is None:
        return
    new = decision.state
    assert new.leader_epoch == 11
    assert new.isr  # never empty
    if new.leader != NO_LEADER:
        assert new.leader in live
        assert new.leader in isr
        assert new.leader in new.isr


def test_auto_rebalance_picks_the_partitions_of_brokers_over_the_imbalance_limit() -> None:
    assignments = {("t", p): ((1, 2, 3) if p < 5 else (2, 3, 1)) for p in range(10)}
    leaders = {("t", p): (2 if p in (0, 1) else assignments[("t", p)][0]) for p in range(10)}
    # broker 1 leads 3 of its 5 preferred partitions: 40 % imbalance; broker 2 leads all of its own
    assert partitions_to_rebalance(assignments, leaders, 10) == [("t", 0), ("t", 1)]
    assert partitions_to_rebalance(assignments, leaders, 50) == []  # under a 50 % limit
    balanced = {key: replicas[0] for key, replicas in assignments.items()}
    assert partitions_to_rebalance(assignments, balanced, 0) == []


def test_elect_leaders_preferred_and_unclean() -> None:
    here = PartitionState(1, 3, R, 0)
    assert (
        decide_election(R, here, {1, 2, 3}, 0, unclean=False, name="t-0")[0] == ErrorCode.ELECTION_NOT_NEEDED
    )
    away = PartitionState(2, 3, R, 0)
    moved = decide_election(R, away, {1, 2, 3}, 0, unclean=False, name="t-0")
    assert isinstance(moved, Decision)
    assert moved.state.leader == 1
    not_in_sync = PartitionState(2, 3, (2, 3), 0)
    refused = decide_election(R, not_in_sync, {1, 2, 3}, 0, unclean=False, name="t-0")
    assert refused == (
        ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
        "Failed to elect leader for partition t-0 under strategy "
        "PreferredReplicaPartitionLeaderElectionStrategy",
    )
    assert (
        decide_election(R, away, {1, 2, 3}, 0, unclean=True, name="t-0")[0] == ErrorCode.ELECTION_NOT_NEEDED
    )
    leaderless = PartitionState(NO_LEADER, 5, (1,), 0)
    unclean = decide_election(R, leaderless, {2, 3}, 0, unclean=True, name="t-0")
    assert isinstance(unclean, Decision)
    assert unclean.state.leader == 2
    nobody = decide_election(R, leaderless, set(), 0, unclean=True, name="t-0")
    assert not isinstance(nobody, Decision)
    assert nobody[0] == ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
