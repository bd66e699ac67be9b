"""The classic group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup; KIP-62/345/394/814): the
classic half of Kafka's `GroupMetadataManager`, sans-IO.

Each request is validated against the group's state (`state.py`) and returns a `Result`: records to
append, the response or `Parked(waiter)`, and completions of requests parked earlier. Forming the next
generation is `rebalance.Rebalancer`'s; the stored generation changes only in `replay` (a GroupMetadata
record). `GroupCoordinator` (the facade) wraps every call: it checks that the previous result's records
were replayed, and dispatches the `HeartbeatDeadline`/`RebalanceDeadline`/`SyncDeadline` that pass to
the `on_*_deadline` methods of the `Rebalancer`.

It is also the offset manager's `GroupDirectory`: a replayed commit for an unknown group creates an
Empty classic ("simple") group, and a member's OffsetCommit counts as its heartbeat.
"""

from __future__ import annotations

import itertools
import logging
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from exactly.clock import Clock
from exactly.errors import ErrorCode
from exactly.group.classic.group import ClassicGroup
from exactly.group.classic.member import Member, Protocols
from exactly.group.classic.rebalance import Rebalancer
from exactly.group.classic.responses import (
    completions_summary,
    generation_response,
    join_error,
    member_list,
    summary,
    sync_response,
)
from exactly.group.classic.state import ClassicGroupState, GroupEvent
from exactly.group.client import ClientInfo
from exactly.group.config import GroupConfig
from exactly.group.deadlines import Deadline, HeartbeatDeadline, RebalanceDeadline, SyncDeadline
from exactly.group.group import Group
from exactly.group.records import CoordinatorRecord, GroupMetadataKey, GroupMetadataValue
from exactly.group.result import Parked, Result
from exactly.group.timers import Timers
from exactly.protocol.messages.heartbeat import HeartbeatRequest, HeartbeatResponse
from exactly.protocol.messages.join_group import JoinGroupRequest, JoinGroupResponse
from exactly.protocol.messages.leave_group import LeaveGroupResponse, MemberIdentity, MemberResponse
from exactly.protocol.messages.sync_group import SyncGroupRequest, SyncGroupResponse

__all__ = ["ClassicGroupManager"]

log = logging.getLogger(__name__)

_S = ClassicGroupState
_E = GroupEvent
_SKIP_ASSIGNMENT_VERSION = 9  # JoinGroup: a rejoining static leader may skip its assignor (KIP-814)


class ClassicGroupManager:
    def __init__(
        self,
        config: GroupConfig,
        clock: Clock,
        groups: dict[str, ClassicGroup],
        timers: Timers[Deadline],
        *,
        holds_offsets: Callable[[str], bool],
        member_id_suffix: Callable[[], str] | None = None,
    ) -> None:
        self.config = config
        self.clock = clock
        self.groups = groups
        self.timers = timers
        self.rebalance = Rebalancer(config, clock, groups, timers, holds_offsets)
        self._waiters = itertools.count(1)
        self._suffix = member_id_suffix or (lambda: str(uuid.uuid4()))

    def _now(self) -> int:
        return self.clock.monotonic_ms()

    def _wall(self) -> int:
        return self.clock.milliseconds()

    def _waiter(self) -> int:
        return next(self._waiters)

    # --- JoinGroup ---------------------------------------------------------------------------------------

    def join_group(self, client: ClientInfo, request: JoinGroupRequest) -> Result[JoinGroupResponse]:
        group_id = request.group_id
        member_id = request.member_id
        if not group_id:
            return Result(join_error(ErrorCode.INVALID_GROUP_ID, member_id), group_id)
        if not (
            self.config.min_session_timeout_ms
            <= request.session_timeout_ms
            <= self.config.max_session_timeout_ms
        ):
            return Result(join_error(ErrorCode.INVALID_SESSION_TIMEOUT, member_id), group_id)
        group = self.groups.get(group_id)
        if group is None:
            if member_id:
                return Result(join_error(ErrorCode.UNKNOWN_MEMBER_ID, member_id), group_id)
            group = ClassicGroup(group_id)  # Empty; its state timestamp comes from a stored record
            self.groups[group_id] = group
        protocols: Protocols = [(p.name, bytes(p.metadata)) for p in request.protocols]
        rebalance_timeout = (
            request.rebalance_timeout_ms if request.rebalance_timeout_ms >= 0 else request.session_timeout_ms
        )
        if not member_id:
            result = self._join_new_member(client, request, group, protocols, rebalance_timeout)
        else:
            result = self._join_existing_member(client, request, group, protocols, rebalance_timeout)
        self.rebalance.forget_if_unused(group)
        result.group_id = group_id
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "JoinGroup v%d group %s member %r instance %r -> %s; state %s generation %d%s",
                client.api_version,
                group_id,
                member_id,
                request.group_instance_id,
                summary(result.response),
                group.state.value,
                group.generation,
                completions_summary(result),
            )
        return result

    def _join_new_member(
        self,
        client: ClientInfo,
        request: JoinGroupRequest,
        group: ClassicGroup,
        protocols: Protocols,
        rebalance_timeout: int,
    ) -> Result[JoinGroupResponse]:
        if not group.supports_protocols(request.protocol_type, [name for name, _ in protocols]):
            return Result(join_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
        instance_id = request.group_instance_id
        new_id = f"{instance_id if instance_id is not None else client.client_id}-{self._suffix()}"
        if instance_id is not None:
            existing = group.static_members.get(instance_id)
            if existing is not None:
                return self._rejoin_static_member(
                    request, group, existing, new_id, protocols, rebalance_timeout, client.api_version
                )
            return self._add_member_and_rebalance(
                client, request, group, new_id, protocols, rebalance_timeout
            )
        if client.api_version >= 4:  # KIP-394: a dynamic member must come back with the id we hand out
            group.pending_join.add(new_id)
            self.timers.schedule(
                HeartbeatDeadline(group.group_id, new_id), self._now() + request.session_timeout_ms
            )
            return Result(join_error(ErrorCode.MEMBER_ID_REQUIRED, new_id))
        return self._add_member_and_rebalance(client, request, group, new_id, protocols, rebalance_timeout)

    def _join_existing_member(
        self,
        client: ClientInfo,
        request: JoinGroupRequest,
        group: ClassicGroup,
        protocols: Protocols,
        rebalance_timeout: int,
    ) -> Result[JoinGroupResponse]:
        member_id = request.member_id
        names = [name for name, _ in protocols]
        if not group.supports_protocols(request.protocol_type, names):
            return Result(join_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id))
        if member_id in group.pending_join:
            return self._add_member_and_rebalance(
                client, request, group, member_id, protocols, rebalance_timeout
            )
        error = group.validate_member(member_id, request.group_instance_id)
        if error:
            return Result(join_error(error, member_id))
        member = group.members[member_id]
        if group.state is _S.PREPARING_REBALANCE:
            return self._update_member_and_rebalance(group, member, protocols, rebalance_timeout, request)
        if group.state is _S.COMPLETING_REBALANCE:
            if member.matches(protocols):
                # The member lost its JoinGroup response: give it the current generation again.
                return Result(
                    generation_response(group, member_id, with_members=group.leader_id == member_id)
                )
            return self._update_member_and_rebalance(group, member, protocols, rebalance_timeout, request)
        if group.state is _S.STABLE:
            if group.leader_id == member_id or not member.matches(protocols):
                # The leader rejoins to make the group rebalance (e.g. the topics' partitions changed).
                return self._update_member_and_rebalance(group, member, protocols, rebalance_timeout, request)
            return Result(generation_response(group, member_id, with_members=False))
        return Result(join_error(ErrorCode.UNKNOWN_MEMBER_ID, member_id))

    def _add_member_and_rebalance(
        self,
        client: ClientInfo,
        request: JoinGroupRequest,
        group: ClassicGroup,
        member_id: str,
        protocols: Protocols,
        rebalance_timeout: int,
    ) -> Result[JoinGroupResponse]:
        waiter = self._waiter()
        member = Member(
            member_id,
            request.group_instance_id,
            client.client_id,
            client.client_host,
            rebalance_timeout,
            request.session_timeout_ms,
            request.protocol_type,
            protocols,
            join_waiter=waiter,
            is_new=True,
        )
        if group.state is _S.PREPARING_REBALANCE and group.previous_state is _S.EMPTY:
            group.new_member_added = True
        group.add(member)
        # A new member cannot heartbeat until it has its JoinGroup response; if its client went away
        # during a long rebalance, this deadline removes it.
        self.rebalance.schedule_heartbeat(group, member, self.config.new_member_join_timeout_ms)
        result = self.rebalance.maybe_prepare_rebalance_or_complete_join(group, _E.MEMBER_JOINED)
        result.response = Parked(waiter)
        return result

    def _update_member_and_rebalance(
        self,
        group: ClassicGroup,
        member: Member,
        protocols: Protocols,
        rebalance_timeout: int,
        request: JoinGroupRequest,
    ) -> Result[JoinGroupResponse]:
        completions: list[tuple[int, Any]] = []
        if member.join_waiter is not None:  # the client gave up on an earlier JoinGroup and sent another
            completions.append(
                (member.join_waiter, join_error(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))
            )
        group.update_protocols(member, protocols)
        member.rebalance_timeout_ms = rebalance_timeout
        member.session_timeout_ms = request.session_timeout_ms
        waiter = self._waiter()
        member.join_waiter = waiter
        result = self.rebalance.maybe_prepare_rebalance_or_complete_join(group, _E.MEMBER_JOINED)
        result.completions[:0] = completions
        result.response = Parked(waiter)
        return result

    def _rejoin_static_member(
        self,
        request: JoinGroupRequest,
        group: ClassicGroup,
        old_id: str,
        new_id: str,
        protocols: Protocols,
        rebalance_timeout: int,
        api_version: int = 0,
    ) -> Result[JoinGroupResponse]:
        """A static member (group.instance.id) came back with no member id: it takes the old one's place
        under a new id, which fences the old instance (KIP-345).

        In a Stable group whose protocols do not change it keeps its assignment without a rebalance.
        Before JoinGroup v9 it is told the *old* leader id and no members, so even a former leader
        simply fetches its assignment with SyncGroup. From v9 (KIP-814, Kafka's
        `updateStaticMemberThenRebalanceOrCompleteJoin`) a former leader is told that it leads, gets the
        members (to keep watching metadata) and SkipAssignment, so it does not run its assignor."""
        completions: list[tuple[int, Any]] = []
        old = group.members[old_id]
        if old.join_waiter is not None:
            completions.append((old.join_waiter, join_error(ErrorCode.FENCED_INSTANCE_ID, old_id)))
            old.join_waiter = None
        if old.sync_waiter is not None:
            completions.append((old.sync_waiter, SyncGroupResponse(error_code=ErrorCode.FENCED_INSTANCE_ID)))
            old.sync_waiter = None
        if group.state is _S.STABLE:
            current_leader = group.leader_id
            selected_before = group.protocol_name
            saved = (list(old.protocols), old.rebalance_timeout_ms, old.session_timeout_ms)
            group.update_protocols(old, protocols)
            if group.select_protocol() == selected_before:
                # Nothing the assignment depends on changed: store the new member id, no rebalance.
                # The rejoining instance is told the *old* leader id, so even a former leader simply
                # fetches its assignment with SyncGroup instead of computing a new one.
                old.rebalance_timeout_ms = rebalance_timeout
                old.session_timeout_ms = request.session_timeout_ms
                assignments = {m.member_id: m.assignment for m in group.members.values()}
                value = group.to_record(assignments, self._wall())
                renamed = tuple(
                    replace(m, member_id=new_id) if m.member_id == old_id else m for m in value.members
                )
                leader = new_id if value.leader == old_id else value.leader
                value = GroupMetadataValue(
                    value.protocol_type,
                    value.generation,
                    value.protocol,
                    leader,
                    value.current_state_timestamp,
                    renamed,
                )
                response = generation_response(group, new_id, with_members=False, leader=current_leader)
                if api_version >= _SKIP_ASSIGNMENT_VERSION and current_leader == old_id:
                    response.leader = new_id
                    response.skip_assignment = True
                    response.members = [
                        replace(m, member_id=new_id) if m.member_id == old_id else m
                        for m in member_list(group)
                    ]
                return Result(
                    response,
                    records=[CoordinatorRecord(GroupMetadataKey(group.group_id), value)],
                    completions=completions,
                )
            group.update_protocols(old, saved[0])
            old.rebalance_timeout_ms, old.session_timeout_ms = saved[1], saved[2]
        # Otherwise the replacement is part of a rebalance (rendezvous state) and the member rejoins.
        self.timers.cancel(HeartbeatDeadline(group.group_id, old_id))
        member = group.rename_static_member(old_id, new_id)
        self.rebalance.schedule_heartbeat(group, member)
        result = self._update_member_and_rebalance(group, member, protocols, rebalance_timeout, request)
        result.completions[:0] = completions
        return result

    # --- SyncGroup ---------------------------------------------------------------------------------------

    def sync_group(self, client: ClientInfo, request: SyncGroupRequest) -> Result[SyncGroupResponse]:
        group_id = request.group_id
        if not group_id:
            return Result(SyncGroupResponse(error_code=ErrorCode.INVALID_GROUP_ID), group_id)
        group = self.groups.get(group_id)
        if group is None or group.state is _S.EMPTY:
            return Result(SyncGroupResponse(error_code=ErrorCode.UNKNOWN_MEMBER_ID), group_id)
        member_id = request.member_id
        error = group.validate_member(member_id, request.group_instance_id)
        if not error and request.generation_id != group.generation:
            error = ErrorCode.ILLEGAL_GENERATION
        if not error and (
            _inconsistent(request.protocol_type, group.protocol_type)
            or _inconsistent(request.protocol_name, group.protocol_name)
        ):
            error = ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        if not error and group.state is _S.PREPARING_REBALANCE:
            error = ErrorCode.REBALANCE_IN_PROGRESS
        if error:
            log.debug(
                "SyncGroup group %s member %r generation %d -> %s; state %s generation %d",
                group_id,
                member_id,
                request.generation_id,
                error.name,
                group.state.value,
                group.generation,
            )
            return Result(SyncGroupResponse(error_code=error), group_id)
        member = group.members[member_id]
        group.pending_sync.discard(member_id)
        if not group.pending_sync:
            self.timers.cancel(SyncDeadline(group_id))
        if group.state is _S.STABLE:
            log.debug(
                "SyncGroup group %s member %r generation %d -> stored assignment of %d bytes",
                group_id,
                member_id,
                request.generation_id,
                len(member.assignment),
            )
            return Result(sync_response(group, member.assignment), group_id)
        # CompletingRebalance: park until the leader's assignment is stored.
        result: Result[SyncGroupResponse] = Result(None, group_id)
        if member.sync_waiter is not None:
            result.completions.append(
                (member.sync_waiter, SyncGroupResponse(error_code=ErrorCode.REBALANCE_IN_PROGRESS))
            )
        waiter = self._waiter()
        member.sync_waiter = waiter
        result.response = Parked(waiter)
        if member_id == group.leader_id:
            assignments = {a.member_id: bytes(a.assignment) for a in request.assignments}
            value = group.to_record(assignments, self._wall())
            result.records.append(CoordinatorRecord(GroupMetadataKey(group_id), value))
            for m in group.members.values():
                if m.sync_waiter is not None:
                    result.completions.append(
                        (m.sync_waiter, sync_response(group, assignments.get(m.member_id, b"")))
                    )
                    m.sync_waiter = None
                    self.rebalance.schedule_heartbeat(group, m)
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "SyncGroup group %s member %r generation %d (%d assignments) -> %s; state %s%s",
                group_id,
                member_id,
                request.generation_id,
                len(request.assignments),
                summary(result.response),
                group.state.value,
                completions_summary(result),
            )
        return result

    # --- Heartbeat and LeaveGroup ------------------------------------------------------------------------

    def heartbeat(self, client: ClientInfo, request: HeartbeatRequest) -> Result[HeartbeatResponse]:
        group_id = request.group_id
        if not group_id:
            return Result(HeartbeatResponse(error_code=ErrorCode.INVALID_GROUP_ID), group_id)
        group = self.groups.get(group_id)
        if group is None:
            return Result(HeartbeatResponse(error_code=ErrorCode.UNKNOWN_MEMBER_ID), group_id)
        error = group.validate_member(request.member_id, request.group_instance_id)
        if not error and request.generation_id != group.generation:
            error = ErrorCode.ILLEGAL_GENERATION
        if not error and group.state is _S.EMPTY:
            error = ErrorCode.UNKNOWN_MEMBER_ID
        if error:
            log.debug(
                "Heartbeat group %s member %r generation %d -> %s; state %s generation %d",
                group_id,
                request.member_id,
                request.generation_id,
                error.name,
                group.state.value,
                group.generation,
            )
            return Result(HeartbeatResponse(error_code=error), group_id)
        self.rebalance.schedule_heartbeat(group, group.members[request.member_id])
        code = ErrorCode.REBALANCE_IN_PROGRESS if group.state is _S.PREPARING_REBALANCE else ErrorCode.NONE
        log.debug(
            "Heartbeat group %s member %r generation %d -> %s",
            group_id,
            request.member_id,
            request.generation_id,
            code.name,
        )
        return Result(HeartbeatResponse(error_code=code), group_id)

    def leave_group(
        self, client: ClientInfo, group_id: str, members: list[MemberIdentity]
    ) -> Result[LeaveGroupResponse]:
        """LeaveGroup (v3+ batched; older versions pass their one member id)."""
        if not group_id:
            return Result(LeaveGroupResponse(error_code=ErrorCode.INVALID_GROUP_ID), group_id)
        group = self.groups.get(group_id)
        if group is None:
            return Result(LeaveGroupResponse(error_code=ErrorCode.UNKNOWN_MEMBER_ID), group_id)
        result: Result[LeaveGroupResponse] = Result(None, group_id)
        responses: list[MemberResponse] = []
        left = False
        for identity in members:
            instance_id = identity.group_instance_id
            code = ErrorCode.NONE
            if not identity.member_id:
                # An admin removing a static member by its instance id.
                existing = group.static_members.get(instance_id) if instance_id is not None else None
                if existing is None:
                    code = ErrorCode.UNKNOWN_MEMBER_ID
                else:
                    self.rebalance.remove_member(
                        group, existing, result.completions, ErrorCode.UNKNOWN_MEMBER_ID
                    )
            elif identity.member_id in group.pending_join:
                group.pending_join.discard(identity.member_id)
                self.timers.cancel(HeartbeatDeadline(group_id, identity.member_id))
            else:
                code = group.validate_member(identity.member_id, instance_id)
                if not code:
                    self.rebalance.remove_member(
                        group, identity.member_id, result.completions, ErrorCode.UNKNOWN_MEMBER_ID
                    )
            left = left or not code
            responses.append(MemberResponse(identity.member_id, instance_id, code))
        if left:
            if group.state in (_S.STABLE, _S.COMPLETING_REBALANCE):
                result.absorb(
                    self.rebalance.maybe_prepare_rebalance_or_complete_join(group, _E.MEMBER_REMOVED)
                )
            elif group.state is _S.PREPARING_REBALANCE:
                result.absorb(self.rebalance.maybe_complete_join(group))
        result.response = LeaveGroupResponse(error_code=ErrorCode.NONE, members=responses)
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "LeaveGroup group %s members %s; state %s generation %d%s",
                group_id,
                [(r.member_id, ErrorCode(r.error_code).name) for r in responses],
                group.state.value,
                group.generation,
                completions_summary(result),
            )
        return result

    # --- replay and failed appends --------------------------------------------------------------------------

    def replay(self, key: GroupMetadataKey, value: GroupMetadataValue | None) -> None:
        """Apply a GroupMetadata record: the group's stored generation, or its tombstone."""
        group = self.groups.get(key.group)
        if value is None:
            if group is not None:
                for member_id in list(group.members):
                    self.timers.cancel(HeartbeatDeadline(key.group, member_id))
                self.timers.cancel(RebalanceDeadline(key.group))
                self.timers.cancel(SyncDeadline(key.group))
                group.transition(_E.DELETED, self._wall())
                del self.groups[key.group]
            return
        if group is None:
            group = ClassicGroup(key.group, state_timestamp=value.current_state_timestamp)
            self.groups[key.group] = group
        removed, renamed, added = group.apply_stored_generation(value)
        for member in removed:
            self.timers.cancel(HeartbeatDeadline(key.group, member.member_id))
        for old_id, new_id in renamed:
            self.timers.cancel(HeartbeatDeadline(key.group, old_id))
            self.rebalance.schedule_heartbeat(group, group.members[new_id])
        for member in added:  # loading: every stored member gets a fresh session from now
            self.rebalance.schedule_heartbeat(group, member)
        if group.state is _S.EMPTY:
            self.timers.cancel(SyncDeadline(key.group))

    def on_append_failed(self, result: Result[Any]) -> Result[None]:
        """The records of `result` could not be appended: nothing was stored. A group waiting for its
        assignment to be stored rebalances instead (its members were told to retry)."""
        group = self.groups.get(result.group_id)
        # A transactional offset commit that failed (e.g. its KIP-890 check) changed nothing, even when
        # it was accepted during CompletingRebalance: no reason to rebalance.
        if group is None or group.state is not _S.COMPLETING_REBALANCE or result.producer_id >= 0:
            return Result(None, result.group_id)
        return self.rebalance.prepare_rebalance(group, _E.MEMBER_REMOVED)

    # --- what the offset manager asks of the groups (`offset_manager.GroupDirectory`) --------------------

    def group(self, group_id: str) -> Group | None:
        return self.groups.get(group_id)

    def ensure_group(self, group_id: str) -> None:
        if group_id not in self.groups:
            self.groups[group_id] = ClassicGroup(group_id)

    def offset_commit_accepted(self, group_id: str, member_id: str) -> None:
        group = self.groups.get(group_id)
        if group is not None and group.state in (_S.STABLE, _S.PREPARING_REBALANCE):
            member = group.members.get(member_id)
            if member is not None:  # a commit keeps the member's session alive, as a heartbeat
                self.rebalance.schedule_heartbeat(group, member)


def _inconsistent(requested: str | None, current: str | None) -> bool:
    return requested is not None and current is not None and requested != current
