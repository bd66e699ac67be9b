"""The controller's decision for one partition (pure): what its state znode must become, given its
replica assignment, its current state, the live brokers and the ones being drained.

The controller is level-triggered: after any event (a broker came or went, a topic appeared, a broker
asked for a controlled shutdown, a new controller took over) it reads the partitions' states and applies
this decision to each, so a new controller picks up where the old one stopped without replaying events.

- No state yet (a new partition): the first live replica leads, the live replicas are the ISR, leader
  epoch 0 (none live: wait). Kafka's NewPartition -> Online.
- The leader is being drained (controlled shutdown): the controlled-shutdown election; with no other
  candidate, leave it (leadership moves before the broker stops).
- The leader is -1 or dead: the offline election, clean unless the topic allows unclean elections (only
  an ISR member has every committed record). None possible: leader -1, dead members out of the ISR but
  never below one member (KIP-966's "last replica standing" keeps the last one).
- The leader lives but a follower in the ISR is dead or drained: that follower leaves the ISR (Kafka's
  OfflineReplica transition).
- Otherwise nothing.

Every change the controller makes raises the leader epoch by one; leaders change only the ISR.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass

from exactly.cluster.election import (
    controlled_shutdown_election,
    imbalance,
    offline_election,
    preferred_election,
)
from exactly.cluster.znodes import NO_LEADER, PartitionState
from exactly.errors import ErrorCode

__all__ = ["Decision", "decide", "decide_election", "decide_preferred", "partitions_to_rebalance"]


@dataclass(frozen=True, slots=True)
class Decision:
    state: PartitionState
    reason: str


def decide(
    assignment: Sequence[int],
    current: PartitionState | None,
    live: Set[int],
    shutting_down: Set[int],
    controller_epoch: int,
    *,
    unclean: bool = False,
) -> Decision | None:
    eligible = {b for b in live if b not in shutting_down}
    if current is None:
        isr = tuple(b for b in assignment if b in eligible)
        if not isr:
            return None
        return Decision(PartitionState(isr[0], 0, isr, controller_epoch), "new partition")
    leader, isr = current.leader, tuple(current.isr)
    epoch = current.leader_epoch + 1
    if leader in shutting_down and leader in live:
        moved = controlled_shutdown_election(assignment, isr, live, shutting_down)
        if moved is None:
            return None
        return Decision(
            PartitionState(moved.leader, epoch, tuple(moved.isr), controller_epoch),
            f"leader {leader} is shutting down",
        )
    if leader == NO_LEADER or leader not in live:
        elected = offline_election(assignment, isr, eligible, unclean=unclean)
        if elected is not None:
            return Decision(
                PartitionState(
                    elected.leader,
                    epoch,
                    tuple(elected.isr),
                    controller_epoch,
                    1 if elected.recovering else 0,
                ),
                f"leader {leader} is offline" + (" (unclean election)" if elected.recovering else ""),
            )
        if leader == NO_LEADER:
            return None
        remaining = tuple(b for b in isr if b in live) or isr[-1:]
        return Decision(
            PartitionState(NO_LEADER, epoch, remaining, controller_epoch),
            f"leader {leader} is offline and no in-sync replica is live",
        )
    gone = [b for b in isr if b != leader and (b not in live or b in shutting_down)]
    kept = tuple(b for b in isr if b not in gone)
    if gone and kept:  # never empties the ISR
        return Decision(
            PartitionState(leader, epoch, kept, controller_epoch),
            f"replicas {gone} are offline or shutting down",
        )
    return None


def decide_preferred(
    assignment: Sequence[int], current: PartitionState, live: Set[int], controller_epoch: int
) -> Decision | None:
    """Preferred-replica election (ElectLeaders PREFERRED, auto.leader.rebalance.enable): the first
    assigned replica leads if it is live, in the ISR and not already the leader."""
    if assignment and current.leader == assignment[0]:
        return None
    elected = preferred_election(assignment, tuple(current.isr), live)
    if elected is None:
        return None
    return Decision(
        PartitionState(elected.leader, current.leader_epoch + 1, tuple(current.isr), controller_epoch),
        "preferred replica election",
    )


def decide_election(
    assignment: Sequence[int],
    current: PartitionState,
    live: Set[int],
    controller_epoch: int,
    *,
    unclean: bool,
    name: str,
) -> Decision | tuple[ErrorCode, str]:
    """ElectLeaders for one partition (Kafka's `KafkaController.electLeaders`): the decision to write, or
    why there is none (ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE,
    with Kafka's messages). PREFERRED moves leadership to the first assigned replica; UNCLEAN gives a
    partition whose leader is gone any live replica."""
    not_needed = (ErrorCode.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition.")
    if unclean:
        if current.leader in live:
            return not_needed
        decision = decide(assignment, current, live, set(), controller_epoch, unclean=True)
        if decision is None or decision.state.leader == NO_LEADER:
            return (
                ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
                f"Failed to elect leader for partition {name} under strategy "
                "OfflinePartitionLeaderElectionStrategy",
            )
        return decision
    if assignment and current.leader == assignment[0]:
        return not_needed
    preferred = decide_preferred(assignment, current, live, controller_epoch)
    if preferred is None:
        return (
            ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
            f"Failed to elect leader for partition {name} under strategy "
            "PreferredReplicaPartitionLeaderElectionStrategy",
        )
    return preferred


def partitions_to_rebalance(
    assignments: Mapping[tuple[str, int], tuple[int, ...]],
    leaders: Mapping[tuple[str, int], int],
    percentage: int,
) -> list[tuple[str, int]]:
    """auto.leader.rebalance.enable (Kafka's `checkAndTriggerAutoLeaderRebalance`): the partitions whose
    preferred replica is a broker that fails to lead more than `percentage` % of the partitions it is
    preferred for, and that it does not lead now (each then gets a preferred election)."""
    ratios = imbalance(assignments, leaders)
    overloaded = {b for b, ratio in ratios.items() if ratio > percentage / 100}
    return sorted(
        key
        for key, replicas in assignments.items()
        if replicas and replicas[0] in overloaded and leaders.get(key) != replicas[0]
    )
