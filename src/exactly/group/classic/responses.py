"""The classic protocol's JoinGroup/SyncGroup responses, and how they read in DEBUG lines."""

from __future__ import annotations

from typing import Any

from exactly.errors import ErrorCode
from exactly.group.classic.group import ClassicGroup
from exactly.group.result import Parked, Result
from exactly.protocol.messages.join_group import JoinGroupResponse, JoinGroupResponseMember
from exactly.protocol.messages.sync_group import SyncGroupResponse

__all__ = [
    "completions_summary",
    "generation_response",
    "join_error",
    "member_list",
    "summary",
    "sync_response",
]


def join_error(code: ErrorCode, member_id: str = "") -> JoinGroupResponse:
    return JoinGroupResponse(
        error_code=code, member_id=member_id, protocol_type=None, protocol_name=None, leader=""
    )


def member_list(group: ClassicGroup) -> list[JoinGroupResponseMember]:
    """What the leader's JoinGroup response lists: every member's metadata for the chosen protocol."""
    return [
        JoinGroupResponseMember(m.member_id, m.group_instance_id, m.metadata(group.protocol_name))
        for m in group.members.values()
    ]


def generation_response(
    group: ClassicGroup, member_id: str, *, with_members: bool, leader: str | None = None
) -> JoinGroupResponse:
    """A JoinGroup response for the group's current generation."""
    return JoinGroupResponse(
        error_code=ErrorCode.NONE,
        generation_id=group.generation,
        protocol_type=group.protocol_type,
        protocol_name=group.protocol_name,
        leader=(group.leader_id or "") if leader is None else leader,
        skip_assignment=False,
        member_id=member_id,
        members=member_list(group) if with_members else [],
    )


def sync_response(group: ClassicGroup, assignment: bytes) -> SyncGroupResponse:
    return SyncGroupResponse(
        error_code=ErrorCode.NONE,
        protocol_type=group.protocol_type,
        protocol_name=group.protocol_name,
        assignment=assignment,
    )


def summary(response: object) -> str:
    """A JoinGroup/SyncGroup response (or a parked one) in a DEBUG line."""
    if isinstance(response, Parked):
        return f"parked as waiter {response.waiter}"
    if isinstance(response, JoinGroupResponse):
        if response.error_code:
            return f"{ErrorCode(response.error_code).name} member {response.member_id!r}"
        return (
            f"generation {response.generation_id} member {response.member_id!r} leader {response.leader!r}"
            f" members {len(response.members)}"
        )
    if isinstance(response, SyncGroupResponse):
        if response.error_code:
            return ErrorCode(response.error_code).name
        return f"assignment of {len(response.assignment)} bytes"
    return repr(response)


def completions_summary(result: Result[Any]) -> str:
    if not result.completions:
        return ""
    return "; completes " + ", ".join(f"waiter {w}: {summary(r)}" for w, r in result.completions)
