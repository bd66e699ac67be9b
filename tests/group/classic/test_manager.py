"""`ClassicGroupManager` and its `Rebalancer` driven directly, without the coordinator facade: a group
forms its first generation, the leader's assignment is stored by replay, and the offset manager's
questions (`GroupDirectory`) are answered."""

from __future__ import annotations

import itertools

from exactly.clock import ManualClock
from exactly.errors import ErrorCode
from exactly.group.classic.group import ClassicGroup
from exactly.group.classic.manager import ClassicGroupManager
from exactly.group.classic.state import ClassicGroupState
from exactly.group.client import ClientInfo
from exactly.group.config import GroupConfig
from exactly.group.deadlines import Deadline, HeartbeatDeadline, RebalanceDeadline, SyncDeadline
from exactly.group.records import GroupMetadataKey, GroupMetadataValue
from exactly.group.result import Parked
from exactly.group.timers import Timers
from exactly.protocol.messages.join_group import JoinGroupRequest, JoinGroupRequestProtocol, JoinGroupResponse
from exactly.protocol.messages.sync_group import (
    SyncGroupRequest,
    SyncGroupRequestAssignment,
    SyncGroupResponse,
)
from tests.group.helpers import subscription

S = ClassicGroupState
CLIENT = ClientInfo("app", "/127.0.0.1", 5)


def manager(
    holds_offsets: bool = False,
) -> tuple[ClassicGroupManager, dict[str, ClassicGroup], Timers[Deadline], ManualClock]:
    clock = ManualClock()
    groups: dict[str, ClassicGroup] = {}
    timers: Timers[Deadline] = Timers()
    counter = itertools.count(1)
    m = ClassicGroupManager(
        GroupConfig(initial_rebalance_delay_ms=0),
        clock,
        groups,
        timers,
        holds_offsets=lambda _: holds_offsets,
        member_id_suffix=lambda: f"m{next(counter)}",
    )
    return m, groups, timers, clock


def join(m: ClassicGroupManager, member_id: str = "") -> JoinGroupResponse | Parked | None:
    request = JoinGroupRequest(
        "g",
        10_000,
        20_000,
        member_id,
        None,
        "consumer",
        [JoinGroupRequestProtocol("range", subscription("t"))],
    )
    return m.join_group(CLIENT, request).response


def test_first_generation_without_the_facade() -> None:
    m, groups, timers, clock = manager()
    first = join(m)
    assert isinstance(first, JoinGroupResponse)
    assert (first.error_code, first.member_id) == (ErrorCode.MEMBER_ID_REQUIRED, "app-m1")
    assert timers.keys() == [HeartbeatDeadline("g", "app-m1")]
    parked = join(m, "app-m1")
    assert isinstance(parked, Parked)
    assert timers.deadline(RebalanceDeadline("g")) == clock.monotonic_ms()  # the initial delay is 0
    assert timers.pop_due(clock.monotonic_ms()) == RebalanceDeadline("g")
    formed = m.rebalance.on_rebalance_deadline("g")
    assert formed.records == []  # the generation is rendezvous state until the leader's assignment
    [(waiter, response)] = formed.completions
    assert waiter == parked.waiter
    assert (response.generation_id, response.leader) == (1, "app-m1")
    assert groups["g"].state is S.COMPLETING_REBALANCE
    assert SyncDeadline("g") in timers

    synced = m.sync_group(
        CLIENT,
        SyncGroupRequest(
            "g", 1, "app-m1", None, "consumer", "range", [SyncGroupRequestAssignment("app-m1", b"a")]
        ),
    )
    [record] = synced.records
    assert record.key == GroupMetadataKey("g")
    assert isinstance(record.value, GroupMetadataValue)
    assert groups["g"].state is S.COMPLETING_REBALANCE  # nothing changes before the replay
    m.replay(GroupMetadataKey("g"), record.value)
    assert groups["g"].state is S.STABLE
    assert SyncDeadline("g") not in timers
    assert isinstance(synced.response, Parked)
    assert synced.completions == [
        (synced.response.waiter, SyncGroupResponse(0, 0, "consumer", "range", b"a"))
    ]


def test_a_tombstone_drops_the_group_and_its_deadlines() -> None:
    m, groups, timers, _ = manager()
    join(m, join(m).member_id)  # type: ignore[union-attr]
    m.rebalance.on_rebalance_deadline("g")
    synced = m.sync_group(CLIENT, SyncGroupRequest("g", 1, "app-m1", None, "consumer", "range", []))
    m.replay(GroupMetadataKey("g"), synced.records[0].value)  # type: ignore[arg-type]
    assert timers.keys() == [HeartbeatDeadline("g", "app-m1")]
    m.replay(GroupMetadataKey("g"), None)  # (replay: e.g. a log cut short while the group was Stable)
    assert groups == {}
    assert timers.keys() == []


def test_the_offset_managers_directory() -> None:
    m, groups, timers, clock = manager(holds_offsets=True)
    m.ensure_group("simple")
    assert m.group("simple") is groups["simple"]
    assert groups["simple"].state is S.EMPTY
    m.ensure_group("simple")  # idempotent
    assert m.group("nope") is None
    join(m, join(m).member_id)  # type: ignore[union-attr]
    m.rebalance.on_rebalance_deadline("g")
    clock.advance(5_000)
    m.offset_commit_accepted("g", "app-m1")  # CompletingRebalance: a commit is no heartbeat here
    assert timers.deadline(HeartbeatDeadline("g", "app-m1")) == clock.monotonic_ms() - 5_000 + 10_000
    synced = m.sync_group(CLIENT, SyncGroupRequest("g", 1, "app-m1", None, "consumer", "range", []))
    m.replay(GroupMetadataKey("g"), synced.records[0].value)  # type: ignore[arg-type]
    assert groups["g"].state is S.STABLE
    m.offset_commit_accepted("g", "app-m1")
    assert timers.deadline(HeartbeatDeadline("g", "app-m1")) == clock.monotonic_ms() + 10_000
