"""One KIP-848 consumer group (Kafka's `ConsumerGroup`): what is stored of it, and what it derives.

Everything here is rebuilt from the group's records (`records.py`, types 3-8) by `apply_*`, which only
`ConsumerGroupManager.replay` calls; the manager computes the next records from a copy and never
changes a group directly. What is kept in memory only: the resolved topics of regular expressions
(recomputed from the broker's topics at each heartbeat) and the deadlines (in the coordinator's timers).

The group's state is derived, never stored (Kafka's `ConsumerGroup.maybeUpdateGroupState`)::

    Empty        no members
    Assigning    group epoch > target assignment epoch (the assignor has to run)
    Reconciling  some member is not Stable at the target assignment epoch
    Stable       every member is Stable at the target assignment epoch
    Dead         deleted (only seen by a caller that kept a reference)

`holder` answers who holds a partition (assigned or pending revocation), the fact reconciliation needs
to never hand a partition to a second member.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import Enum

from exactly.errors import ErrorCode
from exactly.group.consumer.reconciliation import CurrentAssignment, MemberState
from exactly.group.consumer.records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerKey,
    TopicPartitions,
)
from exactly.group.group import GroupType, OffsetExpirationBase
from exactly.group.offsets import OffsetAndMetadata
from exactly.group.records import CoordinatorRecord
from exactly.protocol.messages.describe_groups import DescribedGroup, DescribedGroupMember
from exactly.protocol.messages.list_groups import ListedGroup

__all__ = [
    "LEAVE_EPOCH",
    "STATIC_LEAVE_EPOCH",
    "ConsumerGroup",
    "ConsumerGroupState",
    "ConsumerMember",
    "Partitions",
    "from_topic_partitions",
    "to_topic_partitions",
]

LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2
CONSUMER_PROTOCOL_TYPE = "consumer"

Partitions = dict[uuid.UUID, frozenset[int]]


class ConsumerGroupState(Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class ConsumerMember:
    """A member as stored: its metadata (record 5) and its current assignment (record 8)."""

    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    current: CurrentAssignment = field(default_factory=CurrentAssignment)

    @property
    def member_epoch(self) -> int:
        return self.current.member_epoch

    @property
    def state(self) -> MemberState:
        return self.current.state

    def metadata_value(self) -> ConsumerGroupMemberMetadataValue:
        return ConsumerGroupMemberMetadataValue(
            self.instance_id,
            self.rack_id,
            self.client_id,
            self.client_host,
            self.subscribed_topic_names,
            self.subscribed_topic_regex,
            self.rebalance_timeout_ms,
            self.server_assignor,
        )

    def with_metadata(self, value: ConsumerGroupMemberMetadataValue) -> ConsumerMember:
        return replace(
            self,
            instance_id=value.instance_id,
            rack_id=value.rack_id,
            client_id=value.client_id,
            client_host=value.client_host,
            subscribed_topic_names=value.subscribed_topic_names,
            subscribed_topic_regex=value.subscribed_topic_regex,
            rebalance_timeout_ms=value.rebalance_timeout_ms,
            server_assignor=value.server_assignor,
        )


def to_topic_partitions(
    partitions: Mapping[uuid.UUID, frozenset[int]], epoch: int | None = None
) -> tuple[TopicPartitions, ...]:
    """Sorted record form; `epoch` fills AssignmentEpochs (the epoch each partition was assigned at)."""
    out = []
    for topic_id in sorted(partitions, key=str):
        ps = tuple(sorted(partitions[topic_id]))
        if ps:
            out.append(TopicPartitions(topic_id, ps, None if epoch is None else (epoch,) * len(ps)))
    return tuple(out)


def from_topic_partitions(values: tuple[TopicPartitions, ...]) -> Partitions:
    out: Partitions = {}
    for tp in values:
        if tp.partitions:
            out[tp.topic_id] = out.get(tp.topic_id, frozenset()) | frozenset(tp.partitions)
    return out


@dataclass(eq=False)
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    metadata_hash: int = 0
    creation_time_ms: int = -1
    assignment_epoch: int = 0  # the target assignment's epoch
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    target: dict[str, Partitions] = field(default_factory=dict)
    deleted: bool = False
    # (topic id, partition) -> the member holding it (assigned or pending revocation)
    holders: dict[tuple[uuid.UUID, int], str] = field(default_factory=dict)
    # regex -> resolved topic names (in memory; refreshed from the broker's topics)
    regex_topics: dict[str, frozenset[str]] = field(default_factory=dict)

    # --- derived -----------------------------------------------------------------------------------------

    @property
    def state(self) -> ConsumerGroupState:
        if self.deleted:
            return ConsumerGroupState.DEAD
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        for m in self.members.values():
            if m.member_epoch != self.assignment_epoch or m.state is not MemberState.STABLE:
                return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def holder(self, topic_id: uuid.UUID, partition: int) -> str | None:
        return self.holders.get((topic_id, partition))

    def static_member(self, instance_id: str) -> ConsumerMember | None:
        for m in self.members.values():
            if m.instance_id == instance_id:
                return m
        return None

    def subscribed_topic_names(self) -> set[str]:
        names: set[str] = set()
        for m in self.members.values():
            names.update(m.subscribed_topic_names)
            if m.subscribed_topic_regex:
                names.update(self.regex_topics.get(m.subscribed_topic_regex, ()))
        return names

    def member_topic_names(self, member: ConsumerMember) -> set[str]:
        names = set(member.subscribed_topic_names)
        if member.subscribed_topic_regex:
            names.update(self.regex_topics.get(member.subscribed_topic_regex, ()))
        return names

    def preferred_assignor(self, default: str) -> str:
        """The server assignor most members asked for; the default if none asked (Kafka's
        `computePreferredServerAssignor`)."""
        votes = Counter(m.server_assignor for m in self.members.values() if m.server_assignor)
        if not votes:
            return default
        best = max(votes.values())
        return min(name for name, n in votes.items() if n == best)

    # --- applying records (replay) -----------------------------------------------------------------------

    def apply_member_metadata(self, member_id: str, value: ConsumerGroupMemberMetadataValue | None) -> None:
        if value is None:
            self._forget_holdings(member_id)
            self.members.pop(member_id, None)
            return
        existing = self.members.get(member_id)
        self.members[member_id] = (existing or ConsumerMember(member_id)).with_metadata(value)

    def apply_current_assignment(self, member_id: str, current: CurrentAssignment | None) -> None:
        member = self.members.get(member_id)
        self._forget_holdings(member_id)
        if current is None:
            if member is not None:
                self.members[member_id] = replace(member, current=CurrentAssignment())
            return
        if member is None:
            member = ConsumerMember(member_id)
        self.members[member_id] = replace(member, current=current)
        for partitions in (current.assigned, current.pending_revocation):
            for topic_id, ps in partitions.items():
                for p in ps:
                    holder = self.holders.get((topic_id, p))
                    if holder is not None and holder != member_id:
                        raise AssertionError(
                            f"group {self.group_id}: partition {topic_id}-{p} "
                            f"held by {holder} and {member_id}"
                        )
                    self.holders[(topic_id, p)] = member_id

    def _forget_holdings(self, member_id: str) -> None:
        member = self.members.get(member_id)
        if member is None:
            return
        for partitions in (member.current.assigned, member.current.pending_revocation):
            for topic_id, ps in partitions.items():
                for p in ps:
                    if self.holders.get((topic_id, p)) == member_id:
                        del self.holders[(topic_id, p)]

    # --- offsets (`group.Group`) ------------------------------------------------------------------------

    @property
    def group_type(self) -> GroupType:
        return GroupType.CONSUMER

    @property
    def is_empty(self) -> bool:
        return not self.members

    def validate_offset_commit(
        self, member_id: str, group_instance_id: str | None, generation: int, *, transactional: bool
    ) -> ErrorCode:
        """Kafka's `ConsumerGroup.validateOffsetCommit`: a commit without member (epoch < 0) is accepted
        only while the group is empty (a transactional one also when it names no member); otherwise the
        member must exist and name its current epoch, or the one before (KIP-1251, at the member level:
        exactly does not check each partition's assignment epoch) - else STALE_MEMBER_EPOCH
        (ILLEGAL_GENERATION for TxnOffsetCommit, which has no such code)."""
        if self.deleted:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation < 0 and not self.members:
            return ErrorCode.NONE
        if transactional and generation < 0 and not member_id:
            return ErrorCode.NONE
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation == member.member_epoch:
            return ErrorCode.NONE
        if 0 <= generation == member.current.previous_member_epoch:
            # KIP-1251: a commit sent just before the heartbeat response that moved the member on. Its
            # partitions were the member's at that epoch, and none of them can have gone to another member
            # since: that takes the member's own later heartbeat, which reaches us after this commit.
            return ErrorCode.NONE
        return ErrorCode.ILLEGAL_GENERATION if transactional else ErrorCode.STALE_MEMBER_EPOCH

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> ErrorCode:
        """OffsetFetch v9+: a member that names itself must exist and be at `member_epoch`."""
        if member_id is None or member_epoch < 0:
            return ErrorCode.NONE
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member.member_epoch != member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        return ErrorCode.NONE

    def validate_offset_delete(self) -> ErrorCode:
        return ErrorCode.NONE

    def validate_delete_group(self) -> ErrorCode:
        return ErrorCode.NONE if not self.members else ErrorCode.NON_EMPTY_GROUP

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return topic in self.subscribed_topic_names()

    def offset_expiration_base(self) -> OffsetExpirationBase | None:
        return _commit_timestamp

    # --- listing and describing --------------------------------------------------------------------------

    def as_listed_group(self) -> ListedGroup:
        return ListedGroup(self.group_id, CONSUMER_PROTOCOL_TYPE, self.state.value, GroupType.CONSUMER.value)

    def describe(self) -> DescribedGroup:
        """DescribeGroups (the classic API) on a consumer group: its state and members, no metadata."""
        members = [
            DescribedGroupMember(m.member_id, m.instance_id, m.client_id, m.client_host, b"", b"")
            for m in self.members.values()
        ]
        return DescribedGroup(
            ErrorCode.NONE, None, self.group_id, self.state.value, CONSUMER_PROTOCOL_TYPE, "", members
        )

    def tombstones(self) -> list[CoordinatorRecord]:
        """Kafka's `createGroupTombstoneRecords` order: current assignments, target members, target
        metadata, member metadata, then the group."""
        g = self.group_id
        keys: list[ConsumerKey] = [ConsumerGroupCurrentMemberAssignmentKey(g, m) for m in self.members]
        keys += [ConsumerGroupTargetAssignmentMemberKey(g, m) for m in self.target]
        keys.append(ConsumerGroupTargetAssignmentMetadataKey(g))
        keys += [ConsumerGroupMemberMetadataKey(g, m) for m in self.members]
        keys.append(ConsumerGroupMetadataKey(g))
        return [CoordinatorRecord(key, None) for key in keys]


def _commit_timestamp(offset: OffsetAndMetadata) -> int:
    return offset.commit_timestamp
