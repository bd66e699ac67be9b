"""The KIP-848 consumer group protocol (ConsumerGroupHeartbeat, ConsumerGroupDescribe): the consumer
half of Kafka's `GroupMetadataManager`, sans-IO.

A heartbeat runs Kafka's steps in order, computing on copies and returning the records that say what
changed (the stored state moves only when `replay` applies them):

1. validate the request (INVALID_REQUEST, UNSUPPORTED_ASSIGNOR, INVALID_REGULAR_EXPRESSION) and find
   the group: epoch 0 creates it (an empty classic group of the same id is replaced: its GroupMetadata
   tombstone comes first, its offsets stay); another type, or a non-empty classic group, is
   GROUP_ID_NOT_FOUND;
2. find the member: epoch 0 joins (a new member, GROUP_MAX_SIZE_REACHED past group.consumer.max.size; a
   static member replacing its departed instance, UNRELEASED_INSTANCE_ID while it has not left; or the
   same member id starting over); any other epoch must name a known member (UNKNOWN_MEMBER_ID) at its
   epoch, or its previous epoch owning a subset of its partitions (else FENCED_MEMBER_EPOCH);
3. update its metadata (record 5) and bump the group epoch (record 3) when a subscription changed or
   the subscribed topics' metadata hash moved (partitions added, topics created or deleted);
4. recompute the target assignment with the group's assignor when the group epoch is above the target
   epoch (records 7 for each member whose target changed, then record 6);
5. reconcile the member (`reconciliation.py`; record 8 when its current assignment changed), arm its
   rebalance timeout while it has partitions to revoke, and re-arm its session.

The response carries the assignment when the member joined, sent a full request, or its partitions
changed. Leaving with epoch -1 (or a session or rebalance timeout) fences the member: tombstones for
records 8, 7 and 5, then the group epoch + 1. A static member leaving with -2 stays, at epoch -2, with
its partitions, until its instance comes back under a new member id or its session ends.
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, replace
from typing import Protocol

from exactly.clock import Clock
from exactly.errors import ErrorCode
from exactly.group.classic.group import ClassicGroup
from exactly.group.classic.state import ClassicGroupState
from exactly.group.client import ClientInfo
from exactly.group.config import GroupConfig
from exactly.group.consumer.assignors import Assignor, MemberSpec, builtin_assignors
from exactly.group.consumer.group import (
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    ConsumerGroup,
    ConsumerMember,
    Partitions,
    from_topic_partitions,
    to_topic_partitions,
)
from exactly.group.consumer.reconciliation import CurrentAssignment, MemberState, next_assignment
from exactly.group.consumer.records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    ConsumerKey,
    ConsumerValue,
)
from exactly.group.consumer.regex import InvalidRegex, compile_regex, resolve
from exactly.group.deadlines import ConsumerRebalanceDeadline, ConsumerSessionDeadline, Deadline
from exactly.group.records import CoordinatorRecord
from exactly.group.result import Result
from exactly.group.timers import Timers
from exactly.protocol.messages.consumer_group_describe import (
    Assignment as DescribedAssignment,
)
from exactly.protocol.messages.consumer_group_describe import (
    DescribedGroup,
    Member,
)
from exactly.protocol.messages.consumer_group_describe import (
    TopicPartitions as DescribedTopicPartitions,
)
from exactly.protocol.messages.consumer_group_heartbeat import (
    Assignment,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    TopicPartitions,
)

__all__ = ["ConsumerGroupManager", "TopicImage", "TopicView"]

log = logging.getLogger(__name__)

_CLIENT_MEMBER_ID_VERSION = 1  # v1+: the member generates its id (KIP-1082)
_CONSUMER_MEMBER_TYPE = 1


class TopicView(Protocol):
    """What the coordinator needs of a topic (the broker's `TopicInfo` has these)."""

    @property
    def name(self) -> str: ...

    @property
    def topic_id(self) -> uuid.UUID: ...

    @property
    def partitions(self) -> int: ...


# The broker's topics now: name -> topic.
TopicImage = Callable[[], Mapping[str, TopicView]]


@dataclass(frozen=True, slots=True)
class _Refusal:
    code: ErrorCode
    message: str


def _no_topics() -> Mapping[str, TopicView]:
    return {}


@dataclass(frozen=True, slots=True)
class _Subscription:
    """A group's subscribed topics that exist, resolved against the broker's topics."""

    regex_topics: dict[str, frozenset[str]]
    topics: list[tuple[str, uuid.UUID, int]]  # (name, id, partitions), by name
    metadata_hash: int


def _error(
    code: ErrorCode, message: str | None = None, member_id: str | None = None, epoch: int = 0
) -> ConsumerGroupHeartbeatResponse:
    return ConsumerGroupHeartbeatResponse(
        error_code=code, error_message=message, member_id=member_id, member_epoch=epoch
    )


def _changed(a: Mapping[uuid.UUID, frozenset[int]], b: Mapping[uuid.UUID, frozenset[int]]) -> bool:
    return {t: ps for t, ps in a.items() if ps} != {t: ps for t, ps in b.items() if ps}


class ConsumerGroupManager:
    def __init__(
        self,
        config: GroupConfig,
        clock: Clock,
        groups: dict[str, ConsumerGroup],
        classic_groups: dict[str, ClassicGroup],
        timers: Timers[Deadline],
        topics: TopicImage | None = None,
        *,
        member_id_factory: Callable[[], str] | None = None,
    ) -> None:
        self.config = config
        self.clock = clock
        self.groups = groups
        self.classic_groups = classic_groups
        self.timers = timers
        self.topics: TopicImage = topics or _no_topics
        available = builtin_assignors()
        unknown = [name for name in config.consumer_assignors if name not in available]
        if unknown or not config.consumer_assignors:
            raise ValueError(f"group.consumer.assignors: unknown assignor(s) {unknown or '(none)'}")
        self.assignors: dict[str, Assignor] = {name: available[name] for name in config.consumer_assignors}
        self.default_assignor = config.consumer_assignors[0]
        self._new_member_id = member_id_factory or (lambda: str(uuid.uuid4()))

    def _now(self) -> int:
        return self.clock.monotonic_ms()

    # --- ConsumerGroupHeartbeat --------------------------------------------------------------------------

    def heartbeat(
        self, client: ClientInfo, request: ConsumerGroupHeartbeatRequest
    ) -> Result[ConsumerGroupHeartbeatResponse]:
        group_id = request.group_id
        invalid = self._validate(client, request)
        if invalid is not None:
            return Result(_error(*invalid), group_id)
        epoch = request.member_epoch
        if epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(request)
        records: list[CoordinatorRecord] = []
        group = self.groups.get(group_id)
        if group is None:
            if epoch != 0:
                return Result(_error(ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found."))
            classic = self.classic_groups.get(group_id)
            if classic is not None:
                if classic.state is not ClassicGroupState.EMPTY:
                    message = f"Group {group_id} is a classic group with members: it cannot be converted."
                    return Result(_error(ErrorCode.GROUP_ID_NOT_FOUND, message), group_id)
                records.extend(classic.tombstones())  # an empty classic group is simply replaced
            group = ConsumerGroup(group_id, creation_time_ms=self.clock.milliseconds())
        member_id = request.member_id or self._new_member_id()
        found = self._find_member(group, member_id, request)
        if isinstance(found, _Refusal):
            return Result(_error(found.code, found.message), group_id)
        member, replaced = found
        result = self._heartbeat(client, request, group, member, replaced, records)
        result.group_id = group_id
        return result

    def _validate(
        self, client: ClientInfo, request: ConsumerGroupHeartbeatRequest
    ) -> tuple[ErrorCode, str] | None:
        """Kafka's `throwIfConsumerGroupHeartbeatRequestIsInvalid`, plus the assignor and regex checks."""
        epoch = request.member_epoch
        invalid = ErrorCode.INVALID_REQUEST
        if not request.group_id:
            return invalid, "GroupId can't be empty."
        if not request.member_id and (
            client.api_version >= _CLIENT_MEMBER_ID_VERSION or epoch > 0 or epoch == LEAVE_EPOCH
        ):
            return invalid, "MemberId can't be empty."
        if request.instance_id == "":
            return invalid, "InstanceId can't be empty."
        if request.rack_id == "":
            return invalid, "RackId can't be empty."
        if epoch == 0:
            if request.rebalance_timeout_ms == -1:
                return invalid, "RebalanceTimeoutMs must be provided in first request."
            if request.topic_partitions is None or request.topic_partitions:
                return invalid, "TopicPartitions must be empty when (re-)joining."
            if request.subscribed_topic_names is None and request.subscribed_topic_regex is None:
                return invalid, "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
        elif epoch == STATIC_LEAVE_EPOCH:
            if request.instance_id is None:
                return invalid, "InstanceId can't be null."
        elif epoch < STATIC_LEAVE_EPOCH:
            return invalid, f"MemberEpoch {epoch} is invalid."
        if request.server_assignor is not None and request.server_assignor not in self.assignors:
            message = f"ServerAssignor {request.server_assignor} is not supported."
            return ErrorCode.UNSUPPORTED_ASSIGNOR, message
        if request.subscribed_topic_regex:
            try:
                compile_regex(request.subscribed_topic_regex)
            except InvalidRegex as e:
                return ErrorCode.INVALID_REGULAR_EXPRESSION, f"SubscribedTopicRegex is invalid: {e}"
        return None

    def _find_member(
        self, group: ConsumerGroup, member_id: str, request: ConsumerGroupHeartbeatRequest
    ) -> tuple[ConsumerMember, ConsumerMember | None] | _Refusal:
        """(the member as it is, the static member it replaces) or (error, message)."""
        epoch = request.member_epoch
        instance_id = request.instance_id
        if epoch == 0:
            if instance_id is not None:
                static = group.static_member(instance_id)
                if static is not None and static.member_id != member_id:
                    if static.member_epoch != STATIC_LEAVE_EPOCH:
                        return _Refusal(
                            ErrorCode.UNRELEASED_INSTANCE_ID,
                            f"Static member {static.member_id} with instance id {instance_id} "
                            "is present in the consumer group.",
                        )
                    # The departed instance's partitions and epoch go to its successor.
                    successor = replace(
                        static,
                        member_id=member_id,
                        current=replace(static.current, member_epoch=0),
                    )
                    return successor, static
            existing = group.members.get(member_id)
            if existing is not None:
                # The member starts over (it was fenced, or restarted with its id): it owns nothing.
                return replace(existing, current=CurrentAssignment()), None
            if len(group.members) >= self.config.consumer_max_size:
                return _Refusal(
                    ErrorCode.GROUP_MAX_SIZE_REACHED,
                    f"The consumer group has reached its maximum capacity of "
                    f"{self.config.consumer_max_size} members.",
                )
            return ConsumerMember(member_id), None
        member = group.members.get(member_id)
        if member is None:
            message = f"Member {member_id} is not a member of group {group.group_id}."
            return _Refusal(ErrorCode.UNKNOWN_MEMBER_ID, message)
        if instance_id is not None and member.instance_id is not None and member.instance_id != instance_id:
            return _Refusal(ErrorCode.FENCED_INSTANCE_ID, f"Member {member_id} has another instance id.")
        if epoch > member.member_epoch:
            return _Refusal(
                ErrorCode.FENCED_MEMBER_EPOCH, f"The consumer group member has a greater epoch ({epoch})."
            )
        if epoch < member.member_epoch:
            owned = self._owned(request)
            if (
                epoch != member.current.previous_member_epoch
                or owned is None
                or not _subset(owned, member.current.assigned)
            ):
                message = f"The consumer group member has a smaller epoch ({epoch})."
                return _Refusal(ErrorCode.FENCED_MEMBER_EPOCH, message)
        return member, None

    def _owned(self, request: ConsumerGroupHeartbeatRequest) -> Partitions | None:
        if request.topic_partitions is None:
            return None
        owned: Partitions = {}
        for tp in request.topic_partitions:
            owned[tp.topic_id] = owned.get(tp.topic_id, frozenset()) | frozenset(tp.partitions)
        return owned

    def _heartbeat(
        self,
        client: ClientInfo,
        request: ConsumerGroupHeartbeatRequest,
        group: ConsumerGroup,
        member: ConsumerMember,
        replaced: ConsumerMember | None,
        records: list[CoordinatorRecord],
    ) -> Result[ConsumerGroupHeartbeatResponse]:
        group_id = group.group_id
        member_id = member.member_id
        is_new = member_id not in group.members and replaced is None
        regex = request.subscribed_topic_regex
        updated = replace(
            member,
            instance_id=request.instance_id if request.instance_id is not None else member.instance_id,
            rack_id=request.rack_id if request.rack_id is not None else member.rack_id,
            client_id=client.client_id,
            client_host=client.client_host,
            subscribed_topic_names=(
                tuple(sorted(set(request.subscribed_topic_names)))
                if request.subscribed_topic_names is not None
                else member.subscribed_topic_names
            ),
            subscribed_topic_regex=(regex or None) if regex is not None else member.subscribed_topic_regex,
            rebalance_timeout_ms=(
                request.rebalance_timeout_ms
                if request.rebalance_timeout_ms != -1
                else member.rebalance_timeout_ms
            ),
            server_assignor=(
                request.server_assignor if request.server_assignor is not None else member.server_assignor
            ),
        )
        subscription_changed = is_new or (
            updated.subscribed_topic_names != member.subscribed_topic_names
            or updated.subscribed_topic_regex != member.subscribed_topic_regex
        )
        if replaced is not None:
            records.extend(self._member_tombstones(group_id, replaced.member_id))
        if is_new or replaced is not None or updated.metadata_value() != member.metadata_value():
            metadata_key = ConsumerGroupMemberMetadataKey(group_id, member_id)
            records.append(CoordinatorRecord(metadata_key, updated.metadata_value()))
        members = dict(group.members)
        if replaced is not None:
            members.pop(replaced.member_id, None)
        members[member_id] = updated
        subscription = self._subscription(list(members.values()))
        group_epoch = group.group_epoch
        if subscription_changed or subscription.metadata_hash != group.metadata_hash:
            group_epoch += 1
            records.append(
                CoordinatorRecord(
                    ConsumerGroupMetadataKey(group_id),
                    ConsumerGroupMetadataValue(
                        group_epoch, subscription.metadata_hash, group.creation_time_ms
                    ),
                )
            )
        group.regex_topics = subscription.regex_topics  # a cache of the broker's topics, not stored state
        target = dict(group.target)
        if replaced is not None and replaced.member_id in target:
            target[member_id] = target.pop(replaced.member_id)
            records.append(
                CoordinatorRecord(
                    ConsumerGroupTargetAssignmentMemberKey(group_id, member_id),
                    ConsumerGroupTargetAssignmentMemberValue(to_topic_partitions(target[member_id])),
                )
            )
        target_epoch = group.assignment_epoch
        if group_epoch > target_epoch:
            target = self._assign(group, members, target, subscription, records)
            target_epoch = group_epoch
            records.append(
                CoordinatorRecord(
                    ConsumerGroupTargetAssignmentMetadataKey(group_id),
                    ConsumerGroupTargetAssignmentMetadataValue(target_epoch, self.clock.milliseconds()),
                )
            )
        ids = {name: topic_id for name, topic_id, _ in subscription.topics}
        subscribed = frozenset(ids[n] for n in self._member_topics(updated, subscription) if n in ids)
        replaced_id = replaced.member_id if replaced is not None else None

        def holder(topic_id: uuid.UUID, partition: int) -> str | None:
            held = group.holder(topic_id, partition)
            return member_id if held == replaced_id else held

        owned = self._owned(request)
        current = next_assignment(
            member_id,
            updated.current,
            target_epoch,
            target.get(member_id, {}),
            subscribed,
            owned,
            holder,
            subscription_changed=subscription_changed,
        )
        stored = group.members.get(member_id)
        if stored is None or current != stored.current:
            records.append(self._current_record(group_id, member_id, current))
        self._arm_timers(group_id, updated, current)
        full = (
            request.rebalance_timeout_ms != -1
            and (request.subscribed_topic_names is not None or request.subscribed_topic_regex is not None)
            and request.topic_partitions is not None
        )
        response = ConsumerGroupHeartbeatResponse(
            member_id=member_id,
            member_epoch=current.member_epoch,
            heartbeat_interval_ms=self.config.consumer_heartbeat_interval_ms,
        )
        if request.member_epoch == 0 or full or _changed(current.assigned, member.current.assigned):
            assigned = sorted(current.assigned.items(), key=_by_id)
            response.assignment = Assignment([TopicPartitions(t, sorted(ps)) for t, ps in assigned if ps])
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "ConsumerGroupHeartbeat group %s member %s epoch %d -> epoch %d %s "
                "(group epoch %d, target %d)",
                group_id,
                member_id,
                request.member_epoch,
                current.member_epoch,
                current.state.label,
                group_epoch,
                target_epoch,
            )
        return Result(response, group_id, records)

    def _member_topics(self, member: ConsumerMember, subscription: _Subscription) -> set[str]:
        names = set(member.subscribed_topic_names)
        if member.subscribed_topic_regex:
            names |= subscription.regex_topics.get(member.subscribed_topic_regex, frozenset())
        return names

    def _subscription(self, members: Collection[ConsumerMember]) -> _Subscription:
        image = self.topics()
        regexes = {m.subscribed_topic_regex for m in members if m.subscribed_topic_regex}
        regex_topics = {r: resolve(r, image) for r in sorted(regexes)}
        names: set[str] = set()
        for m in members:
            names.update(m.subscribed_topic_names)
            if m.subscribed_topic_regex:
                names |= regex_topics[m.subscribed_topic_regex]
        topics = sorted((n, image[n].topic_id, image[n].partitions) for n in names if n in image)
        digest = hashlib.blake2b(digest_size=8)
        for name, topic_id, partitions in topics:
            digest.update(f"{name}\0{topic_id}\0{partitions}\n".encode())
        metadata_hash = int.from_bytes(digest.digest(), "big", signed=True) if topics else 0
        return _Subscription(regex_topics, topics, metadata_hash)

    def _assign(
        self,
        group: ConsumerGroup,
        members: dict[str, ConsumerMember],
        target: dict[str, Partitions],
        subscription: _Subscription,
        records: list[CoordinatorRecord],
    ) -> dict[str, Partitions]:
        """The next target assignment; records 7 for the members whose target changed."""
        ids = {name: topic_id for name, topic_id, _ in subscription.topics}
        specs = {
            mid: MemberSpec(
                frozenset(ids[n] for n in self._member_topics(m, subscription) if n in ids),
                m.instance_id,
                m.rack_id,
                target.get(mid, {}),
            )
            for mid, m in members.items()
        }
        votes = ConsumerGroup(group.group_id, members=members)
        assignor = self.assignors[votes.preferred_assignor(self.default_assignor)]
        computed = assignor.assign(specs, [(topic_id, n) for _, topic_id, n in subscription.topics])
        out: dict[str, Partitions] = {}
        for mid in members:
            new = dict(computed.get(mid, {}))
            out[mid] = new
            if mid not in target or _changed(target[mid], new):
                records.append(
                    CoordinatorRecord(
                        ConsumerGroupTargetAssignmentMemberKey(group.group_id, mid),
                        ConsumerGroupTargetAssignmentMemberValue(to_topic_partitions(new)),
                    )
                )
        return out

    @staticmethod
    def _current_record(group_id: str, member_id: str, current: CurrentAssignment) -> CoordinatorRecord:
        return CoordinatorRecord(
            ConsumerGroupCurrentMemberAssignmentKey(group_id, member_id),
            ConsumerGroupCurrentMemberAssignmentValue(
                current.member_epoch,
                current.previous_member_epoch,
                int(current.state),
                to_topic_partitions(current.assigned, max(current.member_epoch, 0)),
                to_topic_partitions(current.pending_revocation),
            ),
        )

    @staticmethod
    def _member_tombstones(group_id: str, member_id: str) -> list[CoordinatorRecord]:
        return [
            CoordinatorRecord(ConsumerGroupCurrentMemberAssignmentKey(group_id, member_id), None),
            CoordinatorRecord(ConsumerGroupTargetAssignmentMemberKey(group_id, member_id), None),
            CoordinatorRecord(ConsumerGroupMemberMetadataKey(group_id, member_id), None),
        ]

    def _arm_timers(self, group_id: str, member: ConsumerMember, current: CurrentAssignment) -> None:
        now = self._now()
        member_id = member.member_id
        self.timers.schedule(
            ConsumerSessionDeadline(group_id, member_id), now + self.config.consumer_session_timeout_ms
        )
        rebalance = ConsumerRebalanceDeadline(group_id, member_id)
        if current.state is MemberState.UNREVOKED_PARTITIONS:
            if rebalance not in self.timers or member.current.state is not MemberState.UNREVOKED_PARTITIONS:
                self.timers.schedule(rebalance, now + max(member.rebalance_timeout_ms, 0))
        else:
            self.timers.cancel(rebalance)

    # --- leaving and fencing -----------------------------------------------------------------------------

    def _leave(self, request: ConsumerGroupHeartbeatRequest) -> Result[ConsumerGroupHeartbeatResponse]:
        group_id = request.group_id
        epoch = request.member_epoch
        group = self.groups.get(group_id)
        if group is None:
            message = f"Consumer group {group_id} not found."
            return Result(_error(ErrorCode.GROUP_ID_NOT_FOUND, message), group_id)
        instance_id = request.instance_id
        if instance_id is not None:
            member = group.static_member(instance_id)
            if member is None:
                message = f"Instance id {instance_id} is unknown."
                return Result(_error(ErrorCode.UNKNOWN_MEMBER_ID, message), group_id)
            if member.member_id != request.member_id:
                message = f"Static member {request.member_id} with instance id {instance_id} was replaced."
                return Result(_error(ErrorCode.FENCED_INSTANCE_ID, message), group_id)
        else:
            found = group.members.get(request.member_id)
            if found is None:
                message = f"Member {request.member_id} is not a member of group {group_id}."
                return Result(_error(ErrorCode.UNKNOWN_MEMBER_ID, message), group_id)
            member = found
        response = ConsumerGroupHeartbeatResponse(member_id=member.member_id, member_epoch=epoch)
        if epoch == STATIC_LEAVE_EPOCH:
            # Stays, holding its partitions, until its instance returns or its session ends.
            current = CurrentAssignment(
                STATIC_LEAVE_EPOCH, member.member_epoch, MemberState.STABLE, member.current.assigned, {}
            )
            self.timers.cancel(ConsumerRebalanceDeadline(group_id, member.member_id))
            return Result(response, group_id, [self._current_record(group_id, member.member_id, current)])
        return Result(response, group_id, self._fence(group, member.member_id))

    def _fence(self, group: ConsumerGroup, member_id: str) -> list[CoordinatorRecord]:
        """Remove a member: tombstones for its records 8, 7 and 5, then the group epoch + 1."""
        self.timers.cancel(ConsumerSessionDeadline(group.group_id, member_id))
        self.timers.cancel(ConsumerRebalanceDeadline(group.group_id, member_id))
        records = self._member_tombstones(group.group_id, member_id)
        records.append(
            CoordinatorRecord(
                ConsumerGroupMetadataKey(group.group_id),
                ConsumerGroupMetadataValue(
                    group.group_epoch + 1, group.metadata_hash, group.creation_time_ms
                ),
            )
        )
        return records

    def on_session_deadline(self, group_id: str, member_id: str) -> Result[None]:
        group = self.groups.get(group_id)
        if group is None or member_id not in group.members:
            return Result(None, group_id)
        log.info("group %s: member %s fenced, its session timed out", group_id, member_id)
        return Result(None, group_id, self._fence(group, member_id))

    def on_rebalance_deadline(self, group_id: str, member_id: str) -> Result[None]:
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None or member.state is not MemberState.UNREVOKED_PARTITIONS:
            return Result(None, group_id)
        log.info("group %s: member %s fenced, it did not revoke its partitions in time", group_id, member_id)
        return Result(None, group_id, self._fence(group, member_id))

    # --- ConsumerGroupDescribe ---------------------------------------------------------------------------

    def describe(self, group_id: str) -> DescribedGroup:
        if not group_id:
            return DescribedGroup(ErrorCode.INVALID_GROUP_ID, "GroupId can't be empty.", group_id)
        group = self.groups.get(group_id)
        if group is None:
            message = (
                f"Group {group_id} is not a consumer group."
                if group_id in self.classic_groups
                else f"Group {group_id} not found."
            )
            return DescribedGroup(ErrorCode.GROUP_ID_NOT_FOUND, message, group_id)
        names = {info.topic_id: name for name, info in self.topics().items()}

        def assignment(partitions: Mapping[uuid.UUID, frozenset[int]]) -> DescribedAssignment:
            return DescribedAssignment(
                [
                    DescribedTopicPartitions(t, names.get(t, ""), sorted(ps))
                    for t, ps in sorted(partitions.items(), key=_by_id)
                    if ps
                ]
            )

        members = [
            Member(
                m.member_id,
                m.instance_id,
                m.rack_id,
                m.member_epoch,
                m.client_id,
                m.client_host,
                list(m.subscribed_topic_names),
                m.subscribed_topic_regex,
                assignment(m.current.assigned),
                assignment(group.target.get(m.member_id, {})),
                _CONSUMER_MEMBER_TYPE,
            )
            for m in group.members.values()
        ]
        return DescribedGroup(
            ErrorCode.NONE,
            None,
            group_id,
            group.state.value,
            group.group_epoch,
            group.assignment_epoch,
            group.preferred_assignor(self.default_assignor),
            members,
        )

    # --- replay ------------------------------------------------------------------------------------------

    def replay(self, key: ConsumerKey, value: ConsumerValue | None) -> None:
        """Apply one consumer group record (just appended, or read while loading)."""
        group_id = key.group
        group = self.groups.get(group_id)
        if group is None:
            if value is None:
                return
            group = ConsumerGroup(group_id)
            self.groups[group_id] = group
            classic = self.classic_groups.get(group_id)
            if classic is not None and classic.state is ClassicGroupState.EMPTY:
                del self.classic_groups[group_id]  # a simple group holding offsets becomes this one
        match key:
            case ConsumerGroupMetadataKey():
                if value is None:
                    self._delete(group)
                    return
                assert isinstance(value, ConsumerGroupMetadataValue)
                group.group_epoch = value.epoch
                group.metadata_hash = value.metadata_hash
                group.creation_time_ms = value.creation_time_ms
            case ConsumerGroupPartitionMetadataKey():
                pass  # Kafka 4.0's subscription metadata: superseded by the metadata hash
            case ConsumerGroupMemberMetadataKey(member_id=member_id):
                assert value is None or isinstance(value, ConsumerGroupMemberMetadataValue)
                new = member_id not in group.members
                group.apply_member_metadata(member_id, value)
                if value is None:
                    self.timers.cancel(ConsumerSessionDeadline(group_id, member_id))
                    self.timers.cancel(ConsumerRebalanceDeadline(group_id, member_id))
                elif new and ConsumerSessionDeadline(group_id, member_id) not in self.timers:
                    # loading: every stored member gets a fresh session from now
                    self.timers.schedule(
                        ConsumerSessionDeadline(group_id, member_id),
                        self._now() + self.config.consumer_session_timeout_ms,
                    )
            case ConsumerGroupTargetAssignmentMetadataKey():
                if value is not None:
                    assert isinstance(value, ConsumerGroupTargetAssignmentMetadataValue)
                    group.assignment_epoch = value.assignment_epoch
            case ConsumerGroupTargetAssignmentMemberKey(member_id=member_id):
                if value is None:
                    group.target.pop(member_id, None)
                else:
                    assert isinstance(value, ConsumerGroupTargetAssignmentMemberValue)
                    group.target[member_id] = from_topic_partitions(value.topic_partitions)
            case ConsumerGroupCurrentMemberAssignmentKey(member_id=member_id):
                if value is None:
                    group.apply_current_assignment(member_id, None)
                else:
                    assert isinstance(value, ConsumerGroupCurrentMemberAssignmentValue)
                    try:
                        state = MemberState(value.state)
                    except ValueError:
                        state = MemberState.UNKNOWN
                    group.apply_current_assignment(
                        member_id,
                        CurrentAssignment(
                            value.member_epoch,
                            value.previous_member_epoch,
                            state,
                            from_topic_partitions(value.assigned_partitions),
                            from_topic_partitions(value.partitions_pending_revocation),
                        ),
                    )

    def _delete(self, group: ConsumerGroup) -> None:
        for member_id in group.members:
            self.timers.cancel(ConsumerSessionDeadline(group.group_id, member_id))
            self.timers.cancel(ConsumerRebalanceDeadline(group.group_id, member_id))
        group.deleted = True
        del self.groups[group.group_id]


def _subset(owned: Partitions, assigned: Mapping[uuid.UUID, frozenset[int]]) -> bool:
    return all(ps <= assigned.get(t, frozenset()) for t, ps in owned.items())


def _by_id(item: tuple[uuid.UUID, frozenset[int]]) -> str:
    return str(item[0])
