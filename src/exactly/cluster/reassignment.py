"""Partition reassignment (KIP-455, Kafka's `KafkaController.onPartitionReassignment` in ZooKeeper mode),
the pure part: how a topic's assignment znode changes when a reassignment starts, is cancelled and ends.

Notation: RS the full replica set, ORS the original set, TRS the target, AR = TRS - ORS (adding),
RR = ORS - TRS (removing).

- Start (AlterPartitionReassignments): RS = TRS followed by the rest of ORS, adding = AR, removing = RR
  in the topic znode; the partition state is unchanged: the new replicas start following and the leader
  adds them to the ISR once they caught up.
- End (TRS within the ISR): first the partition state — a leader from TRS (the reassignment election)
  if the old one is not in TRS, the ISR without RR, leader epoch + 1 — then the topic znode: RS = TRS,
  adding and removing gone (written last: it is the only durable copy of ORS).
- Cancel (replicas null): RS = ORS, adding and removing gone; the state is unchanged (RR never left).

Brokers whose replica left the assignment stop it and delete its log when they see the new assignment.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass

from exactly.cluster.election import reassignment_election
from exactly.cluster.znodes import PartitionState, TopicAssignment
from exactly.errors import ErrorCode, KafkaError

__all__ = [
    "Completion",
    "cancel",
    "check_target",
    "complete",
    "in_progress",
    "original_replicas",
    "reassigning",
    "start",
    "target_replicas",
]


def original_replicas(assignment: TopicAssignment, partition: int) -> tuple[int, ...]:
    """ORS: the full set minus what a reassignment in progress adds."""
    adding = set(assignment.adding.get(partition, ()))
    return tuple(r for r in assignment.partitions[partition] if r not in adding)


def target_replicas(assignment: TopicAssignment, partition: int) -> tuple[int, ...]:
    """TRS: the full set minus what a reassignment in progress removes (the full set when none runs)."""
    removing = set(assignment.removing.get(partition, ()))
    return tuple(r for r in assignment.partitions[partition] if r not in removing)


def in_progress(assignment: TopicAssignment, partition: int) -> bool:
    return partition in assignment.adding or partition in assignment.removing


def check_target(topic: str, partition: int, target: Sequence[int], registered: Set[int]) -> None:
    """Kafka's checks of a manual assignment (INVALID_REPLICA_ASSIGNMENT)."""
    if not target:
        raise KafkaError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes an empty replica list.",
        )
    if len(set(target)) != len(target):
        raise KafkaError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"The manual partition assignment for {topic}-{partition} includes a broker more than once.",
        )
    unknown = sorted(set(target) - registered)
    if unknown:
        raise KafkaError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"The manual partition assignment includes broker {unknown[0]}, "
            "but no such broker is registered.",
        )


def _with(
    assignment: TopicAssignment,
    partition: int,
    replicas: tuple[int, ...],
    adding: tuple[int, ...],
    removing: tuple[int, ...],
) -> TopicAssignment:
    partitions = dict(assignment.partitions)
    partitions[partition] = replicas
    add = {p: r for p, r in assignment.adding.items() if p != partition}
    rem = {p: r for p, r in assignment.removing.items() if p != partition}
    if adding:
        add[partition] = adding
    if removing:
        rem[partition] = removing
    return TopicAssignment(assignment.topic_id, partitions, add, rem)


def start(assignment: TopicAssignment, partition: int, target: Sequence[int]) -> TopicAssignment:
    """The assignment once a reassignment of `partition` to `target` starts (a running one is replaced:
    its original set stays the original)."""
    ors = original_replicas(assignment, partition)
    trs = tuple(target)
    if set(trs) == set(ors):
        return _with(assignment, partition, trs, (), ())
    full = trs + tuple(r for r in ors if r not in trs)
    return _with(
        assignment,
        partition,
        full,
        tuple(r for r in trs if r not in ors),
        tuple(r for r in ors if r not in trs),
    )


def cancel(assignment: TopicAssignment, partition: int) -> TopicAssignment:
    if not in_progress(assignment, partition):
        raise KafkaError(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "No partition reassignment is in progress.")
    return _with(assignment, partition, original_replicas(assignment, partition), (), ())


@dataclass(frozen=True, slots=True)
class Completion:
    state: PartitionState | None  # the partition state to write first (None: already right)
    assignment: TopicAssignment  # then the topic znode


def complete(
    assignment: TopicAssignment,
    partition: int,
    state: PartitionState,
    live: Set[int],
    controller_epoch: int,
) -> Completion | None:
    """The end of a reassignment whose targets are all in the ISR, or None while they are not (or no
    leader can be chosen from the targets)."""
    if not in_progress(assignment, partition):
        return None
    trs = target_replicas(assignment, partition)
    if not set(trs) <= set(state.isr):
        return None
    isr = tuple(r for r in state.isr if r in trs)
    leader = state.leader
    if leader not in trs or leader not in live:
        elected = reassignment_election(trs, isr, live)
        if elected is None:
            return None
        leader = elected.leader
    new_state = None
    if leader != state.leader or isr != tuple(state.isr):
        new_state = PartitionState(leader, state.leader_epoch + 1, isr, controller_epoch)
    return Completion(new_state, _with(assignment, partition, trs, (), ()))


def reassigning(assignments: Mapping[str, TopicAssignment]) -> list[tuple[str, int, TopicAssignment]]:
    """Every partition with a reassignment in progress."""
    return [
        (topic, p, a) for topic, a in assignments.items() for p in sorted(set(a.adding) | set(a.removing))
    ]
