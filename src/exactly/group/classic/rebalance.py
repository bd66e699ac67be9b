"""How a classic group forms its generations (the rebalance half of Kafka's `GroupMetadataManager`
for classic groups): the join phase ends when every member has rejoined or its `RebalanceDeadline`
passes; the members that did not rejoin are dropped, a leader and a protocol are chosen and the
JoinGroup responses go out; a `SyncDeadline` then bounds the sync phase. Members are removed here
(their parked requests answered) and their sessions (`HeartbeatDeadline`) scheduled; and when a
deadline passes, `on_heartbeat_deadline`, `on_rebalance_deadline` and `on_sync_deadline` act on it.

`manager.ClassicGroupManager` calls this for requests and deadlines; nothing here is stored until the
GroupMetadata record it may return is replayed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from exactly.clock import Clock
from exactly.errors import ErrorCode
from exactly.group.classic.group import ClassicGroup
from exactly.group.classic.member import Member
from exactly.group.classic.responses import generation_response, join_error
from exactly.group.classic.state import ClassicGroupState, GroupEvent
from exactly.group.config import GroupConfig
from exactly.group.deadlines import Deadline, HeartbeatDeadline, RebalanceDeadline, SyncDeadline
from exactly.group.records import CoordinatorRecord, GroupMetadataKey, GroupMetadataValue
from exactly.group.result import Result
from exactly.group.timers import Timers
from exactly.protocol.messages.sync_group import SyncGroupResponse

__all__ = ["Rebalancer"]

log = logging.getLogger(__name__)

_S = ClassicGroupState
_E = GroupEvent


class Rebalancer:
    def __init__(
        self,
        config: GroupConfig,
        clock: Clock,
        groups: dict[str, ClassicGroup],
        timers: Timers[Deadline],
        holds_offsets: Callable[[str], bool],
    ) -> None:
        self.config = config
        self.clock = clock
        self.groups = groups
        self.timers = timers
        self._holds_offsets = holds_offsets
        self.completed_rebalances = 0  # generations formed since start (Kafka's group-completed-rebalance)

    def _now(self) -> int:
        return self.clock.monotonic_ms()

    def _wall(self) -> int:
        return self.clock.milliseconds()

    # --- members -----------------------------------------------------------------------------------------

    def schedule_heartbeat(self, group: ClassicGroup, member: Member, timeout_ms: int | None = None) -> None:
        timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms
        self.timers.schedule(HeartbeatDeadline(group.group_id, member.member_id), self._now() + timeout)

    def remove_member(
        self, group: ClassicGroup, member_id: str, completions: list[tuple[int, Any]], error: ErrorCode
    ) -> None:
        member = group.members.get(member_id)
        if member is not None:
            if member.join_waiter is not None:
                completions.append((member.join_waiter, join_error(error)))
                member.join_waiter = None
            if member.sync_waiter is not None:
                completions.append((member.sync_waiter, SyncGroupResponse(error_code=error)))
                member.sync_waiter = None
        group.remove(member_id)
        self.timers.cancel(HeartbeatDeadline(group.group_id, member_id))

    def forget_if_unused(self, group: ClassicGroup) -> None:
        """A group created by a JoinGroup that went nowhere leaves no trace (nothing was stored)."""
        if (
            group.state is _S.EMPTY
            and group.generation == 0
            and not group.members
            and not group.pending_join
            and not self._holds_offsets(group.group_id)
        ):
            self.groups.pop(group.group_id, None)
            self.timers.cancel(RebalanceDeadline(group.group_id))

    # --- the join phase and the next generation --------------------------------------------------------

    def maybe_prepare_rebalance_or_complete_join(self, group: ClassicGroup, event: GroupEvent) -> Result[Any]:
        if group.can_rebalance:
            return self.prepare_rebalance(group, event)
        return self.maybe_complete_join(group)

    def prepare_rebalance(self, group: ClassicGroup, event: GroupEvent) -> Result[Any]:
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
            return result.absorb(self.complete_join(group))
        self.timers.schedule(RebalanceDeadline(group.group_id), self._now() + group.rebalance_timeout_ms())
        return result

    def maybe_complete_join(self, group: ClassicGroup) -> Result[Any]:
        if (
            group.state is not _S.PREPARING_REBALANCE
            or group.previous_state is _S.EMPTY
            or not group.has_all_members_joined()
        ):
            return Result(None, group.group_id)
        return self.complete_join(group)

    def complete_join(self, group: ClassicGroup) -> Result[Any]:
        """End the join phase: drop dynamic members that did not rejoin and form the next generation."""
        result: Result[Any] = Result(None, group.group_id)
        self.timers.cancel(RebalanceDeadline(group.group_id))
        group.initial_rebalance = None
        for member in group.not_yet_rejoined():
            if member.group_instance_id is None:
                self.remove_member(group, member.member_id, result.completions, ErrorCode.UNKNOWN_MEMBER_ID)
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
        self.completed_rebalances += 1
        group.protocol_name = group.select_protocol()
        group.transition(_E.JOIN_COMPLETED, self._wall())
        for member in group.members.values():
            response = generation_response(
                group, member.member_id, with_members=member.member_id == group.leader_id
            )
            if member.join_waiter is not None:
                result.completions.append((member.join_waiter, response))
                member.join_waiter = None
            member.is_new = False
            self.schedule_heartbeat(group, member)
            group.pending_sync.add(member.member_id)
        self.timers.schedule(SyncDeadline(group.group_id), self._now() + group.rebalance_timeout_ms())
        return result

    # --- the actions of the deadlines (`deadlines.py`) ---------------------------------------------------

    def on_heartbeat_deadline(self, group_id: str, member_id: str) -> Result[None]:
        """A session ended: a pending member id is forgotten, a member without excuse is removed."""
        group = self.groups.get(group_id)
        result: Result[None] = Result(None, group_id)
        if group is None:
            return result
        if member_id in group.pending_join:
            group.pending_join.discard(member_id)
            if group.state is _S.PREPARING_REBALANCE and group.has_all_members_joined():
                result.absorb(self.maybe_complete_join(group))
            self.forget_if_unused(group)
            return result
        member = group.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat():
            return result
        log.info("member %s of group %s failed its session; removing it", member_id, group_id)
        self.remove_member(group, member_id, result.completions, ErrorCode.UNKNOWN_MEMBER_ID)
        if group.state in (_S.STABLE, _S.COMPLETING_REBALANCE):
            return result.absorb(self.maybe_prepare_rebalance_or_complete_join(group, _E.MEMBER_REMOVED))
        if group.state is _S.PREPARING_REBALANCE and group.has_all_members_joined():
            return result.absorb(self.complete_join(group))
        return result

    def on_rebalance_deadline(self, group_id: str) -> Result[None]:
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
        return result.absorb(self.complete_join(group))

    def on_sync_deadline(self, group_id: str) -> Result[None]:
        """Members that did not send SyncGroup in time are removed; the group rebalances."""
        group = self.groups.get(group_id)
        result: Result[None] = Result(None, group_id)
        if group is None:
            return result
        if group.state in (_S.COMPLETING_REBALANCE, _S.STABLE) and group.pending_sync:
            for member_id in sorted(group.pending_sync):
                self.remove_member(group, member_id, result.completions, ErrorCode.UNKNOWN_MEMBER_ID)
            return result.absorb(self.prepare_rebalance(group, _E.MEMBER_REMOVED))
        return result
