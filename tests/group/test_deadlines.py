"""The coordinator's timer keys are the typed deadlines of `exactly.group.deadlines`, and each one,
when it passes, does what it is the deadline of."""

from __future__ import annotations

from exactly.errors import ErrorCode
from exactly.group.classic.state import ClassicGroupState
from exactly.group.config import GroupConfig
from exactly.group.deadlines import HeartbeatDeadline, RebalanceDeadline, SyncDeadline
from exactly.group.timers import Timers
from exactly.protocol.messages.join_group import JoinGroupResponse
from tests.group.helpers import Harness, stable_group

S = ClassicGroupState
DEADLINE_TYPES = (HeartbeatDeadline, RebalanceDeadline, SyncDeadline)


def deadlines(h: Harness) -> set[object]:
    keys = h.coordinator.timers.keys()
    assert all(isinstance(k, DEADLINE_TYPES) for k in keys), keys
    return set(keys)


def test_equal_deadlines_are_one_timer_key() -> None:
    timers: Timers[HeartbeatDeadline | SyncDeadline] = Timers()
    timers.schedule(HeartbeatDeadline("g", "m"), 10)
    timers.schedule(HeartbeatDeadline("g", "m"), 20)  # the same key: moved, not added
    timers.schedule(SyncDeadline("g"), 15)
    assert len(timers) == 2
    assert timers.deadline(HeartbeatDeadline("g", "m")) == 20
    assert timers.due(30) == [SyncDeadline("g"), HeartbeatDeadline("g", "m")]


def test_stable_group_has_one_heartbeat_deadline_per_member() -> None:
    h = Harness()
    ids, _, _ = stable_group(h, "g", 2, session_ms=6000)
    assert deadlines(h) == {HeartbeatDeadline("g", m) for m in ids}
    now = h.clock.monotonic_ms()
    assert {h.coordinator.timers.deadline(HeartbeatDeadline("g", m)) for m in ids} == {now + 6000}


def test_heartbeat_deadline_removes_the_member() -> None:
    h = Harness()
    ids, generation, _ = stable_group(h, "g", 2, session_ms=6000)
    h.advance(5000)
    assert h.heartbeat("g", ids[0], generation) == ErrorCode.NONE  # moves only ids[0]'s deadline
    h.advance(1000)
    assert list(h.coordinator.groups["g"].members) == [ids[0]]
    assert HeartbeatDeadline("g", ids[1]) not in h.coordinator.timers
    assert h.coordinator.groups["g"].state is S.PREPARING_REBALANCE
    assert RebalanceDeadline("g") in deadlines(h)


def test_heartbeat_deadline_forgets_a_pending_member_id() -> None:
    h = Harness()
    first = h.join("fresh", session_ms=7000)
    assert isinstance(first, JoinGroupResponse)
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
    assert deadlines(h) == {HeartbeatDeadline("fresh", first.member_id)}
    h.advance(7000)
    assert "fresh" not in h.coordinator.groups  # nothing was stored: the group leaves no trace
    assert deadlines(h) == set()


def test_rebalance_deadline_forms_the_next_generation() -> None:
    h = Harness()
    ids, generation, _ = stable_group(h, "g", 2, session_ms=30_000, rebalance_ms=8000)
    parked = h.join("g", ids[0], session_ms=30_000, rebalance_ms=8000)
    assert h.coordinator.timers.deadline(RebalanceDeadline("g")) == h.clock.monotonic_ms() + 8000
    h.advance(7999)
    assert h.resolve(parked) is None
    h.advance(1)
    response = h.resolve(parked)
    assert (response.generation_id, [m.member_id for m in response.members]) == (generation + 1, [ids[0]])
    assert RebalanceDeadline("g") not in h.coordinator.timers
    assert SyncDeadline("g") in deadlines(h)


def test_initial_rebalance_deadline_waits_while_members_arrive() -> None:
    h = Harness(config=GroupConfig(initial_rebalance_delay_ms=3000))
    _, first = h.join_new("g", rebalance_ms=20_000)
    h.advance(2000)
    _, second = h.join_new("g", rebalance_ms=20_000)
    h.advance(1000)  # the delay passed, but a member arrived during it: wait another delay
    assert h.resolve(first) is None
    assert h.coordinator.timers.deadline(RebalanceDeadline("g")) == h.clock.monotonic_ms() + 3000
    h.advance(3000)
    assert h.resolve(first).generation_id == h.resolve(second).generation_id == 1


def test_sync_deadline_removes_members_that_did_not_sync() -> None:
    h = Harness()
    ids, generation, leader = stable_group(h, "g", 2, rebalance_ms=5000)
    follower = next(m for m in ids if m != leader)
    h.join("g", leader, rebalance_ms=5000)
    h.join("g", follower, rebalance_ms=5000)
    assert h.coordinator.groups["g"].state is S.COMPLETING_REBALANCE
    assert h.coordinator.timers.deadline(SyncDeadline("g")) == h.clock.monotonic_ms() + 5000
    h.sync("g", follower, generation + 1)
    h.advance(5000)
    assert list(h.coordinator.groups["g"].members) == [follower]
    assert h.coordinator.groups["g"].state is S.PREPARING_REBALANCE
    assert SyncDeadline("g") not in h.coordinator.timers
