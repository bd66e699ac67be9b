"""The controller's leader elections: a table per strategy (including no live ISR member, unclean,
preferred replica outside the ISR), ISR removal, the imbalance ratio, the transition tables, Hypothesis
properties of every strategy, and a Hypothesis state machine driving one partition through broker
failures, restarts, controlled shutdowns, ISR expansion and preferred elections."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from exactly.cluster.election import (
    VALID_PARTITION_TRANSITIONS,
    VALID_REPLICA_TRANSITIONS,
    ElectionResult,
    IllegalStateTransition,
    LeaderAndIsr,
    PartitionStateName,
    ReplicaStateName,
    check_partition_transition,
    check_replica_transition,
    controlled_shutdown_election,
    imbalance,
    new_partition_election,
    offline_election,
    preferred_election,
    reassignment_election,
    remove_replica_from_isr,
)
from exactly.cluster.znodes import NO_LEADER, RECOVERED, RECOVERING, PartitionState

R = ElectionResult

# ------------------------------------------------------------------------------------ strategies


@pytest.mark.parametrize(
    ("assignment", "isr", "live", "unclean", "expected"),
    [
        ((1, 2, 3), (1, 2, 3), {2, 3}, False, R(2, (2, 3))),
        ((1, 2, 3), (2, 3), {1, 2, 3}, False, R(2, (2, 3))),
        ((1, 2, 3), (3, 1), {1, 3}, False, R(1, (3, 1))),  # assignment order picks, ISR order kept
        ((1, 2, 3), (1, 2, 3), {3}, False, R(3, (3,))),
        ((1, 2, 3), (1,), {2, 3}, False, None),  # no live ISR member: stays leaderless
        ((1, 2, 3), (1,), {2, 3}, True, R(2, (2,), recovering=True)),  # unclean: first live replica
        ((1, 2, 3), (1, 3), {2, 3}, True, R(3, (3,))),  # a clean choice exists: it wins
        ((1, 2, 3), (1,), set(), True, None),
        ((1, 2, 3), (), {1}, False, None),
        ((), (), {1}, True, None),
    ],
)
def test_offline_election(
    assignment: tuple[int, ...], isr: tuple[int, ...], live: set[int], unclean: bool, expected: R | None
) -> None:
    assert offline_election(assignment, isr, live, unclean=unclean) == expected


@pytest.mark.parametrize(
    ("assignment", "live", "expected"),
    [
        ((1, 2, 3), {1, 2, 3}, R(1, (1, 2, 3))),
        ((3, 1, 2), {1, 2}, R(1, (1, 2))),
        ((1, 2, 3), {4}, None),
    ],
)
def test_new_partition_election(assignment: tuple[int, ...], live: set[int], expected: R | None) -> None:
    assert new_partition_election(assignment, live) == expected


@pytest.mark.parametrize(
    ("target", "isr", "live", "expected"),
    [
        ((4, 5, 6), (1, 4, 5), {1, 4, 5, 6}, R(4, (1, 4, 5))),  # ISR unchanged
        ((4, 5, 6), (1, 5, 6), {1, 5, 6}, R(5, (1, 5, 6))),
        ((4, 5, 6), (1, 4, 5), {1, 5}, R(5, (1, 4, 5))),  # 4 is dead
        ((4, 5), (1, 2), {1, 2, 4, 5}, None),  # no target replica in the ISR
        ((4, 5), (4, 5), {1}, None),
    ],
)
def test_reassignment_election(
    target: tuple[int, ...], isr: tuple[int, ...], live: set[int], expected: R | None
) -> None:
    assert reassignment_election(target, isr, live) == expected


@pytest.mark.parametrize(
    ("assignment", "isr", "live", "expected"),
    [
        ((1, 2, 3), (2, 3, 1), {1, 2, 3}, R(1, (2, 3, 1))),
        ((1, 2, 3), (2, 3), {1, 2, 3}, None),  # preferred replica not in the ISR
        ((1, 2, 3), (1, 2, 3), {2, 3}, None),  # preferred replica dead: no fallback to the second
        ((), (1,), {1}, None),
    ],
)
def test_preferred_election(
    assignment: tuple[int, ...], isr: tuple[int, ...], live: set[int], expected: R | None
) -> None:
    assert preferred_election(assignment, isr, live) == expected


@pytest.mark.parametrize(
    ("assignment", "isr", "live", "shutting_down", "expected"),
    [
        ((1, 2, 3), (1, 2, 3), {1, 2, 3}, {1}, R(2, (2, 3))),
        ((1, 2, 3), (1, 2, 3), {2, 3}, {1}, R(2, (2, 3))),  # live without the shutting-down broker
        ((1, 2, 3), (1, 2, 3), {1, 2, 3}, {1, 2}, R(3, (3,))),
        ((1, 2, 3), (1, 3), {1, 2, 3}, {1}, R(3, (3,))),
        ((1, 2, 3), (1,), {1, 2, 3}, {1}, None),  # the only ISR member: it stays leader
        ((1, 2, 3), (1, 2, 3), {1, 2}, {1, 2}, None),
        ((1, 2), (1, 2, 4), {1, 2, 4}, {1}, R(2, (2, 4))),  # ISR keeps a member outside the assignment
    ],
)
def test_controlled_shutdown_election(
    assignment: tuple[int, ...],
    isr: tuple[int, ...],
    live: set[int],
    shutting_down: set[int],
    expected: R | None,
) -> None:
    assert controlled_shutdown_election(assignment, isr, live, shutting_down) == expected


@pytest.mark.parametrize(
    ("before", "replica", "after"),
    [
        (LeaderAndIsr(1, 5, (1, 2, 3), 10), 2, LeaderAndIsr(1, 6, (1, 3), 10)),
        (LeaderAndIsr(1, 5, (1, 2, 3), 10), 1, LeaderAndIsr(NO_LEADER, 6, (2, 3), 10)),
        (LeaderAndIsr(1, 5, (1,), 10), 1, LeaderAndIsr(NO_LEADER, 6, (1,), 10)),  # ISR never emptied
        (LeaderAndIsr(NO_LEADER, 6, (1,), 11), 1, LeaderAndIsr(NO_LEADER, 7, (1,), 11)),
        (LeaderAndIsr(1, 5, (1, 2), 10, RECOVERING), 2, LeaderAndIsr(1, 6, (1,), 10, RECOVERING)),
        (LeaderAndIsr(1, 5, (1, 2), 10), 3, LeaderAndIsr(1, 5, (1, 2), 10)),  # not in the ISR: no change
    ],
)
def test_remove_replica_from_isr(before: LeaderAndIsr, replica: int, after: LeaderAndIsr) -> None:
    assert remove_replica_from_isr(before, replica) == after


def test_leader_and_isr_changes() -> None:
    state = LeaderAndIsr.initial(R(2, (2, 3)))
    assert state == LeaderAndIsr(2, 0, (2, 3), 0, RECOVERED)
    assert state.new_epoch() == LeaderAndIsr(2, 1, (2, 3), 0)
    assert state.new_leader_and_isr(3, [3]) == LeaderAndIsr(3, 1, (3,), 0)
    unclean = state.elected(R(4, (4,), recovering=True))
    assert unclean == LeaderAndIsr(4, 1, (4,), 0, RECOVERING)
    assert unclean.elected(R(3, (4, 3))).leader_recovery_state == RECOVERING  # kept, as Kafka does
    assert unclean.with_partition_epoch(7).partition_epoch == 7
    assert not LeaderAndIsr(NO_LEADER, 0, (1,), 0).has_leader
    znode = PartitionState(4, 1, (4,), 9, RECOVERING)
    assert unclean.to_znode(9) == znode
    assert LeaderAndIsr.from_znode(znode, 3) == LeaderAndIsr(4, 1, (4,), 3, RECOVERING)


def test_imbalance() -> None:
    assignments = {
        ("t", 0): (1, 2),
        ("t", 1): (1, 2),
        ("t", 2): (2, 1),
        ("t", 3): (3, 1),
        ("u", 0): (1, 3),  # no leadership known: counted in the denominator only
        ("u", 1): (),
    }
    leaders = {("t", 0): 1, ("t", 1): 2, ("t", 2): 2, ("t", 3): NO_LEADER, ("u", 0): 3, ("u", 1): 1}
    del leaders[("u", 0)]
    assert imbalance(assignments, leaders) == {1: 1 / 3, 2: 0.0, 3: 1.0}
    assert imbalance({}, {}) == {}


# --------------------------------------------------------------------------------- state machines

P = PartitionStateName
RS = ReplicaStateName


def test_partition_transitions_are_kafkas() -> None:
    assert dict(VALID_PARTITION_TRANSITIONS) == {
        P.NEW: {P.NON_EXISTENT},
        P.ONLINE: {P.NEW, P.ONLINE, P.OFFLINE},
        P.OFFLINE: {P.NEW, P.ONLINE, P.OFFLINE},
        P.NON_EXISTENT: {P.OFFLINE},
    }


def test_replica_transitions_are_kafkas() -> None:
    assert dict(VALID_REPLICA_TRANSITIONS) == {
        RS.NEW: {RS.NON_EXISTENT},
        RS.ONLINE: {RS.NEW, RS.ONLINE, RS.OFFLINE, RS.DELETION_INELIGIBLE},
        RS.OFFLINE: {RS.NEW, RS.ONLINE, RS.OFFLINE, RS.DELETION_INELIGIBLE},
        RS.DELETION_STARTED: {RS.OFFLINE},
        RS.DELETION_SUCCESSFUL: {RS.DELETION_STARTED},
        RS.DELETION_INELIGIBLE: {RS.OFFLINE, RS.DELETION_STARTED},
        RS.NON_EXISTENT: {RS.DELETION_SUCCESSFUL},
    }


@pytest.mark.parametrize(("current", "target"), list(itertools.product(P, P)))
def test_check_partition_transition(current: PartitionStateName, target: PartitionStateName) -> None:
    if current in VALID_PARTITION_TRANSITIONS[target]:
        check_partition_transition(current, target)
    else:
        with pytest.raises(IllegalStateTransition, match=f"before moving to {target.value} state"):
            check_partition_transition(current, target)


@pytest.mark.parametrize(("current", "target"), list(itertools.product(RS, RS)))
def test_check_replica_transition(current: ReplicaStateName, target: ReplicaStateName) -> None:
    if current in VALID_REPLICA_TRANSITIONS[target]:
        check_replica_transition(current, target)
    else:
        with pytest.raises(IllegalStateTransition, match=f"Instead it is in {current.value} state"):
            check_replica_transition(current, target)


def test_transition_message_is_kafkas() -> None:
    with pytest.raises(IllegalStateTransition) as info:
        check_partition_transition(P.ONLINE, P.NON_EXISTENT, "Partition t-0")
    assert str(info.value) == (
        "Partition t-0 should be in the OfflinePartition states before moving to NonExistentPartition "
        "state. Instead it is in OnlinePartition state"
    )


# ------------------------------------------------------------------------------------- properties

BROKERS = st.integers(0, 6)


@st.composite
def partitions(draw: st.DrawFn) -> tuple[tuple[int, ...], tuple[int, ...], set[int]]:
    assignment = tuple(draw(st.lists(BROKERS, max_size=5, unique=True)))
    isr = tuple(draw(st.permutations(assignment)))[: draw(st.integers(0, len(assignment)))]
    live = draw(st.sets(BROKERS))
    return assignment, isr, live


@given(partitions(), st.booleans())
def test_offline_leader_is_live_and_clean_unless_allowed(
    partition: tuple[tuple[int, ...], tuple[int, ...], set[int]], unclean: bool
) -> None:
    assignment, isr, live = partition
    result = offline_election(assignment, isr, live, unclean=unclean)
    clean_candidates = [r for r in assignment if r in live and r in isr]
    if result is None:
        assert not clean_candidates
        assert not unclean or not live & set(assignment)
        return
    assert result.leader in live
    assert result.leader in assignment
    assert result.leader in result.isr
    assert set(result.isr) <= live
    if clean_candidates:
        assert (result.leader, result.recovering) == (clean_candidates[0], False)
        assert set(result.isr) == set(isr) & live
    else:
        assert unclean
        assert (result.isr, result.recovering) == ((result.leader,), True)


@given(partitions(), st.sets(BROKERS))
def test_every_strategy_picks_a_live_isr_member(
    partition: tuple[tuple[int, ...], tuple[int, ...], set[int]], shutting_down: set[int]
) -> None:
    assignment, isr, live = partition
    results = [
        new_partition_election(assignment, live),
        offline_election(assignment, isr, live, unclean=False),
        reassignment_election(assignment[::-1], isr, live),
        preferred_election(assignment, isr, live),
        controlled_shutdown_election(assignment, isr, live, shutting_down),
    ]
    for index, result in enumerate(results):
        if result is not None:
            assert result.leader in live
            assert result.leader in result.isr
            assert not result.recovering
            if index > 0:
                assert result.leader in isr
    shutdown = results[-1]
    if shutdown is not None:
        assert shutdown.leader not in shutting_down
        assert not set(shutdown.isr) & shutting_down
    preferred = results[3]
    assert (preferred is not None) == bool(assignment and assignment[0] in live and assignment[0] in isr)


@given(
    st.builds(
        LeaderAndIsr,
        st.sampled_from([NO_LEADER, 0, 1, 2]),
        st.integers(0, 1000),
        st.lists(BROKERS, min_size=1, max_size=5, unique=True).map(tuple),
        st.integers(0, 1000),
    ),
    BROKERS,
)
def test_isr_removal(state: LeaderAndIsr, replica: int) -> None:
    after = remove_replica_from_isr(state, replica)
    if replica not in state.isr:
        assert after == state
        return
    assert after.leader_epoch == state.leader_epoch + 1
    assert after.isr  # never empty
    assert replica not in after.isr or state.isr == (replica,)
    assert after.leader == (NO_LEADER if state.leader == replica else state.leader)
    assert after.partition_epoch == state.partition_epoch


class PartitionUnderController(RuleBasedStateMachine):
    """One partition (RF 3 over brokers 0-4) driven as Kafka's controller drives it, only clean
    elections. Checked after every step: the ISR is never empty; a leader is running and in the ISR;
    the partition is leaderless only when no eligible ISR member runs; leader epochs strictly increase
    with every controller change and never otherwise; every leader was in the ISR when elected."""

    def __init__(self) -> None:
        super().__init__()
        self.assignment: tuple[int, ...] = ()
        self.running: set[int] = set()
        self.shutting: set[int] = set()
        self.state = LeaderAndIsr(NO_LEADER, 0, (0,), 0)

    @initialize(assignment=st.permutations(range(5)).map(lambda p: tuple(p[:3])))
    def create(self, assignment: tuple[int, ...]) -> None:
        self.assignment = assignment
        self.running = set(range(5))
        result = new_partition_election(assignment, self.live)
        assert result is not None
        self.state = LeaderAndIsr.initial(result)

    @property
    def live(self) -> set[int]:
        return self.running - self.shutting

    def _change(self, new: LeaderAndIsr) -> None:
        assert new.leader_epoch == self.state.leader_epoch + 1
        if new.leader != NO_LEADER and new.leader != self.state.leader:
            assert new.leader in self.state.isr  # clean: elected from the ISR of the time
        self.state = new

    def _elect_if_leaderless(self) -> None:
        if self.state.leader == NO_LEADER:
            result = offline_election(self.assignment, self.state.isr, self.live, unclean=False)
            if result is not None:
                self._change(self.state.elected(result))

    @rule(broker=st.integers(0, 4))
    def broker_fails(self, broker: int) -> None:
        if broker not in self.running:
            return
        self.running.discard(broker)
        self.shutting.discard(broker)
        if self.state.leader == broker:  # partitions it led go offline, are elected, then ISR removal
            result = offline_election(self.assignment, self.state.isr, self.live, unclean=False)
            if result is not None:
                self._change(self.state.elected(result))
        if broker in self.state.isr:
            self._change(remove_replica_from_isr(self.state, broker))

    @rule(broker=st.integers(0, 4))
    def broker_starts(self, broker: int) -> None:
        if broker in self.running:
            return
        self.running.add(broker)
        self._elect_if_leaderless()  # it may be the last ISR member

    @rule(broker=st.integers(0, 4))
    def controlled_shutdown(self, broker: int) -> None:
        if broker not in self.live:
            return
        self.shutting.add(broker)
        if self.state.leader == broker:
            result = controlled_shutdown_election(
                self.assignment, self.state.isr, self.running, self.shutting
            )
            if result is not None:
                self._change(self.state.elected(result))
        elif broker in self.state.isr:
            self._change(remove_replica_from_isr(self.state, broker))

    @precondition(lambda self: self.state.leader != NO_LEADER)
    @rule(broker=st.integers(0, 4))
    def follower_catches_up(self, broker: int) -> None:
        # leader-driven ISR expansion (AlterPartition): bumps only the partition epoch
        if broker in self.assignment and broker in self.live and broker not in self.state.isr:
            isr = (*self.state.isr, broker)
            self.state = LeaderAndIsr(
                self.state.leader, self.state.leader_epoch, isr, self.state.partition_epoch + 1
            )

    @rule()
    def preferred(self) -> None:
        if self.state.leader == self.assignment[0]:
            return
        result = preferred_election(self.assignment, self.state.isr, self.live)
        if result is not None:
            self._change(self.state.elected(result))

    @invariant()
    def isr_is_never_empty(self) -> None:
        assert self.state.isr

    @invariant()
    def leader_runs_and_is_in_sync(self) -> None:
        if self.state.leader != NO_LEADER:
            assert self.state.leader in self.running
            assert self.state.leader in self.state.isr
            assert self.state.leader_recovery_state == RECOVERED

    @invariant()
    def leaderless_only_without_an_eligible_isr_member(self) -> None:
        if self.state.leader == NO_LEADER:
            assert not set(self.state.isr) & self.live


TestPartitionUnderController = PartitionUnderController.TestCase
