"""The group coordinator: classic group membership and committed offsets, as a sans-IO state machine
(Kafka's `GroupMetadataManager` + `OffsetMetadataManager` for classic groups).

How it is driven (the broker's `broker/groups.py` is the only driver besides tests):

1. An operation (`join_group`, `sync_group`, `heartbeat`, `leave_group`, `commit_offsets`,
   `commit_transactional_offsets`, `delete_group`, `delete_offsets`, `expire_offsets`, `tick`)
   validates the request against the current state and returns a `Result`: the records to append
   to the group's partition of `__consumer_offsets` (`partition_for`), the caller's response — or
   `Parked(waiter)` when the request must wait (a JoinGroup until the rebalance completes, a
   follower's SyncGroup until the leader's assignment is stored) — and `completions`: responses for
   requests parked earlier.
2. The driver appends the records (one batch) and immediately calls `replay` for each, with its
   offset, before running any other operation (`_require_applied` enforces this). The stored state
   changes only there (see `classic/state.py` for what is stored and what is rendezvous).
3. The driver sends the responses and completions once the partition is durable up to its end.

`load_batch` replays a stored batch at start-up (data records and COMMIT/ABORT markers), which is the
same code path. `tick(now)` expires sessions, join and sync deadlines one event at a time (each
result must be applied before the next is asked for); `next_deadline()` says when to call it again.

Transactions: `commit_transactional_offsets` (TxnOffsetCommit) returns OffsetCommit records with the
producer in `Result.producer_id`/`producer_epoch`; the driver appends them as one transactional batch
of that producer (`records.build_batch(..., producer_id=..., transactional=True)`) and replays them
with that producer id, which keeps them pending (`OffsetStore`); the COMMIT/ABORT marker written to the
partition calls `replay_end_txn_marker`. `ClassicGroup.validate_offset_commit(..., transactional=True)`
is the KIP-447 fencing check.
"""

from __future__ import annotations

import itertools
import logging
import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any, TypeVar, assert_never

from exactly.clock import Clock
from exactly.errors import CorruptRecordError, ErrorCode
from exactly.group.classic.group import ClassicGroup
from exactly.group.classic.member import Member, Protocols
from exactly.group.classic.state import ClassicGroupState, GroupEvent
from exactly.group.client import ClientInfo
from exactly.group.config import GroupConfig
from exactly.group.deadlines import Deadline, HeartbeatDeadline, RebalanceDeadline, SyncDeadline
from exactly.group.group import Group
from exactly.group.offset_manager import OffsetManager, PartitionExists
from exactly.group.offsets import OffsetAndMetadata
from exactly.group.partitioning import partition_for
from exactly.group.records import (
    CoordinatorRecord,
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    UnknownRecordError,
    decode_key,
    decode_value,
    offset_key_fields,
    offset_value_fields,
)
from exactly.group.result import Parked, Result
from exactly.group.timers import Timers
from exactly.protocol.messages.delete_groups import DeletableGroupResult
from exactly.protocol.messages.describe_groups import DescribedGroup
from exactly.protocol.messages.heartbeat import HeartbeatRequest, HeartbeatResponse
from exactly.protocol.messages.join_group import JoinGroupRequest, JoinGroupResponse, JoinGroupResponseMember
from exactly.protocol.messages.leave_group import LeaveGroupResponse, MemberIdentity, MemberResponse
from exactly.protocol.messages.list_groups import ListedGroup
from exactly.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitResponse,
)
from exactly.protocol.messages.offset_delete import (
    OffsetDeleteRequest,
    OffsetDeleteResponse,
)
from exactly.protocol.messages.offset_fetch import (
    OffsetFetchResponseGroup,
)
from exactly.protocol.messages.sync_group import SyncGroupRequest, SyncGroupResponse
from exactly.protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)
from exactly.records.batch import RecordBatch
from exactly.records.control import ControlRecordType, parse_end_txn_marker

__all__ = ["ClientInfo", "GroupCoordinator", "Parked", "Result"]

log = logging.getLogger(__name__)

T = TypeVar("T")

_S = ClassicGroupState
_E = GroupEvent
_SKIP_ASSIGNMENT_VERSION = 9  # JoinGroup: a rejoining static leader may skip its assignor (KIP-814)
_KEY_CACHE_LIMIT = 100_000
_CONTROL = 0x20


def _join_error(code: ErrorCode, member_id: str = "") -> JoinGroupResponse:
    return JoinGroupResponse(
        error_code=code, member_id=member_id, protocol_type=None, protocol_name=None, leader=""
    )


class GroupCoordinator:
    def __init__(
        self,
        config: GroupConfig,
        clock: Clock,
        *,
        member_id_suffix: Callable[[], str] | None = None,
    ) -> None:
        self.config = config
        self.clock = clock
        self.groups: dict[str, ClassicGroup] = {}
        self.offset_manager = OffsetManager(config, clock, self)
        self.offsets = self.offset_manager.store  # committed and pending offsets (read-only here)
        self.timers: Timers[Deadline] = Timers()
        self._waiters = itertools.count(1)
        self._suffix = member_id_suffix or (lambda: str(uuid.uuid4()))
        self._unapplied = 0  # records handed out and not replayed yet

    # --- placement ---------------------------------------------------------------------------------------

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.config.num_partitions)

    # --- helpers -----------------------------------------------------------------------------------------

    def _now(self) -> int:
        return self.clock.monotonic_ms()

    def _wall(self) -> int:
        return self.clock.milliseconds()

    def _require_applied(self) -> None:
        if self._unapplied:
            raise RuntimeError(f"{self._unapplied} records of the previous operation were not replayed")

    def _result(self, result: Result[T]) -> Result[T]:
        self._unapplied += len(result.records)
        return result

    def _waiter(self) -> int:
        return next(self._waiters)

    def _schedule_heartbeat(self, group: ClassicGroup, member: Member, timeout_ms: int | None = None) -> None:
        timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms
        self.timers.schedule(HeartbeatDeadline(group.group_id, member.member_id), self._now() + timeout)

    def _member_list(self, group: ClassicGroup) -> list[JoinGroupResponseMember]:
        return [
            JoinGroupResponseMember(m.member_id, m.group_instance_id, m.metadata(group.protocol_name))
            for m in group.members.values()
        ]

    def _generation_response(
        self, group: ClassicGroup, member_id: str, *, with_members: bool, leader: str | None = None
    ) -> JoinGroupResponse:
        return JoinGroupResponse(
            error_code=ErrorCode.NONE,
            generation_id=group.generation,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader=(group.leader_id or "") if leader is None else leader,
            skip_assignment=False,
            member_id=member_id,
            members=self._member_list(group) if with_members else [],
        )

    def _remove_member(
        self, group: ClassicGroup, member_id: str, completions: list[tuple[int, Any]], error: ErrorCode
    ) -> None:
        member = group.members.get(member_id)
        if member is not None:
            if member.join_waiter is not None:
                completions.append((member.join_waiter, _join_error(error)))
                member.join_waiter = None
            if member.sync_waiter is not None:
                completions.append((member.sync_waiter, SyncGroupResponse(error_code=error)))
                member.sync_waiter = None
        group.remove(member_id)
        self.timers.cancel(HeartbeatDeadline(group.group_id, member_id))

    def _forget_if_unused(self, group: ClassicGroup) -> None:
        """A group created by a JoinGroup that went nowhere leaves no trace (nothing was stored)."""
        if (
            group.state is _S.EMPTY
            and group.generation == 0
            and not group.members
            and not group.pending_join
            and not self.offset_manager.holds_offsets(group.group_id)
        ):
            self.groups.pop(group.group_id, None)
            self.timers.cancel(RebalanceDeadline(group.group_id))

    # --- JoinGroup ---------------------------------------------------------------------------------------

    def join_group(self, client: ClientInfo, request: JoinGroupRequest) -> Result[JoinGroupResponse]:
        self._require_applied()
        group_id = request.group_id
        member_id = request.member_id
        if not group_id:
            return Result(_join_error(ErrorCode.INVALID_GROUP_ID, member_id), group_id)
        if not (
            self.config.min_session_timeout_ms
            <= request.session_timeout_ms
            <= self.config.max_session_timeout_ms
        ):
            return Result(_join_error(ErrorCode.INVALID_SESSION_TIMEOUT, member_id), group_id)
        group = self.groups.get(group_id)
        if group is None:
            if member_id:
                return Result(_join_error(ErrorCode.UNKNOWN_MEMBER_ID, member_id), group_id)
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
        self._forget_if_unused(group)
        result.group_id = group_id
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "JoinGroup v%d group %s member %r instance %r -> %s; state %s generation %d%s",
                client.api_version,
                group_id,
                member_id,
                request.group_instance_id,
                _summary(result.response),
                group.state.value,
                group.generation,
                _completions_summary(result),
            )
        return self._result(result)

    def _join_new_member(
        self,
        client: ClientInfo,
        request: JoinGroupRequest,
        group: ClassicGroup,
        protocols: Protocols,
        rebalance_timeout: int,
    ) -> Result[JoinGroupResponse]:
        if not group.supports_protocols(request.protocol_type, [name for name, _ in protocols]):
            return Result(_join_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
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
            return Result(_join_error(ErrorCode.MEMBER_ID_REQUIRED, new_id))
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
            return Result(_join_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id))
        if member_id in group.pending_join:
            return self._add_member_and_rebalance(
                client, request, group, member_id, protocols, rebalance_timeout
            )
        error = group.validate_member(member_id, request.group_instance_id)
        if error:
            return Result(_join_error(error, member_id))
        member = group.members[member_id]
        if group.state is _S.PREPARING_REBALANCE:
            return self._update_member_and_rebalance(group, member, protocols, rebalance_timeout, request)
        if group.state is _S.COMPLETING_REBALANCE:
            if member.matches(protocols):
                # The member lost its JoinGroup response: give it the current generation again.
                return Result(
                    self._generation_response(group, member_id, with_members=group.leader_id == member_id)
                )
            return self._update_member_and_rebalance(group, member, protocols, rebalance_timeout, request)
        if group.state is _S.STABLE:
            if group.leader_id == member_id or not member.matches(protocols):
                # The leader rejoins to make the group rebalance (e.g. the topics' partitions changed).
                return self._update_member_and_rebalance(group, member, protocols, rebalance_timeout, request)
            return Result(self._generation_response(group, member_id, with_members=False))
        return Result(_join_error(ErrorCode.UNKNOWN_MEMBER_ID, member_id))

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
        self._schedule_heartbeat(group, member, self.config.new_member_join_timeout_ms)
        result = self._maybe_prepare_rebalance_or_complete_join(group, _E.MEMBER_JOINED)
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
                (member.join_waiter, _join_error(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))
            )
        group.update_protocols(member, protocols)
        member.rebalance_timeout_ms = rebalance_timeout
        member.session_timeout_ms = request.session_timeout_ms
        waiter = self._waiter()
        member.join_waiter = waiter
        result = self._maybe_prepare_rebalance_or_complete_join(group, _E.MEMBER_JOINED)
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
            completions.append((old.join_waiter, _join_error(ErrorCode.FENCED_INSTANCE_ID, old_id)))
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
                response = self._generation_response(group, new_id, with_members=False, leader=current_leader)
                if api_version >= _SKIP_ASSIGNMENT_VERSION and current_leader == old_id:
                    response.leader = new_id
                    response.skip_assignment = True
                    response.members = [
                        replace(m, member_id=new_id) if m.member_id == old_id else m
                        for m in self._member_list(group)
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
        self._schedule_heartbeat(group, member)
        result = self._update_member_and_rebalance(group, member, protocols, rebalance_timeout, request)
        result.completions[:0] = completions
        return result

    # --- rebalancing -------------------------------------------------------------------------------------

    def _maybe_prepare_rebalance_or_complete_join(
        self, group: ClassicGroup, event: GroupEvent
    ) -> Result[Any]:
        if group.can_rebalance:
            return self._prepare_rebalance(group, event)
        return self._maybe_complete_join(group)

    def _prepare_rebalance(self, group: ClassicGroup, event: GroupEvent) -> Result[Any]:
        result: Result[Any] = Result(None, group.group_id)
        if group.state is _S.COMPLETING_REBALANCE:
            # Members waiting for the assignment of a generation that will never be stored rejoin.
            for member in group.members.values():
                member.assignment = b""
                if member.sync_waiter is not None:
                    result.completions.append(
                        (member.sync_waiter, SyncGroupResponse(error_code=ErrorCode.REBALANCE_IN_PROGRESS))
                    )
                    member.sync_waiter = None
        group.pending_sync.clear()
        self.timers.cancel(SyncDeadline(group.group_id))
        initial = group.state is _S.EMPTY
        group.transition(event, self._wall())
        if initial:
            delay = self.config.initial_rebalance_delay_ms
            group.initial_rebalance = (delay, max(group.rebalance_timeout_ms() - delay, 0))
            group.new_member_added = False
            self.timers.schedule(RebalanceDeadline(group.group_id), self._now() + delay)
            return result
        if group.has_all_members_joined():
            return result.absorb(self._complete_join(group))
        self.timers.schedule(RebalanceDeadline(group.group_id), self._now() + group.rebalance_timeout_ms())
        return result

    def _maybe_complete_join(self, group: ClassicGroup) -> Result[Any]:
        if (
            group.state is not _S.PREPARING_REBALANCE
            or group.previous_state is _S.EMPTY
            or not group.has_all_members_joined()
        ):
            return Result(None, group.group_id)
        return self._complete_join(group)

    def _complete_join(self, group: ClassicGroup) -> Result[Any]:
        """End the join phase: drop dynamic members that did not rejoin and form the next generation."""
        result: Result[Any] = Result(None, group.group_id)
        self.timers.cancel(RebalanceDeadline(group.group_id))
        group.initial_rebalance = None
        for member in group.not_yet_rejoined():
            if member.group_instance_id is None:
                self._remove_member(group, member.member_id, result.completions, ErrorCode.UNKNOWN_MEMBER_ID)
        if group.members and not group.maybe_elect_new_joined_leader():
            # Nobody rejoined: wait another rebalance timeout for the session deadlines to clear them.
            self.timers.schedule(
                RebalanceDeadline(group.group_id), self._now() + group.rebalance_timeout_ms()
            )
            return result
        if not group.members:
            value = GroupMetadataValue(
                group.protocol_type or "", group.generation + 1, None, None, self._wall()
            )
            result.records.append(CoordinatorRecord(GroupMetadataKey(group.group_id), value))
            return result
        group.generation += 1
        group.protocol_name = group.select_protocol()
        group.transition(_E.JOIN_COMPLETED, self._wall())
        for member in group.members.values():
            response = self._generation_response(
                group, member.member_id, with_members=member.member_id == group.leader_id
            )
            if member.join_waiter is not None:
                result.completions.append((member.join_waiter, response))
                member.join_waiter = None
            member.is_new = False
            self._schedule_heartbeat(group, member)
            group.pending_sync.add(member.member_id)
        self.timers.schedule(SyncDeadline(group.group_id), self._now() + group.rebalance_timeout_ms())
        return result

    # --- SyncGroup ---------------------------------------------------------------------------------------

    def sync_group(self, client: ClientInfo, request: SyncGroupRequest) -> Result[SyncGroupResponse]:
        self._require_applied()
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
            return Result(self._sync_response(group, member.assignment), group_id)
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
                        (m.sync_waiter, self._sync_response(group, assignments.get(m.member_id, b"")))
                    )
                    m.sync_waiter = None
                    self._schedule_heartbeat(group, m)
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "SyncGroup group %s member %r generation %d (%d assignments) -> %s; state %s%s",
                group_id,
                member_id,
                request.generation_id,
                len(request.assignments),
                _summary(result.response),
                group.state.value,
                _completions_summary(result),
            )
        return self._result(result)

    @staticmethod
    def _sync_response(group: ClassicGroup, assignment: bytes) -> SyncGroupResponse:
        return SyncGroupResponse(
            error_code=ErrorCode.NONE,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            assignment=assignment,
        )

    # --- Heartbeat and LeaveGroup ------------------------------------------------------------------------

    def heartbeat(self, client: ClientInfo, request: HeartbeatRequest) -> Result[HeartbeatResponse]:
        self._require_applied()
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
        self._schedule_heartbeat(group, group.members[request.member_id])
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
        self._require_applied()
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
                    self._remove_member(group, existing, result.completions, ErrorCode.UNKNOWN_MEMBER_ID)
            elif identity.member_id in group.pending_join:
                group.pending_join.discard(identity.member_id)
                self.timers.cancel(HeartbeatDeadline(group_id, identity.member_id))
            else:
                code = group.validate_member(identity.member_id, instance_id)
                if not code:
                    self._remove_member(
                        group, identity.member_id, result.completions, ErrorCode.UNKNOWN_MEMBER_ID
                    )
            left = left or not code
            responses.append(MemberResponse(identity.member_id, instance_id, code))
        if left:
            if group.state in (_S.STABLE, _S.COMPLETING_REBALANCE):
                result.absorb(self._maybe_prepare_rebalance_or_complete_join(group, _E.MEMBER_REMOVED))
            elif group.state is _S.PREPARING_REBALANCE:
                result.absorb(self._maybe_complete_join(group))
        result.response = LeaveGroupResponse(error_code=ErrorCode.NONE, members=responses)
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "LeaveGroup group %s members %s; state %s generation %d%s",
                group_id,
                [(r.member_id, ErrorCode(r.error_code).name) for r in responses],
                group.state.value,
                group.generation,
                _completions_summary(result),
            )
        return self._result(result)

    # --- offsets (`offset_manager.OffsetManager`) ------------------------------------------------------

    def commit_offsets(
        self,
        client: ClientInfo,
        request: OffsetCommitRequest,
        partition_exists: PartitionExists | None = None,
    ) -> Result[OffsetCommitResponse]:
        self._require_applied()
        return self._result(self.offset_manager.commit_offsets(client, request, partition_exists))

    def commit_transactional_offsets(
        self,
        request: TxnOffsetCommitRequest,
        partition_exists: PartitionExists | None = None,
    ) -> Result[TxnOffsetCommitResponse]:
        """TxnOffsetCommit: see `OffsetManager.commit_transactional_offsets`."""
        self._require_applied()
        return self._result(self.offset_manager.commit_transactional_offsets(request, partition_exists))

    def fetch_offsets(
        self, group_id: str, topics: list[tuple[str, list[int]]] | None, require_stable: bool = False
    ) -> OffsetFetchResponseGroup:
        """OffsetFetch for one group: see `OffsetManager.fetch_offsets`."""
        return self.offset_manager.fetch_offsets(group_id, topics, require_stable)

    def delete_offsets(self, request: OffsetDeleteRequest) -> Result[OffsetDeleteResponse]:
        self._require_applied()
        return self._result(self.offset_manager.delete_offsets(request))

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
                self._schedule_heartbeat(group, member)

    # --- groups ------------------------------------------------------------------------------------------

    def list_groups(
        self, states: list[str] | None = None, types: list[str] | None = None
    ) -> list[ListedGroup]:
        wanted_states = {s.lower() for s in states or []}
        wanted_types = {t.lower() for t in types or []}
        listed = [g.as_listed_group() for g in self.groups.values()]
        return [
            g
            for g in listed
            if (not wanted_types or g.group_type in wanted_types)
            and (not wanted_states or g.group_state.lower() in wanted_states)
        ]

    def describe_groups(self, group_ids: list[str]) -> list[DescribedGroup]:
        out = []
        for group_id in group_ids:
            group = self.groups.get(group_id)
            if not group_id:
                out.append(DescribedGroup(ErrorCode.INVALID_GROUP_ID, None, group_id, _S.DEAD.value))
            elif group is None:
                out.append(DescribedGroup(ErrorCode.NONE, None, group_id, _S.DEAD.value))
            else:
                out.append(group.describe())
        return out

    def delete_group(self, group_id: str) -> Result[DeletableGroupResult]:
        """DeleteGroups for one group: tombstones for its offsets and for the group itself."""
        self._require_applied()
        if not group_id:
            return Result(DeletableGroupResult(group_id, ErrorCode.INVALID_GROUP_ID), group_id)
        group = self.groups.get(group_id)
        if group is None:
            return Result(DeletableGroupResult(group_id, ErrorCode.GROUP_ID_NOT_FOUND), group_id)
        error = group.validate_delete_group()
        if error:
            return Result(DeletableGroupResult(group_id, error), group_id)
        records = self.offset_manager.delete_all_offsets(group_id)
        records.extend(group.tombstones())
        return self._result(Result(DeletableGroupResult(group_id, ErrorCode.NONE), group_id, records))

    # --- retention ---------------------------------------------------------------------------------------

    def expire_offsets(self) -> Iterator[Result[None]]:
        """offsets.retention.minutes (KIP-211): tombstones for expired offsets, and for groups that are
        Empty with nothing left. Yields one result per group; apply each before taking the next."""
        now = self._wall()
        for group_id in list(self.groups):
            self._require_applied()
            group = self.groups.get(group_id)
            if group is None:
                continue
            records: list[CoordinatorRecord] = []
            all_gone = self.offset_manager.cleanup_expired_offsets(group, now, records)
            if all_gone and group.is_empty:
                records.extend(group.tombstones())
            if records:
                yield self._result(Result(None, group_id, records))

    # --- time --------------------------------------------------------------------------------------------

    def next_deadline(self) -> int | None:
        return self.timers.next_deadline()

    def tick(self, now: int | None = None) -> Iterator[Result[None]]:
        """Act on every deadline that has passed, one at a time; apply each result before the next."""
        now = self._now() if now is None else now
        budget = len(self.timers) + 16  # a deadline rescheduled at `now` waits for the next tick
        while budget > 0:
            budget -= 1
            self._require_applied()
            deadline = self.timers.pop_due(now)
            if deadline is None:
                return
            result = self._on_deadline(deadline)
            if log.isEnabledFor(logging.DEBUG):
                group = self.groups.get(result.group_id)
                log.debug(
                    "%s -> state %s generation %s%s",
                    deadline,
                    group.state.value if group is not None else "-",
                    group.generation if group is not None else "-",
                    _completions_summary(result),
                )
            if result.records or result.completions:
                yield self._result(result)

    def _on_deadline(self, deadline: Deadline) -> Result[None]:
        match deadline:
            case HeartbeatDeadline(group_id, member_id):
                return self._on_heartbeat_deadline(group_id, member_id)
            case RebalanceDeadline(group_id):
                return self._on_rebalance_deadline(group_id)
            case SyncDeadline(group_id):
                return self._on_sync_deadline(group_id)
            case _:
                assert_never(deadline)

    def _on_rebalance_deadline(self, group_id: str) -> Result[None]:
        """The join phase ends: the next generation forms (unless the initial delay is extended)."""
        group = self.groups.get(group_id)
        result: Result[None] = Result(None, group_id)
        if group is None or group.state is not _S.PREPARING_REBALANCE:
            return result
        if group.initial_rebalance is not None:
            delay, remaining = group.initial_rebalance
            if group.new_member_added and remaining > 0:
                # Members keep arriving: wait a little longer (up to the rebalance timeout).
                group.new_member_added = False
                new_delay = min(delay, remaining)
                group.initial_rebalance = (new_delay, max(remaining - delay, 0))
                self.timers.schedule(RebalanceDeadline(group_id), self._now() + new_delay)
                return result
        return result.absorb(self._complete_join(group))

    def _on_sync_deadline(self, group_id: str) -> Result[None]:
        """Members that did not send SyncGroup in time are removed; the group rebalances."""
        group = self.groups.get(group_id)
        result: Result[None] = Result(None, group_id)
        if group is None:
            return result
        if group.state in (_S.COMPLETING_REBALANCE, _S.STABLE) and group.pending_sync:
            for member_id in sorted(group.pending_sync):
                self._remove_member(group, member_id, result.completions, ErrorCode.UNKNOWN_MEMBER_ID)
            return result.absorb(self._prepare_rebalance(group, _E.MEMBER_REMOVED))
        return result

    def _on_heartbeat_deadline(self, group_id: str, member_id: str) -> Result[None]:
        """A session ended: a pending member id is forgotten, a member without excuse is removed."""
        group = self.groups.get(group_id)
        result: Result[None] = Result(None, group_id)
        if group is None:
            return result
        if member_id in group.pending_join:
            group.pending_join.discard(member_id)
            if group.state is _S.PREPARING_REBALANCE and group.has_all_members_joined():
                result.absorb(self._maybe_complete_join(group))
            self._forget_if_unused(group)
            return result
        member = group.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat():
            return result
        log.info("member %s of group %s failed its session; removing it", member_id, group_id)
        self._remove_member(group, member_id, result.completions, ErrorCode.UNKNOWN_MEMBER_ID)
        if group.state in (_S.STABLE, _S.COMPLETING_REBALANCE):
            return result.absorb(self._maybe_prepare_rebalance_or_complete_join(group, _E.MEMBER_REMOVED))
        if group.state is _S.PREPARING_REBALANCE and group.has_all_members_joined():
            return result.absorb(self._complete_join(group))
        return result

    # --- replay ------------------------------------------------------------------------------------------

    def replay(self, record_offset: int, producer_id: int, record: CoordinatorRecord) -> None:
        """Apply one record that is in `__consumer_offsets` (just appended, or read while loading)."""
        if self._unapplied:
            self._unapplied -= 1
        key = record.key
        if isinstance(key, OffsetCommitKey):
            value = record.value
            assert value is None or isinstance(value, OffsetCommitValue)
            self.offset_manager.replay(record_offset, producer_id, key, value)
            return
        group_value = record.value
        assert group_value is None or isinstance(group_value, GroupMetadataValue)
        group = self.groups.get(key.group)
        if group_value is None:
            if group is not None:
                for member_id in list(group.members):
                    self.timers.cancel(HeartbeatDeadline(key.group, member_id))
                self.timers.cancel(RebalanceDeadline(key.group))
                self.timers.cancel(SyncDeadline(key.group))
                group.transition(_E.DELETED, self._wall())
                del self.groups[key.group]
            self.offset_manager.forget_group(key.group)
            return
        if group is None:
            group = ClassicGroup(key.group, state_timestamp=group_value.current_state_timestamp)
            self.groups[key.group] = group
        removed, renamed, added = group.apply_stored_generation(group_value)
        for member in removed:
            self.timers.cancel(HeartbeatDeadline(key.group, member.member_id))
        for old_id, new_id in renamed:
            self.timers.cancel(HeartbeatDeadline(key.group, old_id))
            self._schedule_heartbeat(group, group.members[new_id])
        for member in added:  # loading: every stored member gets a fresh session from now
            self._schedule_heartbeat(group, member)
        if group.state is _S.EMPTY:
            self.timers.cancel(SyncDeadline(key.group))

    def replay_end_txn_marker(self, producer_id: int, committed: bool) -> None:
        """A COMMIT/ABORT marker reached this partition: materialize or drop the pending offsets."""
        self.offset_manager.replay_end_txn_marker(producer_id, committed)

    def load_batch(self, batch: RecordBatch, key_cache: dict[bytes, Any] | None = None) -> int:
        """Replay one stored batch (start-up); returns the number of records applied.

        Plain OffsetCommit records (the bulk of any log) take a fast path that parses the fields
        straight into the offset store; `key_cache` (key bytes -> parsed key), shared across the batches
        of a partition, saves parsing the same key again. Everything else goes through `replay`.
        """
        header = batch.header()
        producer_id = header.producer_id
        if header.attributes & _CONTROL:
            marker = parse_end_txn_marker(batch)
            self.replay_end_txn_marker(producer_id, marker.type == ControlRecordType.COMMIT)
            return 0
        groups = self.groups
        ensure_group = self.ensure_group
        put = self.offsets.put_committed
        plain = producer_id < 0
        count = 0
        for record in batch.records():
            raw_key = record.key
            if raw_key is None:
                raise CorruptRecordError(f"__consumer_offsets record at offset {record.offset} has no key")
            parsed = key_cache.get(raw_key) if key_cache is not None else None
            if parsed is None:
                fields = offset_key_fields(raw_key)
                if fields is None:  # not a plain OffsetCommitKey: the checked path
                    try:
                        key = decode_key(raw_key)
                    except UnknownRecordError:
                        continue  # not a classic group record (e.g. a KIP-848 group's)
                    self.replay(
                        record.offset, producer_id, CoordinatorRecord(key, decode_value(key, record.value))
                    )
                    count += 1
                    continue
                parsed = (fields[0], (fields[1], fields[2]))
                if key_cache is not None and len(key_cache) < _KEY_CACHE_LIMIT:
                    key_cache[raw_key] = parsed
            group, tp = parsed
            value = record.value
            values = offset_value_fields(value) if plain and value is not None else None
            if values is None:  # a tombstone, a transactional commit, an older value version
                offset_key = OffsetCommitKey(group, tp[0], tp[1])
                offset_value = decode_value(offset_key, value)
                assert offset_value is None or isinstance(offset_value, OffsetCommitValue)
                self.offset_manager.replay(record.offset, producer_id, offset_key, offset_value)
            else:
                if group not in groups:
                    ensure_group(group)
                put(
                    group,
                    tp,
                    OffsetAndMetadata(values[0], values[1], values[2], values[3], -1, record.offset),
                )
            count += 1
        return count

    def on_append_failed(self, result: Result[Any]) -> Result[None]:
        """The records of `result` could not be appended: nothing was stored. A group waiting for its
        assignment to be stored rebalances instead (its members were told to retry)."""
        self._unapplied = 0
        group = self.groups.get(result.group_id)
        # A transactional offset commit that failed (e.g. its KIP-890 check) changed nothing, even when
        # it was accepted during CompletingRebalance: no reason to rebalance.
        if group is None or group.state is not _S.COMPLETING_REBALANCE or result.producer_id >= 0:
            return Result(None, result.group_id)
        return self._result(self._prepare_rebalance(group, _E.MEMBER_REMOVED))


def _summary(response: object) -> str:
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


def _completions_summary(result: Result[Any]) -> str:
    if not result.completions:
        return ""
    return "; completes " + ", ".join(f"waiter {w}: {_summary(r)}" for w, r in result.completions)


def _inconsistent(requested: str | None, current: str | None) -> bool:
    return requested is not None and current is not None and requested != current
