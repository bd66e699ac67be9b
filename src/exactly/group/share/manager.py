"""ShareGroupHeartbeat (key 76) and ShareGroupDescribe (key 77): share group membership (KIP-932).

A member names its own id (non-empty) and joins with epoch 0 and its subscribed topics (required on a
join), then heartbeats with its current epoch every `group.share.heartbeat.interval.ms`; -1 leaves.
Each join, leave or subscription change bumps the group epoch and recomputes the assignment
(`group.simple_assign`); the member is moved to the new epoch at once and sent its assignment whenever
it changed (Kafka's shareGroupHeartbeat: no revocation, partitions may be shared). Validation as Kafka's
`throwIfShareGroupHeartbeatRequestIsInvalid` / `throwIfShareGroupMemberEpochIsInvalid`:

* an empty member id, an empty group id, an epoch below -1, or a join without subscriptions:
  INVALID_REQUEST;
* an epoch other than 0 from an unknown member: UNKNOWN_MEMBER_ID;
* an epoch other than the member's current or previous one: FENCED_MEMBER_EPOCH;
* a new member beyond `group.share.max.size`: GROUP_MAX_SIZE_REACHED;
* a group id held by a classic or consumer group: GROUP_ID_NOT_FOUND (the coordinator checks it).

A member that does not heartbeat within `group.share.session.timeout.ms` is removed
(`ShareSessionDeadline`).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from exactly.clock import Clock
from exactly.errors import ErrorCode
from exactly.group.client import ClientInfo
from exactly.group.consumer.manager import TopicImage, TopicView
from exactly.group.deadlines import Deadline, ShareSessionDeadline
from exactly.group.result import Result
from exactly.group.share.group import ShareGroup, ShareMember, simple_assign
from exactly.group.timers import Timers
from exactly.protocol.messages import share_group_describe as d
from exactly.protocol.messages.share_group_heartbeat import (
    Assignment,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
    TopicPartitions,
)

__all__ = ["ShareGroupManager", "ShareGroupSettings"]

ASSIGNOR = "simple"
LEAVE_EPOCH = -1


class ShareGroupSettings:
    """The group.share.* broker configs the membership needs."""

    __slots__ = ("heartbeat_interval_ms", "max_size", "session_timeout_ms")

    def __init__(
        self, session_timeout_ms: int = 45_000, heartbeat_interval_ms: int = 5_000, max_size: int = 200
    ) -> None:
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.max_size = max_size


def _no_topics() -> Mapping[str, TopicView]:
    return {}


class ShareGroupManager:
    def __init__(
        self,
        settings: ShareGroupSettings,
        clock: Clock,
        groups: dict[str, ShareGroup],
        timers: Timers[Deadline],
        topics: TopicImage | None = None,
    ) -> None:
        self.settings = settings
        self.clock = clock
        self.groups = groups
        self.timers = timers
        self.topics: TopicImage = topics or _no_topics

    # --- ShareGroupHeartbeat ----------------------------------------------------------------------------

    def heartbeat(
        self, client: ClientInfo, request: ShareGroupHeartbeatRequest
    ) -> Result[ShareGroupHeartbeatResponse]:
        group_id = request.group_id
        refusal = self._validate(request)
        if refusal is not None:
            return Result(refusal, group_id)
        group = self.groups.get(group_id)
        member = group.members.get(request.member_id) if group is not None else None
        epoch = request.member_epoch
        if epoch == LEAVE_EPOCH:
            if group is not None and member is not None:
                self._remove(group, member.member_id)
            return Result(
                ShareGroupHeartbeatResponse(member_id=request.member_id, member_epoch=LEAVE_EPOCH), group_id
            )
        if epoch != 0:
            if member is None:
                return Result(
                    _error(ErrorCode.UNKNOWN_MEMBER_ID, f"unknown member {request.member_id}"), group_id
                )
            if epoch not in (member.member_epoch, member.previous_member_epoch):
                message = f"epoch {epoch} is neither {member.member_epoch} nor {member.previous_member_epoch}"
                return Result(_error(ErrorCode.FENCED_MEMBER_EPOCH, message), group_id)
        if group is None:
            group = self.groups.setdefault(group_id, ShareGroup(group_id))
        if member is None:
            if len(group.members) >= self.settings.max_size:
                message = f"the group has {len(group.members)} members (group.share.max.size)"
                return Result(_error(ErrorCode.GROUP_MAX_SIZE_REACHED, message), group_id)
            member = ShareMember(
                request.member_id,
                client.client_id,
                client.client_host,
                request.rack_id,
                tuple(sorted(set(request.subscribed_topic_names or []))),
            )
            group.members[member.member_id] = member
            self._rebalance(group)
        else:
            if request.rack_id is not None:
                member.rack_id = request.rack_id
            if epoch == 0:
                member.sent_assignment_epoch = -1  # a rejoin: send the assignment again
            subscribed = request.subscribed_topic_names
            if subscribed is not None and tuple(sorted(set(subscribed))) != member.subscribed_topics:
                member.subscribed_topics = tuple(sorted(set(subscribed)))
                self._rebalance(group)
            elif self._topics_changed(group):
                self._rebalance(group)
        self._schedule_session(group_id, member.member_id)
        response = ShareGroupHeartbeatResponse(
            member_id=member.member_id,
            member_epoch=member.member_epoch,
            heartbeat_interval_ms=self.settings.heartbeat_interval_ms,
        )
        if member.sent_assignment_epoch != member.member_epoch:
            response.assignment = Assignment(
                [TopicPartitions(t, list(ps)) for t, ps in sorted(member.assignment.items())]
            )
            member.sent_assignment_epoch = member.member_epoch
        return Result(response, group_id)

    def _validate(self, request: ShareGroupHeartbeatRequest) -> ShareGroupHeartbeatResponse | None:
        if not request.group_id:
            return _error(ErrorCode.INVALID_REQUEST, "GroupId can't be empty.")
        if not request.member_id:
            return _error(ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
        if request.member_epoch < LEAVE_EPOCH:
            return _error(
                ErrorCode.INVALID_REQUEST, f"MemberEpoch is {request.member_epoch}, it must be >= -1."
            )
        if request.member_epoch == 0 and not request.subscribed_topic_names:
            return _error(ErrorCode.INVALID_REQUEST, "SubscribedTopicNames must be set in first request.")
        return None

    # --- assignment --------------------------------------------------------------------------------------

    def _existing_topics(self, group: ShareGroup) -> dict[str, tuple[uuid.UUID, int]]:
        image = self.topics()
        out: dict[str, tuple[uuid.UUID, int]] = {}
        for name in group.subscribed_topics():
            topic = image.get(name)
            if topic is not None:
                out[name] = (topic.topic_id, topic.partitions)
        return out

    def _topics_changed(self, group: ShareGroup) -> bool:
        """A subscribed topic was created, deleted or grew since the last assignment."""
        return self._existing_topics(group) != group.assigned_topics

    def _rebalance(self, group: ShareGroup) -> None:
        group.group_epoch += 1
        topics = self._existing_topics(group)
        assignment = simple_assign({m.member_id: m.subscribed_topics for m in group.members.values()}, topics)
        group.assignment_epoch = group.group_epoch
        group.assigned_topics = topics
        for member in group.members.values():
            member.assignment = assignment.get(member.member_id, {})
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = group.group_epoch

    # --- leaving and sessions ------------------------------------------------------------------------

    def _remove(self, group: ShareGroup, member_id: str) -> None:
        del group.members[member_id]
        self.timers.cancel(ShareSessionDeadline(group.group_id, member_id))
        self._rebalance(group)

    def _schedule_session(self, group_id: str, member_id: str) -> None:
        deadline = self.clock.monotonic_ms() + self.settings.session_timeout_ms
        self.timers.schedule(ShareSessionDeadline(group_id, member_id), deadline)

    def on_session_deadline(self, group_id: str, member_id: str) -> Result[None]:
        group = self.groups.get(group_id)
        if group is not None and member_id in group.members:
            self._remove(group, member_id)
        return Result(None, group_id)

    # --- ShareGroupDescribe ----------------------------------------------------------------------------

    def describe(self, group_id: str) -> d.DescribedGroup:
        group = self.groups.get(group_id)
        if group is None:
            return d.DescribedGroup(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.", group_id)
        names = {topic.topic_id: name for name, topic in self.topics().items()}
        members = [
            d.Member(
                m.member_id,
                m.rack_id,
                m.member_epoch,
                m.client_id,
                m.client_host,
                list(m.subscribed_topics),
                d.Assignment(
                    [
                        d.TopicPartitions(t, names.get(t, ""), list(ps))
                        for t, ps in sorted(m.assignment.items())
                    ]
                ),
            )
            for m in group.members.values()
        ]
        return d.DescribedGroup(
            ErrorCode.NONE,
            None,
            group_id,
            group.state.value,
            group.group_epoch,
            group.assignment_epoch,
            ASSIGNOR,
            members,
        )


def _error(code: ErrorCode, message: str) -> ShareGroupHeartbeatResponse:
    return ShareGroupHeartbeatResponse(error_code=code, error_message=message)
