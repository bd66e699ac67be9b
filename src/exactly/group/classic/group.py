"""One classic group (Kafka's `ClassicGroup`); its members are `member.Member`.

A `ClassicGroup` holds both kinds of state described in `state.py`: the stored generation (changed by
`apply_stored_generation`, which only `ClassicGroupManager.replay` calls) and the rendezvous (members
joining and syncing, parked requests). Deadlines live in the coordinator's timers, not here.

Protocol selection is Kafka's: a protocol is a candidate when every member supports it; each member
votes for the first candidate in its own preference order; the most votes win (ties: the protocol
listed first by the member that joined first).
"""

from __future__ import annotations

import struct
from collections import Counter
from dataclasses import dataclass, field

from exactly.errors import ErrorCode
from exactly.group.classic.member import Member, Protocols
from exactly.group.classic.state import ClassicGroupState, GroupEvent, next_state
from exactly.group.group import GroupType, OffsetExpirationBase
from exactly.group.offsets import OffsetAndMetadata
from exactly.group.records import CoordinatorRecord, GroupMetadataKey, GroupMetadataValue
from exactly.protocol.messages.describe_groups import DescribedGroup, DescribedGroupMember
from exactly.protocol.messages.list_groups import ListedGroup

__all__ = ["CONSUMER_PROTOCOL_TYPE", "ClassicGroup", "parse_subscription_topics"]

CONSUMER_PROTOCOL_TYPE = "consumer"


@dataclass(eq=False)
class ClassicGroup:
    group_id: str
    state_timestamp: int = -1  # wall ms when the group entered its state
    state: ClassicGroupState = ClassicGroupState.EMPTY
    previous_state: ClassicGroupState = ClassicGroupState.EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)  # in joining order
    static_members: dict[str, str] = field(default_factory=dict)  # group.instance.id -> member id
    pending_join: set[str] = field(default_factory=set)  # member ids handed out with MEMBER_ID_REQUIRED
    pending_sync: set[str] = field(default_factory=set)  # members that have not sent SyncGroup yet
    supported_protocols: Counter[str] = field(default_factory=Counter)
    # the initial rebalance (group.initial.rebalance.delay.ms): (delay, time left of the rebalance timeout)
    initial_rebalance: tuple[int, int] | None = None
    new_member_added: bool = False

    # --- state -------------------------------------------------------------------------------------------

    def transition(self, event: GroupEvent, now_ms: int) -> None:
        new = next_state(self.state, event)
        self.previous_state = self.state
        self.state = new
        self.state_timestamp = now_ms

    def is_in(self, *states: ClassicGroupState) -> bool:
        return self.state in states

    @property
    def can_rebalance(self) -> bool:
        """PreparingRebalance is reachable (Kafka: its valid previous states)."""
        return self.state in (
            ClassicGroupState.EMPTY,
            ClassicGroupState.STABLE,
            ClassicGroupState.COMPLETING_REBALANCE,
        )

    # --- members -----------------------------------------------------------------------------------------

    def add(self, member: Member) -> None:
        if member.group_instance_id is not None:
            if member.group_instance_id in self.static_members:
                raise ValueError(f"static member {member.group_instance_id} is already in the group")
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self.supported_protocols.update(name for name, _ in member.protocols)
        self.pending_join.discard(member.member_id)

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self.supported_protocols.subtract(name for name, _ in member.protocols)
            self.supported_protocols += Counter()  # drop zero counts
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.pending_join.discard(member_id)
        self.pending_sync.discard(member_id)
        return member

    def update_protocols(self, member: Member, protocols: Protocols) -> None:
        self.supported_protocols.subtract(name for name, _ in member.protocols)
        member.protocols = protocols
        self.supported_protocols.update(name for name, _ in protocols)
        self.supported_protocols += Counter()

    def rename_static_member(self, old_id: str, new_id: str) -> Member:
        """Give a static member a new member id (a restarted instance), keeping everything else."""
        member = self.members.pop(old_id)
        member.member_id = new_id
        self.members[new_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        return member

    def has_all_members_joined(self) -> bool:
        return not self.pending_join and all(m.awaiting_join for m in self.members.values())

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if not m.awaiting_join]

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else pick one that did; False when nobody rejoined."""
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.awaiting_join:
            return True
        for member in self.members.values():
            if member.awaiting_join:
                self.leader_id = member.member_id
                return True
        return False

    # --- protocols ---------------------------------------------------------------------------------------

    def candidate_protocols(self) -> set[str]:
        n = len(self.members)
        return {name for name, count in self.supported_protocols.items() if count == n}

    def select_protocol(self) -> str:
        if not self.members:
            raise ValueError("an empty group has no protocol")
        candidates = self.candidate_protocols()
        votes: Counter[str] = Counter(m.vote(candidates) for m in self.members.values())
        return votes.most_common(1)[0][0]

    def supports_protocols(self, protocol_type: str, names: list[str]) -> bool:
        if self.state is ClassicGroupState.EMPTY:
            return bool(protocol_type) and bool(names)
        if self.protocol_type != protocol_type:
            return False
        n = len(self.members)
        return any(self.supported_protocols.get(name, 0) == n for name in names)

    @property
    def uses_consumer_protocol(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to (consumer protocol only); None when unknown."""
        if self.protocol_type is None or not self.uses_consumer_protocol:
            return None
        if not self.members:
            return set()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            parsed = parse_subscription_topics(member.metadata(self.protocol_name))
            if parsed is None:
                return None
            topics.update(parsed)
        return topics

    def is_subscribed_to(self, topic: str) -> bool:
        topics = self.subscribed_topics()
        if topics is None:
            return self.uses_consumer_protocol
        return topic in topics

    # --- validation (Kafka's ClassicGroup.validate*) ------------------------------------------------------

    def validate_member(self, member_id: str, group_instance_id: str | None) -> ErrorCode:
        if group_instance_id is not None:
            existing = self.static_members.get(group_instance_id)
            if existing is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if existing != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
        if member_id not in self.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return ErrorCode.NONE

    def validate_offset_commit(
        self, member_id: str, group_instance_id: str | None, generation: int, *, transactional: bool
    ) -> ErrorCode:
        """OffsetCommit / TxnOffsetCommit (KIP-447) fencing against this group's generation."""
        if self.state is ClassicGroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation < 0 and self.state is ClassicGroupState.EMPTY:
            return ErrorCode.NONE  # admin or manually assigned consumer
        if generation >= 0 or member_id or group_instance_id is not None:
            error = self.validate_member(member_id, group_instance_id)
            if error:
                return error
            if generation != self.generation:
                return ErrorCode.ILLEGAL_GENERATION
        elif not transactional and self.state is not ClassicGroupState.EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if not transactional and self.state is ClassicGroupState.COMPLETING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    # --- as a `group.Group` ------------------------------------------------------------------------------

    @property
    def group_type(self) -> GroupType:
        return GroupType.CLASSIC

    @property
    def is_empty(self) -> bool:
        return self.state is ClassicGroupState.EMPTY

    def validate_offset_delete(self) -> ErrorCode:
        """A group with members may delete offsets only when it uses the consumer protocol (whose
        subscriptions tell which topics it consumes)."""
        if self.state is not ClassicGroupState.EMPTY and not self.uses_consumer_protocol:
            return ErrorCode.NON_EMPTY_GROUP
        return ErrorCode.NONE

    def validate_delete_group(self) -> ErrorCode:
        return ErrorCode.NONE if self.state is ClassicGroupState.EMPTY else ErrorCode.NON_EMPTY_GROUP

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return self.state is not ClassicGroupState.EMPTY and self.is_subscribed_to(topic)

    def offset_expiration_base(self) -> OffsetExpirationBase | None:
        """Kafka's `offsetExpirationCondition` (KIP-211): an Empty group's offsets expire counting from
        when it became empty (from the commit for records that do not say); a Stable consumer-protocol
        group's offsets of topics it no longer consumes count from their commit; a group without a
        protocol type (offsets only) counts from the commit; otherwise nothing expires."""
        if self.protocol_type is None:
            return _commit_timestamp
        if self.state is ClassicGroupState.EMPTY:
            empty_since = self.state_timestamp
            if empty_since >= 0:
                return lambda _: empty_since
            return _commit_timestamp
        if (
            self.uses_consumer_protocol
            and self.state is ClassicGroupState.STABLE
            and self.subscribed_topics() is not None
        ):
            return _commit_timestamp
        return None

    def as_listed_group(self) -> ListedGroup:
        return ListedGroup(self.group_id, self.protocol_type or "", self.state.value, GroupType.CLASSIC.value)

    def describe(self) -> DescribedGroup:
        """DescribeGroups: members' metadata and assignments only once Stable."""
        stable = self.state is ClassicGroupState.STABLE
        members = [
            DescribedGroupMember(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.metadata(self.protocol_name) if stable else b"",
                m.assignment if stable else b"",
            )
            for m in self.members.values()
        ]
        return DescribedGroup(
            ErrorCode.NONE,
            None,
            self.group_id,
            self.state.value,
            self.protocol_type or "",
            (self.protocol_name or "") if stable else "",
            members,
        )

    def tombstones(self) -> list[CoordinatorRecord]:
        return [CoordinatorRecord(GroupMetadataKey(self.group_id), None)]

    # --- the stored generation ---------------------------------------------------------------------------

    def to_record(self, assignments: dict[str, bytes], now_ms: int) -> GroupMetadataValue:
        """The GroupMetadata value storing this generation with `assignments` (member id -> bytes)."""
        return GroupMetadataValue(
            protocol_type=self.protocol_type or "",
            generation=self.generation,
            protocol=self.protocol_name if self.members else None,
            leader=self.leader_id if self.members else None,
            current_state_timestamp=now_ms,
            members=tuple(
                m.to_record(self.protocol_name, assignments.get(m.member_id, b""))
                for m in self.members.values()
            ),
        )

    def apply_stored_generation(
        self, value: GroupMetadataValue
    ) -> tuple[list[Member], list[tuple[str, str]], list[Member]]:
        """Become the generation a replayed GroupMetadata record describes (only `replay` calls this).

        Live members that the record keeps stay the same objects (with their parked requests); a static
        member stored under a new member id is renamed; members the record does not name are dropped.
        Returns (removed, renamed as (old id, new id), added) so the caller can move their deadlines.
        """
        live = dict(self.members)
        members: dict[str, Member] = {}
        renamed: list[tuple[str, str]] = []
        added: list[Member] = []
        for stored in value.members:
            member = live.pop(stored.member_id, None)
            if member is None and stored.group_instance_id is not None:
                old_id = self.static_members.get(stored.group_instance_id)
                if old_id is not None and old_id in live:
                    member = live.pop(old_id)
                    member.member_id = stored.member_id
                    renamed.append((old_id, stored.member_id))
            rebalance_timeout = (
                stored.rebalance_timeout if stored.rebalance_timeout >= 0 else stored.session_timeout
            )
            if member is None:
                member = Member(
                    stored.member_id,
                    stored.group_instance_id,
                    stored.client_id,
                    stored.client_host,
                    rebalance_timeout,
                    stored.session_timeout,
                    value.protocol_type,
                    [(value.protocol or "", stored.subscription)],
                )
                added.append(member)
            else:
                member.group_instance_id = stored.group_instance_id
                member.client_id = stored.client_id
                member.client_host = stored.client_host
                member.rebalance_timeout_ms = rebalance_timeout
                member.session_timeout_ms = stored.session_timeout
                if (value.protocol or "", stored.subscription) not in member.protocols:
                    member.protocols = [(value.protocol or "", stored.subscription)]
            member.assignment = stored.assignment
            members[stored.member_id] = member
        removed = list(live.values())
        self.members = members
        self.static_members = {
            m.group_instance_id: m.member_id for m in members.values() if m.group_instance_id is not None
        }
        self.supported_protocols = Counter(name for m in members.values() for name, _ in m.protocols)
        self.pending_sync &= set(members)
        self.generation = value.generation
        self.protocol_type = value.protocol_type or None
        self.protocol_name = value.protocol
        self.leader_id = value.leader
        event = GroupEvent.GENERATION_STORED if members else GroupEvent.EMPTY_STORED
        self.transition(event, value.current_state_timestamp)
        return removed, renamed, added

    def stored_view(self) -> tuple[object, ...]:
        """What a GroupMetadata record determines, for comparing a live group with a replayed one."""
        return (
            self.state,
            self.generation,
            self.protocol_type,
            self.protocol_name,
            self.leader_id,
            self.state_timestamp,
            tuple(
                (
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.rebalance_timeout_ms,
                    m.session_timeout_ms,
                    m.metadata(self.protocol_name),
                    m.assignment,
                )
                for m in self.members.values()
            ),
        )


def _commit_timestamp(offset: OffsetAndMetadata) -> int:
    return offset.commit_timestamp


def parse_subscription_topics(metadata: bytes) -> list[str] | None:
    """The topics of a ConsumerProtocolSubscription (any version: v0 is the common prefix).

    ``int16 version, int32 count, count x (int16 length, UTF-8 topic), ...``; None when malformed.
    """
    try:
        (version, count) = struct.unpack_from(">hi", metadata, 0)
        if version < 0 or count < 0:
            return None
        pos = 6
        topics = []
        for _ in range(count):
            (n,) = struct.unpack_from(">h", metadata, pos)
            pos += 2
            if n < 0 or pos + n > len(metadata):
                return None
            topics.append(metadata[pos : pos + n].decode())
            pos += n
        return topics
    except (struct.error, UnicodeDecodeError):
        return None
