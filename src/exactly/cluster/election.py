"""The controller's partition leader elections and its partition/replica state machines, as pure
functions and tables (Kafka's `Election`, `PartitionLeaderElectionAlgorithms`, `PartitionStateMachine`,
`ReplicaStateMachine`, `LeaderAndIsr`).

The controller decides who leads each partition and which replicas are in sync (ISR) when brokers
fail, start, shut down, or replicas move. Each strategy below picks a leader from the partition's
replicas in assignment order; "live" means a registered broker that is not shutting down.

    strategy             leader chosen                                  new ISR
    new partition        first live replica                             all live replicas
    offline (clean)      first replica that is live and in the ISR      the old ISR filtered to live members
    offline (unclean)    first live replica, when no clean one exists   [leader], marked RECOVERING (KIP-704)
    reassignment         first *target* replica live and in the ISR     unchanged
    preferred            the first replica, only if live and in the ISR unchanged
    controlled shutdown  first replica live, in the ISR, not shutting   ISR minus the shutting-down brokers
    ISR removal (RSM)    unchanged, or -1 if the removed replica led    ISR minus it, but never empty

Every change the controller makes bumps the leader epoch by one (`LeaderAndIsr.elected`,
`new_leader_and_isr`, `new_epoch`); the partition epoch is the state znode's version, which the
conditional write advances. No strategy finding a leader returns None: the partition stays as it is
(offline elections leave it leaderless until a replica of its ISR returns).

Partition states (Kafka's PartitionStateMachine; VALID_PARTITION_TRANSITIONS maps a target state to
the states it may be entered from):

    to            from                    why
    NEW           NON_EXISTENT            partition created: its assignment is written, no leader yet
    ONLINE        NEW                     first leader and ISR written (new-partition election)
    ONLINE        OFFLINE                 a leader is elected again (offline election)
    ONLINE        ONLINE                  re-election: preferred, reassignment, controlled shutdown
    OFFLINE       NEW                     the first election failed: no live replica
    OFFLINE       ONLINE                  its leader's broker died
    OFFLINE       OFFLINE                 still no leader
    NON_EXISTENT  OFFLINE                 topic deletion: taken offline, then forgotten

Replica states (Kafka's ReplicaStateMachine):

    to                   from                                          why
    NEW                  NON_EXISTENT                                  replica created (new partition, or
                                                                       a reassignment adding it)
    ONLINE               NEW, ONLINE, OFFLINE, DELETION_INELIGIBLE     its broker is live: LeaderAndIsr sent
    OFFLINE              NEW, ONLINE, OFFLINE, DELETION_INELIGIBLE     broker died or replica dropped:
                                                                       StopReplica, removed from the ISR
    DELETION_STARTED     OFFLINE                                       StopReplica(delete=true) sent
    DELETION_SUCCESSFUL  DELETION_STARTED                              the broker deleted it
    DELETION_INELIGIBLE  OFFLINE, DELETION_STARTED                     deletion failed or broker down: later
    NON_EXISTENT         DELETION_SUCCESSFUL                           the controller forgets it
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, replace
from enum import Enum

from exactly.cluster.znodes import NO_LEADER, RECOVERED, RECOVERING, PartitionState
from exactly.errors import ExactlyError

# ------------------------------------------------------------------------------- leader and ISR


@dataclass(frozen=True, slots=True)
class ElectionResult:
    """The leader a strategy chose and the ISR to write with it; `recovering` after an unclean
    election (the leader was not in the ISR, so it may lack committed records)."""

    leader: int
    isr: tuple[int, ...]
    recovering: bool = False


@dataclass(frozen=True, slots=True)
class LeaderAndIsr:
    """A partition's leadership as the controller holds it (Kafka's LeaderAndIsr).

    `partition_epoch` is the state znode's version: controller writes leave it to the conditional
    write (`with_partition_epoch` after success); `leader_recovery_state` is RECOVERED or RECOVERING."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int
    leader_recovery_state: int = RECOVERED

    @classmethod
    def initial(cls, result: ElectionResult) -> LeaderAndIsr:
        """A new partition's first state: leader epoch 0, partition epoch 0."""
        return cls(result.leader, 0, result.isr, 0)

    @classmethod
    def from_znode(cls, state: PartitionState, zk_version: int) -> LeaderAndIsr:
        return cls(state.leader, state.leader_epoch, state.isr, zk_version, state.leader_recovery_state)

    def to_znode(self, controller_epoch: int) -> PartitionState:
        return PartitionState(
            self.leader, self.leader_epoch, self.isr, controller_epoch, self.leader_recovery_state
        )

    @property
    def has_leader(self) -> bool:
        return self.leader != NO_LEADER

    def new_leader_and_isr(self, leader: int, isr: Sequence[int]) -> LeaderAndIsr:
        """A controller change: new leader and ISR, leader epoch + 1, recovery state kept."""
        return replace(self, leader=leader, leader_epoch=self.leader_epoch + 1, isr=tuple(isr))

    def new_epoch(self) -> LeaderAndIsr:
        """Same leader and ISR, leader epoch + 1 (e.g. reassignment phase A: followers must refetch)."""
        return replace(self, leader_epoch=self.leader_epoch + 1)

    def elected(self, result: ElectionResult) -> LeaderAndIsr:
        """The state after an election: RECOVERING if it was unclean, else the recovery state kept."""
        changed = self.new_leader_and_isr(result.leader, result.isr)
        return replace(changed, leader_recovery_state=RECOVERING) if result.recovering else changed

    def with_partition_epoch(self, partition_epoch: int) -> LeaderAndIsr:
        return replace(self, partition_epoch=partition_epoch)


# ------------------------------------------------------------------------------------ strategies


def new_partition_election(assignment: Sequence[int], live: Set[int]) -> ElectionResult | None:
    """A new partition: the first live replica leads, every live replica is in the ISR."""
    live_replicas = tuple(r for r in assignment if r in live)
    return ElectionResult(live_replicas[0], live_replicas) if live_replicas else None


def offline_election(
    assignment: Sequence[int], isr: Sequence[int], live: Set[int], *, unclean: bool
) -> ElectionResult | None:
    """A partition without a live leader (or a new one whose state znode exists)."""
    leader = next((r for r in assignment if r in live and r in isr), None)
    if leader is not None:
        return ElectionResult(leader, tuple(r for r in isr if r in live))
    if unclean:
        leader = next((r for r in assignment if r in live), None)
        if leader is not None:
            return ElectionResult(leader, (leader,), recovering=True)
    return None


def reassignment_election(
    target_replicas: Sequence[int], isr: Sequence[int], live: Set[int]
) -> ElectionResult | None:
    """End of a reassignment whose old leader is not a target replica or is dead; ISR unchanged."""
    leader = next((r for r in target_replicas if r in live and r in isr), None)
    return ElectionResult(leader, tuple(isr)) if leader is not None else None


def preferred_election(
    assignment: Sequence[int], isr: Sequence[int], live: Set[int]
) -> ElectionResult | None:
    """Move leadership back to the preferred (first) replica; ISR unchanged. Whether the preferred
    replica already leads (ELECTION_NOT_NEEDED) is the caller's question."""
    if assignment and assignment[0] in live and assignment[0] in isr:
        return ElectionResult(assignment[0], tuple(isr))
    return None


def controlled_shutdown_election(
    assignment: Sequence[int], isr: Sequence[int], live: Set[int], shutting_down: Set[int]
) -> ElectionResult | None:
    """Move leadership off brokers being shut down; they also leave the ISR. `live` may include the
    shutting-down brokers (Kafka passes them in) or not: they are excluded either way."""
    leader = next((r for r in assignment if r in live and r in isr and r not in shutting_down), None)
    if leader is None:
        return None
    return ElectionResult(leader, tuple(r for r in isr if r not in shutting_down))


def remove_replica_from_isr(state: LeaderAndIsr, replica: int) -> LeaderAndIsr:
    """A replica going offline (Kafka's RSM doRemoveReplicasFromIsr): out of the ISR unless it is the
    last member (the ISR is never emptied, so the partition waits for it), no leader if it led, leader
    epoch + 1. A replica not in the ISR leaves the state unchanged (no write)."""
    if replica not in state.isr:
        return state
    leader = NO_LEADER if state.leader == replica else state.leader
    isr = state.isr if len(state.isr) == 1 else tuple(r for r in state.isr if r != replica)
    return state.new_leader_and_isr(leader, isr)


def imbalance(
    assignments: Mapping[tuple[str, int], Sequence[int]], leaders: Mapping[tuple[str, int], int]
) -> dict[int, float]:
    """Per broker, the share of the partitions it is preferred leader of that it does not lead
    (Kafka's auto.leader.rebalance ratio, compared with leader.imbalance.per.broker.percentage / 100).
    A partition missing from `leaders` counts in the denominator only, as Kafka's does; partitions
    with an empty assignment are skipped. Brokers that are nobody's preferred leader are absent."""
    preferred: dict[int, int] = {}
    not_leading: dict[int, int] = {}
    for partition, replicas in assignments.items():
        if not replicas:
            continue
        broker = replicas[0]
        preferred[broker] = preferred.get(broker, 0) + 1
        leader = leaders.get(partition)
        if leader is not None and leader != broker:
            not_leading[broker] = not_leading.get(broker, 0) + 1
    return {broker: not_leading.get(broker, 0) / count for broker, count in preferred.items()}


# -------------------------------------------------------------------------------- state machines


class IllegalStateTransition(ExactlyError):
    """A partition or replica asked to enter a state its current state cannot lead to."""


class PartitionStateName(Enum):
    NEW = "NewPartition"
    ONLINE = "OnlinePartition"
    OFFLINE = "OfflinePartition"
    NON_EXISTENT = "NonExistentPartition"


class ReplicaStateName(Enum):
    NEW = "NewReplica"
    ONLINE = "OnlineReplica"
    OFFLINE = "OfflineReplica"
    DELETION_STARTED = "ReplicaDeletionStarted"
    DELETION_SUCCESSFUL = "ReplicaDeletionSuccessful"
    DELETION_INELIGIBLE = "ReplicaDeletionIneligible"
    NON_EXISTENT = "NonExistentReplica"


_P = PartitionStateName
_R = ReplicaStateName

VALID_PARTITION_TRANSITIONS: Mapping[PartitionStateName, frozenset[PartitionStateName]] = {
    _P.NEW: frozenset({_P.NON_EXISTENT}),
    _P.ONLINE: frozenset({_P.NEW, _P.ONLINE, _P.OFFLINE}),
    _P.OFFLINE: frozenset({_P.NEW, _P.ONLINE, _P.OFFLINE}),
    _P.NON_EXISTENT: frozenset({_P.OFFLINE}),
}
"""Target state -> the states it may be entered from (Kafka's validPreviousStates)."""

VALID_REPLICA_TRANSITIONS: Mapping[ReplicaStateName, frozenset[ReplicaStateName]] = {
    _R.NEW: frozenset({_R.NON_EXISTENT}),
    _R.ONLINE: frozenset({_R.NEW, _R.ONLINE, _R.OFFLINE, _R.DELETION_INELIGIBLE}),
    _R.OFFLINE: frozenset({_R.NEW, _R.ONLINE, _R.OFFLINE, _R.DELETION_INELIGIBLE}),
    _R.DELETION_STARTED: frozenset({_R.OFFLINE}),
    _R.DELETION_SUCCESSFUL: frozenset({_R.DELETION_STARTED}),
    _R.DELETION_INELIGIBLE: frozenset({_R.OFFLINE, _R.DELETION_STARTED}),
    _R.NON_EXISTENT: frozenset({_R.DELETION_SUCCESSFUL}),
}
"""Target state -> the states it may be entered from (Kafka's validPreviousStates)."""


def _check(subject: str, current: Enum, target: Enum, valid: frozenset[Enum]) -> None:
    if current not in valid:
        allowed = ",".join(sorted(s.value for s in valid))
        raise IllegalStateTransition(
            f"{subject} should be in the {allowed} states before moving to {target.value} state. "
            f"Instead it is in {current.value} state"
        )


def check_partition_transition(
    current: PartitionStateName, target: PartitionStateName, subject: str = "Partition"
) -> None:
    """Raise IllegalStateTransition (Kafka's message) unless `current` may move to `target`."""
    _check(subject, current, target, frozenset(VALID_PARTITION_TRANSITIONS[target]))


def check_replica_transition(
    current: ReplicaStateName, target: ReplicaStateName, subject: str = "Replica"
) -> None:
    """Raise IllegalStateTransition (Kafka's message) unless `current` may move to `target`."""
    _check(subject, current, target, frozenset(VALID_REPLICA_TRANSITIONS[target]))
