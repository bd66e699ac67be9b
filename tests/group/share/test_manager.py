"""ShareGroupHeartbeat and ShareGroupDescribe on the group coordinator (sans-IO, manual clock)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from exactly.clock import ManualClock
from exactly.errors import ErrorCode
from exactly.group import ClientInfo, GroupConfig, GroupCoordinator
from exactly.group.share.group import simple_assign
from exactly.group.share.manager import ShareGroupSettings
from exactly.protocol.messages.share_group_heartbeat import (
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
)


@dataclass(frozen=True)
class Topic:
    name: str
    topic_id: uuid.UUID
    partitions: int


T1 = Topic("t1", uuid.uuid5(uuid.NAMESPACE_DNS, "t1"), 1)
T3 = Topic("t3", uuid.uuid5(uuid.NAMESPACE_DNS, "t3"), 3)
CLIENT = ClientInfo("client", "/127.0.0.1", 1)


def _coordinator() -> tuple[GroupCoordinator, ManualClock]:
    clock = ManualClock()
    topics = {T1.name: T1, T3.name: T3}
    coordinator = GroupCoordinator(
        GroupConfig(),
        clock,
        topics=lambda: topics,
        share=ShareGroupSettings(session_timeout_ms=45_000, heartbeat_interval_ms=5000, max_size=3),
    )
    return coordinator, clock


def _beat(
    c: GroupCoordinator, member: str, epoch: int, topics: list[str] | None = None, group: str = "g"
) -> ShareGroupHeartbeatResponse:
    result = c.share_group_heartbeat(CLIENT, ShareGroupHeartbeatRequest(group, member, epoch, None, topics))
    assert not result.records
    assert isinstance(result.response, ShareGroupHeartbeatResponse)
    return result.response


def _assigned(response: ShareGroupHeartbeatResponse) -> dict[uuid.UUID, list[int]]:
    assert response.assignment is not None
    return {tp.topic_id: tp.partitions for tp in response.assignment.topic_partitions}


def test_two_members_share_the_only_partition() -> None:
    c, _ = _coordinator()
    first = _beat(c, "a", 0, ["t1"])
    assert first.error_code == ErrorCode.NONE
    assert first.member_epoch == 1
    assert first.heartbeat_interval_ms == 5000
    assert _assigned(first) == {T1.topic_id: [0]}
    second = _beat(c, "b", 0, ["t1"])
    assert second.member_epoch == 2
    assert _assigned(second) == {T1.topic_id: [0]}
    again = _beat(c, "a", 1)  # its previous epoch is still accepted; moved to the group's
    assert again.member_epoch == 2
    assert _assigned(again) == {T1.topic_id: [0]}
    assert _beat(c, "a", 2).assignment is None  # unchanged: not sent again
    described = c.share_group_describe(["g"])[0]
    assert described.group_state == "Stable"
    assert described.assignor_name == "simple"
    assert described.group_epoch == 2
    assert sorted(m.member_id for m in described.members) == ["a", "b"]
    assert all(
        m.assignment and m.assignment.topic_partitions[0].topic_name == "t1" for m in described.members
    )


def test_balanced_when_there_are_enough_partitions() -> None:
    subscriptions = {"a": ["t3"], "b": ["t3"]}
    assigned = simple_assign(subscriptions, {"t3": (T3.topic_id, 3)})
    assert assigned == {"a": {T3.topic_id: (0, 2)}, "b": {T3.topic_id: (1,)}}
    many = simple_assign({m: ["t3"] for m in "abcde"}, {"t3": (T3.topic_id, 3)})
    assert sorted(p for a in many.values() for p in a[T3.topic_id]) == [0, 0, 1, 1, 2]


def test_validation_and_fencing() -> None:
    c, _ = _coordinator()
    assert _beat(c, "", 0, ["t1"]).error_code == ErrorCode.INVALID_REQUEST
    assert _beat(c, "a", 0, []).error_code == ErrorCode.INVALID_REQUEST
    assert _beat(c, "a", -2, ["t1"]).error_code == ErrorCode.INVALID_REQUEST
    assert _beat(c, "a", 5).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    _beat(c, "a", 0, ["t1"])
    _beat(c, "b", 0, ["t1"])
    _beat(c, "c", 0, ["t1"])
    assert _beat(c, "a", 7).error_code == ErrorCode.FENCED_MEMBER_EPOCH
    assert _beat(c, "d", 0, ["t1"]).error_code == ErrorCode.GROUP_MAX_SIZE_REACHED


def test_leave_and_session_timeout() -> None:
    c, clock = _coordinator()
    _beat(c, "a", 0, ["t1"])
    _beat(c, "b", 0, ["t1"])
    left = _beat(c, "b", -1)
    assert left.member_epoch == -1
    assert list(c.share_groups["g"].members) == ["a"]
    clock.advance(45_001)
    for result in c.tick():
        assert not result.records
    assert c.share_groups["g"].is_empty
    assert c.share_group_describe(["g"])[0].group_state == "Empty"
    assert [(g.group_id, g.group_type) for g in c.list_groups()] == [("g", "share")]
    assert c.delete_group("g").response.error_code == ErrorCode.NONE  # type: ignore[union-attr]
    assert c.share_group_describe(["g"])[0].error_code == ErrorCode.GROUP_ID_NOT_FOUND
