"""The group coordinator driven like the broker drives it (`Harness`), on a ManualClock."""

from __future__ import annotations

import pytest

from exactly.errors import ErrorCode
from exactly.group import ClassicGroupState, ClientInfo, GroupConfig, Parked
from exactly.group.records import (
    CoordinatorRecord,
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
)
from exactly.protocol.messages.join_group import JoinGroupResponse
from exactly.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetCommitResponse,
)
from exactly.protocol.messages.offset_delete import (
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
)
from exactly.protocol.messages.sync_group import SyncGroupRequest, SyncGroupResponse
from tests.group.helpers import Harness, consumer_protocols, stable_group

S = ClassicGroupState


def state(h: Harness, group: str) -> ClassicGroupState:
    return h.coordinator.groups[group].state


def stored_generations(h: Harness, group: str) -> list[GroupMetadataValue | None]:
    out: list[GroupMetadataValue | None] = []
    for _, _, r in h.log:
        if r.key == GroupMetadataKey(group):
            assert r.value is None or isinstance(r.value, GroupMetadataValue)
            out.append(r.value)
    return out


# --- join / sync ----------------------------------------------------------------------------------------


def test_member_id_required_handshake_then_one_member_generation() -> None:
    h = Harness()
    first = h.join("g", client_id="app")
    assert isinstance(first, JoinGroupResponse)
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
    assert first.member_id.startswith("app-")
    assert state(h, "g") is S.EMPTY  # a pending member id does not start a rebalance
    parked = h.join("g", first.member_id, client_id="app")
    assert isinstance(parked, Parked)
    assert state(h, "g") is S.PREPARING_REBALANCE
    assert h.resolve(parked) is None
    h.advance(0)  # group.initial.rebalance.delay.ms = 0
    response = h.resolve(parked)
    assert response.error_code == 0
    assert (response.generation_id, response.leader, response.member_id) == (
        1,
        first.member_id,
        first.member_id,
    )
    assert response.protocol_name == "range"
    assert [m.member_id for m in response.members] == [first.member_id]
    assert state(h, "g") is S.COMPLETING_REBALANCE
    assert h.log == []  # nothing is stored until the leader's assignment
    sync = h.sync("g", first.member_id, 1, {first.member_id: b"assignment"})
    resolved = h.resolve(sync)
    assert isinstance(resolved, SyncGroupResponse)
    assert (resolved.error_code, resolved.assignment, resolved.protocol_name) == (0, b"assignment", "range")
    assert state(h, "g") is S.STABLE
    [stored] = stored_generations(h, "g")
    assert stored is not None
    assert (stored.generation, stored.leader, stored.protocol) == (1, first.member_id, "range")
    assert [(m.member_id, m.assignment) for m in stored.members] == [(first.member_id, b"assignment")]
    assert h.heartbeat("g", first.member_id, 1) == ErrorCode.NONE


def test_join_v3_needs_no_member_id_handshake() -> None:
    h = Harness()
    parked = h.join("g", version=3)
    assert isinstance(parked, Parked)
    h.advance(0)
    assert h.resolve(parked).generation_id == 1


def test_three_members_one_generation_and_a_fourth_triggers_rebalance() -> None:
    h = Harness()
    ids, generation, leader = stable_group(h, "g", 3)
    assert generation == 1
    assert leader == ids[0]
    new_id, parked = h.join_new("g")
    assert state(h, "g") is S.PREPARING_REBALANCE
    for m in ids:  # the others hear about it from their heartbeats, then rejoin
        assert h.heartbeat("g", m, generation) == ErrorCode.REBALANCE_IN_PROGRESS
    rejoined = [h.join("g", m) for m in ids]
    responses = [h.resolve(p) for p in [*rejoined, parked]]
    assert all(r is not None and r.generation_id == 2 for r in responses), responses
    assert [len(r.members) for r in responses] == [4, 0, 0, 0]  # only the leader gets the members
    assert state(h, "g") is S.COMPLETING_REBALANCE
    # a follower's sync waits for the leader; a stale generation is refused meanwhile
    follower = h.sync("g", ids[1], 2)
    assert h.resolve(follower) is None
    assert h.resolve(h.sync("g", ids[2], 1)).error_code == ErrorCode.ILLEGAL_GENERATION
    assert h.commit("g", {("t", 0): 5}, member_id=ids[1], generation=2) == {
        ("t", 0): ErrorCode.REBALANCE_IN_PROGRESS
    }
    everyone = [*ids, new_id]
    h.sync("g", leader, 2, {m: m.encode() for m in everyone})
    assert h.resolve(follower).assignment == ids[1].encode()
    assert state(h, "g") is S.STABLE
    assert h.resolve(h.sync("g", new_id, 2)).assignment == new_id.encode()  # after the fact: Stable
    assert [g.generation for g in stored_generations(h, "g") if g] == [1, 2]


def test_follower_with_same_metadata_in_stable_gets_the_current_generation() -> None:
    h = Harness()
    ids, generation, leader = stable_group(h, "g", 2)
    response = h.join("g", ids[1])
    assert isinstance(response, JoinGroupResponse)
    assert (response.error_code, response.generation_id, response.members) == (0, generation, [])
    assert state(h, "g") is S.STABLE
    # the leader rejoining, or a follower with new metadata, starts a rebalance
    assert isinstance(h.join("g", leader), Parked)
    assert state(h, "g") is S.PREPARING_REBALANCE


def test_leader_rejoining_last_after_new_members_gets_every_member_its_share() -> None:
    """The interleaving of the kafka-python flake (issue 10 item 7), answered as Kafka does: a
    one-member Stable group whose leader assigned nothing (its client did not know the topic yet);
    two static members join; the leader rejoins last, because its metadata changed, without a
    heartbeat in between. Its JoinGroup completes the join: one generation with all three, the same
    leader with all members; its SyncGroup answers itself and the parked follower with their shares
    and a late follower gets its stored share."""
    h = Harness()
    first = h.join("g", instance_id="i2", session_ms=60_000, version=7)
    assert isinstance(first, Parked)
    h.advance(0)  # group.initial.rebalance.delay.ms=0
    gen1 = h.resolve(first)
    leader = gen1.member_id
    assert (gen1.generation_id, gen1.leader, len(gen1.members)) == (1, leader, 1)
    empty = b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"  # ConsumerProtocolAssignment v0, no topics
    assert h.resolve(h.sync("g", leader, 1, {leader: empty}, instance_id="i2")).assignment == empty
    assert state(h, "g") is S.STABLE
    joins = [h.join("g", instance_id=i, session_ms=60_000, version=7) for i in ("i1", "i0")]
    assert all(isinstance(p, Parked) for p in joins)
    assert state(h, "g") is S.PREPARING_REBALANCE
    assert all(h.resolve(p) is None for p in joins)  # waiting for the leader to rejoin
    rejoin = h.join("g", leader, instance_id="i2", session_ms=60_000, version=7)
    assert state(h, "g") is S.COMPLETING_REBALANCE
    answers = [h.resolve(p) for p in (rejoin, *joins)]
    assert [(a.error_code, a.generation_id, a.leader) for a in answers] == [(0, 2, leader)] * 3
    assert [len(a.members) for a in answers] == [3, 0, 0]
    follower1, follower0 = answers[1].member_id, answers[2].member_id
    parked = h.sync("g", follower1, 2, instance_id="i1")
    assert h.resolve(parked) is None
    shares = {leader: b"[4,5]", follower1: b"[2,3]", follower0: b"[0,1]"}
    own = h.sync("g", leader, 2, shares, instance_id="i2")
    assert h.resolve(own).assignment == b"[4,5]"
    assert h.resolve(parked).assignment == b"[2,3]"
    assert h.resolve(h.sync("g", follower0, 2, instance_id="i0")).assignment == b"[0,1]"
    assert state(h, "g") is S.STABLE
    assert [g.generation for g in stored_generations(h, "g") if g] == [1, 2]


def test_protocol_selection_votes_for_a_common_protocol() -> None:
    h = Harness()
    _, pa = h.join_new("g", protocols=consumer_protocols("t", names=("roundrobin", "range")))
    _, pb = h.join_new("g", protocols=consumer_protocols("t", names=("range", "roundrobin")))
    _, pc = h.join_new("g", protocols=consumer_protocols("t", names=("range",)))
    h.advance(0)
    assert {h.resolve(p).protocol_name for p in (pa, pb, pc)} == {"range"}
    # a protocol no member of the group supports is refused
    bad = h.join("g", protocols=consumer_protocols("t", names=("cooperative-sticky",)))
    assert isinstance(bad, JoinGroupResponse)
    assert bad.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    wrong_type = h.join("g", protocol_type="connect")
    assert isinstance(wrong_type, JoinGroupResponse)
    assert wrong_type.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_initial_rebalance_delay_waits_for_more_members() -> None:
    h = Harness(GroupConfig(initial_rebalance_delay_ms=3000))
    _, pa = h.join_new("g")
    h.advance(2000)
    _, pb = h.join_new("g")
    h.advance(1500)  # first delay over, but a member arrived meanwhile: one more delay
    assert h.resolve(pa) is None
    h.advance(3000)
    assert h.resolve(pa).generation_id == h.resolve(pb).generation_id == 1


# --- errors ---------------------------------------------------------------------------------------------


def test_request_errors() -> None:
    h = Harness()
    ids, generation, _ = stable_group(h, "g", 1)
    member = ids[0]
    assert h.heartbeat("g", "nobody", generation) == ErrorCode.UNKNOWN_MEMBER_ID
    assert h.heartbeat("unknown-group", member, generation) == ErrorCode.UNKNOWN_MEMBER_ID
    assert h.heartbeat("g", member, generation + 1) == ErrorCode.ILLEGAL_GENERATION
    assert h.heartbeat("g", member, generation - 1) == ErrorCode.ILLEGAL_GENERATION
    assert h.heartbeat("", member, generation) == ErrorCode.INVALID_GROUP_ID
    assert h.resolve(h.sync("g", member, generation - 1)).error_code == ErrorCode.ILLEGAL_GENERATION
    assert h.resolve(h.sync("g", "nobody", generation)).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert h.resolve(h.sync("", member, generation)).error_code == ErrorCode.INVALID_GROUP_ID
    assert h.commit("g", {("t", 0): 1}, member_id=member, generation=generation - 1) == {
        ("t", 0): ErrorCode.ILLEGAL_GENERATION
    }
    assert h.commit("g", {("t", 0): 1}, member_id="nobody", generation=generation) == {
        ("t", 0): ErrorCode.UNKNOWN_MEMBER_ID
    }
    assert h.commit("g", {("t", 0): 1}) == {("t", 0): ErrorCode.UNKNOWN_MEMBER_ID}  # group not empty
    assert h.commit("", {("t", 0): 1}) == {("t", 0): ErrorCode.INVALID_GROUP_ID}
    assert h.commit("no-such-group", {("t", 0): 1}, member_id="x", generation=3) == {
        ("t", 0): ErrorCode.ILLEGAL_GENERATION
    }
    for bad in (
        h.join("", version=5),
        h.join("g", "not-a-member"),
        h.join("fresh", "made-up-id"),
        h.join("g", session_ms=10),
        h.join("g", session_ms=10**9),
    ):
        assert isinstance(bad, JoinGroupResponse)
    assert [
        h.join("", version=5).error_code,  # type: ignore[union-attr]
        h.join("g", "not-a-member").error_code,  # type: ignore[union-attr]
        h.join("fresh", "made-up-id").error_code,  # type: ignore[union-attr]
        h.join("g", session_ms=10).error_code,  # type: ignore[union-attr]
    ] == [
        ErrorCode.INVALID_GROUP_ID,
        ErrorCode.UNKNOWN_MEMBER_ID,
        ErrorCode.UNKNOWN_MEMBER_ID,
        ErrorCode.INVALID_SESSION_TIMEOUT,
    ]
    assert "fresh" not in h.coordinator.groups  # a refused join leaves no group behind
    assert h.leave("g", ("nobody", None)).members[0].error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert h.leave("nope", (member, None)).error_code == ErrorCode.UNKNOWN_MEMBER_ID


# --- failures and departures ----------------------------------------------------------------------------


def test_session_expiry_removes_member_and_rebalances() -> None:
    h = Harness()
    ids, generation, _ = stable_group(h, "g", 2, session_ms=6000)
    survivor, dead = ids
    for _ in range(2):
        h.advance(2000)
        assert h.heartbeat("g", survivor, generation) == ErrorCode.NONE
    h.advance(1999)
    assert state(h, "g") is S.STABLE
    h.advance(1)
    assert state(h, "g") is S.PREPARING_REBALANCE  # `dead` missed its session (6 s)
    assert dead not in h.coordinator.groups["g"].members
    assert h.heartbeat("g", survivor, generation) == ErrorCode.REBALANCE_IN_PROGRESS
    response = h.resolve(h.join("g", survivor, session_ms=6000))
    assert (response.generation_id, response.leader, [m.member_id for m in response.members]) == (
        generation + 1,
        survivor,
        [survivor],
    )


def test_rebalance_timeout_drops_members_that_do_not_rejoin() -> None:
    h = Harness()
    ids, generation, _ = stable_group(h, "g", 3, session_ms=30_000, rebalance_ms=10_000)
    _, parked = h.join_new("g", session_ms=30_000, rebalance_ms=10_000)
    rejoined = h.join("g", ids[0], session_ms=30_000, rebalance_ms=10_000)
    h.advance(9_999)
    assert h.resolve(parked) is None
    h.advance(1)
    response = h.resolve(rejoined)
    assert response.generation_id == generation + 1
    assert len(response.members) == 2  # ids[1] and ids[2] never rejoined


def test_sync_deadline_removes_members_that_never_sync() -> None:
    h = Harness()
    ids, generation, leader = stable_group(h, "g", 2, rebalance_ms=5000)
    h.join("g", leader, rebalance_ms=5000)
    h.join("g", ids[1], rebalance_ms=5000)
    assert state(h, "g") is S.COMPLETING_REBALANCE
    h.sync("g", ids[1], generation + 1)  # the leader never syncs
    h.advance(5000)
    assert state(h, "g") is S.PREPARING_REBALANCE
    assert list(h.coordinator.groups["g"].members) == [ids[1]]


def test_leave_group_rebalances_and_the_last_one_out_stores_an_empty_generation() -> None:
    h = Harness()
    ids, generation, leader = stable_group(h, "g", 2)
    response = h.leave("g", (ids[1], None))
    assert [(m.member_id, m.error_code) for m in response.members] == [(ids[1], 0)]
    assert state(h, "g") is S.PREPARING_REBALANCE
    joined = h.resolve(h.join("g", leader))
    assert joined.generation_id == generation + 1
    h.sync("g", leader, joined.generation_id, {leader: b"all"})
    h.leave("g", (leader, None))
    assert state(h, "g") is S.EMPTY
    *_, last = stored_generations(h, "g")
    assert last is not None
    assert (last.generation, last.members, last.leader, last.protocol) == (generation + 2, (), None, None)
    assert h.heartbeat("g", leader, generation + 2) == ErrorCode.UNKNOWN_MEMBER_ID


def test_member_leaving_during_join_phase_completes_it() -> None:
    h = Harness()
    ids, generation, leader = stable_group(h, "g", 2)
    parked = h.join("g", leader)
    h.leave("g", (ids[1], None))
    assert h.resolve(parked).generation_id == generation + 1


# --- static membership (KIP-345) ------------------------------------------------------------------------


def test_static_member_restart_gets_its_assignment_back_without_rebalance() -> None:
    h = Harness()
    a, pa = h.join("g", instance_id="a", session_ms=10_000), None
    b = h.join("g", instance_id="b", session_ms=10_000)
    assert isinstance(a, Parked)
    assert isinstance(b, Parked)
    h.advance(0)
    ra, rb = h.resolve(a), h.resolve(b)
    assert ra.member_id.startswith("a-")  # static member ids carry the instance id
    generation = ra.generation_id
    assignments = {ra.member_id: b"A", rb.member_id: b"B"}
    h.sync("g", rb.member_id, generation, instance_id="b")
    h.sync("g", ra.member_id, generation, assignments, instance_id="a")
    assert state(h, "g") is S.STABLE
    stored_before = len(stored_generations(h, "g"))
    # instance "a" (the leader) restarts: no member id, same instance id and protocols
    again = h.join("g", instance_id="a", session_ms=10_000)
    assert isinstance(again, JoinGroupResponse)
    assert again.error_code == 0
    assert again.generation_id == generation
    assert again.member_id not in (ra.member_id, "")
    assert again.leader == ra.member_id  # the old id: the restarted leader acts as a follower
    assert again.members == []
    assert state(h, "g") is S.STABLE
    assert h.heartbeat("g", rb.member_id, generation, "b") == ErrorCode.NONE  # b sees no rebalance
    sync = h.resolve(h.sync("g", again.member_id, generation, instance_id="a"))
    assert sync.assignment == b"A"
    # the new id is stored (so it survives a restart) and is the leader now
    stored = stored_generations(h, "g")
    assert len(stored) == stored_before + 1
    assert stored[-1] is not None
    assert stored[-1].leader == again.member_id
    assert [m.member_id for m in stored[-1].members] == [again.member_id, rb.member_id]
    # the old instance is fenced
    assert h.heartbeat("g", ra.member_id, generation, "a") == ErrorCode.FENCED_INSTANCE_ID
    assert pa is None


def test_static_member_is_not_removed_by_the_join_phase() -> None:
    h = Harness()
    a = h.join("g", instance_id="a", session_ms=30_000, rebalance_ms=20_000)
    b = h.join("g", instance_id="b", session_ms=30_000, rebalance_ms=20_000)
    h.advance(0)
    ra, rb = h.resolve(a), h.resolve(b)
    h.sync("g", ra.member_id, 1, {ra.member_id: b"A", rb.member_id: b"B"}, instance_id="a")
    # the leader rejoins; b does not
    again = h.join("g", ra.member_id, instance_id="a", session_ms=30_000, rebalance_ms=20_000)
    h.advance(20_000)  # rebalance timeout
    assert h.resolve(again).generation_id == 2
    assert rb.member_id in h.coordinator.groups["g"].members  # static members stay
    assert len(h.resolve(again).members) == 2


# --- offsets --------------------------------------------------------------------------------------------


def test_offsets_commit_fetch_and_simple_groups() -> None:
    h = Harness()
    assert h.commit("simple", {("t", 0): 10, ("t", 1): 20}, metadata="m") == {
        ("t", 0): ErrorCode.NONE,
        ("t", 1): ErrorCode.NONE,
    }
    assert state(h, "simple") is S.EMPTY
    assert h.coordinator.groups["simple"].protocol_type is None
    assert h.committed("simple", "t", 0) == 10
    assert h.committed("simple", "t", 7) == -1
    assert h.committed("nobody", "t", 0) == -1
    everything = h.coordinator.fetch_offsets("simple", None)
    assert [
        (t.name, [(p.partition_index, p.committed_offset, p.metadata) for p in t.partitions])
        for t in everything.topics
    ] == [("t", [(0, 10, "m"), (1, 20, "m")])]
    assert h.commit("simple", {("t", 0): 11}, metadata="x" * 5000) == {
        ("t", 0): ErrorCode.OFFSET_METADATA_TOO_LARGE
    }
    ids, generation, _ = stable_group(h, "g", 1)
    assert h.commit("g", {("t", 0): 3}, member_id=ids[0], generation=generation) == {("t", 0): 0}
    assert h.committed("g", "t", 0) == 3
    assert h.coordinator.fetch_offsets("", None).error_code == ErrorCode.INVALID_GROUP_ID


def test_commit_in_preparing_rebalance_from_previous_generation_is_accepted() -> None:
    h = Harness()
    ids, generation, leader = stable_group(h, "g", 2)
    h.join("g", leader)  # rebalance starts
    assert h.commit("g", {("t", 0): 9}, member_id=ids[1], generation=generation) == {("t", 0): 0}


def test_pending_transactional_offsets_follow_their_marker() -> None:
    h = Harness()
    coordinator = h.coordinator
    value = OffsetCommitValue(42, -1, "", 1, -1)
    coordinator.replay(0, 1000, CoordinatorRecord(OffsetCommitKey("g", "t", 0), value))
    assert h.committed("g", "t", 0) == -1
    unstable = coordinator.fetch_offsets("g", [("t", [0])], require_stable=True)
    assert unstable.topics[0].partitions[0].error_code == ErrorCode.UNSTABLE_OFFSET_COMMIT
    coordinator.replay_end_txn_marker(1000, committed=True)
    assert h.committed("g", "t", 0) == 42
    # an aborted transaction leaves nothing; a plain commit after a pending one wins on COMMIT
    coordinator.replay(1, 2000, CoordinatorRecord(OffsetCommitKey("g", "t", 0), OffsetCommitValue(50)))
    coordinator.replay_end_txn_marker(2000, committed=False)
    assert h.committed("g", "t", 0) == 42
    coordinator.replay(2, 3000, CoordinatorRecord(OffsetCommitKey("g", "t", 0), OffsetCommitValue(60)))
    coordinator.replay(3, -1, CoordinatorRecord(OffsetCommitKey("g", "t", 0), OffsetCommitValue(70)))
    coordinator.replay_end_txn_marker(3000, committed=True)
    assert h.committed("g", "t", 0) == 70


def test_offset_retention() -> None:
    day = 24 * 3600 * 1000
    h = Harness(GroupConfig(initial_rebalance_delay_ms=0, offsets_retention_ms=day))
    h.commit("simple", {("t", 0): 1})
    ids, generation, _ = stable_group(h, "g", 1, protocols=consumer_protocols("t"))
    h.commit("g", {("t", 0): 5, ("other", 0): 6}, member_id=ids[0], generation=generation)
    h.clock.advance(day - 1)
    h.heartbeat("g", ids[0], generation)
    h.expire()
    assert h.committed("simple", "t", 0) == 1
    h.clock.advance(1)
    h.heartbeat("g", ids[0], generation)
    h.expire()
    assert "simple" not in h.coordinator.groups  # all offsets expired: the empty group goes too
    assert h.committed("g", "t", 0) == 5  # the group is subscribed to t
    assert h.committed("g", "other", 0) == -1  # but not to "other"
    h.leave("g", (ids[0], None))
    h.clock.advance(day - 1)
    h.expire()
    assert h.committed("g", "t", 0) == 5  # retention counts from when the group became empty
    h.clock.advance(1)
    h.expire()
    assert "g" not in h.coordinator.groups


def test_delete_groups_and_offsets() -> None:
    h = Harness()
    ids, generation, _ = stable_group(h, "g", 1, protocols=consumer_protocols("t"))
    h.commit("g", {("t", 0): 5, ("u", 0): 6}, member_id=ids[0], generation=generation)
    assert h.apply(h.coordinator.delete_group("g")).error_code == ErrorCode.NON_EMPTY_GROUP
    assert h.apply(h.coordinator.delete_group("none")).error_code == ErrorCode.GROUP_ID_NOT_FOUND
    request = OffsetDeleteRequest(
        "g",
        [
            OffsetDeleteRequestTopic("t", [OffsetDeleteRequestPartition(0)]),
            OffsetDeleteRequestTopic("u", [OffsetDeleteRequestPartition(0)]),
        ],
    )
    response = h.apply(h.coordinator.delete_offsets(request))
    assert [(t.name, t.partitions[0].error_code) for t in response.topics] == [
        ("t", ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC),
        ("u", ErrorCode.NONE),
    ]
    assert h.committed("g", "u", 0) == -1
    h.leave("g", (ids[0], None))
    assert h.apply(h.coordinator.delete_group("g")).error_code == ErrorCode.NONE
    assert "g" not in h.coordinator.groups
    assert h.committed("g", "t", 0) == -1
    fresh = h.rebuilt()
    assert "g" not in fresh.groups
    assert fresh.offsets.snapshot() == {}


def test_list_and_describe() -> None:
    h = Harness()
    ids, generation, _ = stable_group(h, "g", 2)
    h.commit("simple", {("t", 0): 1})
    listed = {(g.group_id, g.protocol_type, g.group_state) for g in h.coordinator.list_groups()}
    assert listed == {("g", "consumer", "Stable"), ("simple", "", "Empty")}
    assert [g.group_id for g in h.coordinator.list_groups(["empty"])] == ["simple"]
    assert h.coordinator.list_groups(types=["consumer"]) == []
    [described] = h.coordinator.describe_groups(["g"])
    assert (described.group_state, described.protocol_data, len(described.members)) == ("Stable", "range", 2)
    assert {m.member_assignment for m in described.members} == {f"{m}@{generation}".encode() for m in ids}
    [unknown] = h.coordinator.describe_groups(["zzz"])
    assert (unknown.error_code, unknown.group_state) == (0, "Dead")


# --- replay ---------------------------------------------------------------------------------------------


def test_replaying_the_log_gives_the_stored_state() -> None:
    h = Harness()
    ids, generation, leader = stable_group(h, "g", 3)
    h.commit("g", {("t", 0): 5, ("t", 1): 6}, member_id=leader, generation=generation)
    h.commit("simple", {("x", 0): 1})
    ids2, _, _ = stable_group(h, "h", 1)
    h.leave("h", (ids2[0], None))
    fresh = h.rebuilt()
    assert fresh.offsets.snapshot() == h.coordinator.offsets.snapshot()
    for name in ("g", "h", "simple"):
        assert fresh.groups[name].stored_view() == h.coordinator.groups[name].stored_view(), name
    # members come back with a fresh session and can keep heartbeating with their generation
    assert fresh.groups["g"].state is S.STABLE
    assert set(fresh.groups["g"].members) == set(ids)


def test_operations_refuse_to_run_before_records_are_replayed() -> None:
    h = Harness()
    result = h.coordinator.commit_offsets(
        ClientInfo(),
        OffsetCommitRequest("g", -1),
    )
    assert result.records == []
    h.commit("g", {("t", 0): 1})
    pending = h.coordinator.delete_group("g")
    assert pending.records
    with pytest.raises(RuntimeError, match="not replayed"):
        h.coordinator.commit_offsets(
            ClientInfo(),
            OffsetCommitRequest("g", -1),
        )
    h.coordinator.on_append_failed(pending)  # nothing was stored
    assert h.committed("g", "t", 0) == 1


def test_append_failure_while_completing_rebalances() -> None:
    h = Harness()
    member, parked = h.join_new("g")
    h.advance(0)
    generation = h.resolve(parked).generation_id
    follower_id, follower = h.join_new("g")
    h.heartbeat("g", member, generation)
    h.join("g", member)
    responses = [h.resolve(p) for p in (follower,)]
    assert responses[0] is not None
    result = h.coordinator.sync_group(
        ClientInfo(),
        SyncGroupRequest("g", generation + 1, member),
    )
    assert result.records
    fallback = h.coordinator.on_append_failed(result)
    h.apply(fallback)
    assert state(h, "g") is S.PREPARING_REBALANCE
    assert follower_id in h.coordinator.groups["g"].members


@pytest.mark.parametrize(
    ("version", "code"), [(8, ErrorCode.ILLEGAL_GENERATION), (9, ErrorCode.GROUP_ID_NOT_FOUND)]
)
def test_commit_with_a_generation_to_a_missing_group(version: int, code: ErrorCode) -> None:
    """Kafka's OffsetMetadataManager: a missing group with generation >= 0 is GROUP_ID_NOT_FOUND from
    OffsetCommit v9 on, ILLEGAL_GENERATION before; generation -1 creates a simple group either way."""
    h = Harness()
    request = OffsetCommitRequest(
        "nobody",
        3,
        "m",
        None,
        -1,
        [OffsetCommitRequestTopic("t", partitions=[OffsetCommitRequestPartition(0, 5)])],
    )
    result = h.coordinator.commit_offsets(ClientInfo(api_version=version), request)
    assert result.records == []
    assert isinstance(result.response, OffsetCommitResponse)
    assert [p.error_code for t in result.response.topics for p in t.partitions] == [code]
    assert h.commit("nobody", {("t", 0): 5}, generation=-1) == {("t", 0): ErrorCode.NONE}


@pytest.mark.parametrize("version", [8, 9])
def test_static_leader_restart_skips_the_assignment_from_join_group_v9(version: int) -> None:
    """KIP-814: from JoinGroup v9 a restarted static leader is told it leads, gets the members (with its
    new id) and SkipAssignment; before, the old leader id and no members. No rebalance either way."""
    h = Harness()
    a = h.join("g", instance_id="a", version=version)
    b = h.join("g", instance_id="b", version=version)
    assert isinstance(a, Parked)
    assert isinstance(b, Parked)
    h.advance(0)
    ra, rb = h.resolve(a), h.resolve(b)
    assert ra.leader == ra.member_id
    generation = ra.generation_id
    h.sync("g", rb.member_id, generation, instance_id="b")
    h.sync("g", ra.member_id, generation, {ra.member_id: b"A", rb.member_id: b"B"}, instance_id="a")
    again = h.join("g", instance_id="a", version=version)
    assert isinstance(again, JoinGroupResponse)
    assert (again.error_code, again.generation_id) == (ErrorCode.NONE, generation)
    if version >= 9:
        assert (again.leader, again.skip_assignment) == (again.member_id, True)
        assert sorted(m.member_id for m in again.members) == sorted([again.member_id, rb.member_id])
    else:
        assert (again.leader, again.skip_assignment, again.members) == (ra.member_id, False, [])
    assert state(h, "g") is S.STABLE
    sync = h.resolve(h.sync("g", again.member_id, generation, instance_id="a"))
    assert sync.assignment == b"A"
    # A follower's restart is answered the same way in both versions.
    follower = h.join("g", instance_id="b", version=version)
    assert isinstance(follower, JoinGroupResponse)
    assert (follower.leader, follower.skip_assignment, follower.members) == (again.member_id, False, [])
