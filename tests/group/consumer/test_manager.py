"""ConsumerGroupHeartbeat and ConsumerGroupDescribe on the group coordinator (KIP-848), driven as the
broker drives it: every result's records are appended and replayed at once (tests/group/helpers.py)."""

from __future__ import annotations

import dataclasses

from exactly.errors import ErrorCode
from exactly.group import ClientInfo, GroupConfig
from exactly.group.consumer.reconciliation import MemberState
from exactly.group.consumer.records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMetadataKey,
    ConsumerGroupTargetAssignmentMemberKey,
)
from exactly.group.records import GroupMetadataKey
from exactly.protocol.messages.join_group import JoinGroupResponse
from exactly.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetCommitResponse,
)
from exactly.protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
    TxnOffsetCommitResponse,
)
from tests.group.consumer.helpers import ConsumerHarness, ok


def harness(partitions: int = 4, **config: object) -> ConsumerHarness:
    h = ConsumerHarness(config=dataclasses.replace(GroupConfig(), **config)) if config else ConsumerHarness()
    h.create_topic("t", partitions)
    return h


def keys_since(h: ConsumerHarness, start: int) -> list[object]:
    return [record.key for _, _, record in h.log[start:]]


def test_join_gets_an_epoch_and_the_full_assignment_then_nothing_new() -> None:
    h = harness()
    joined = ok(h.hb("g", "a", 0, topics=["t"]))
    assert joined.member_epoch == 1
    assert joined.heartbeat_interval_ms == 5000
    assert h.assignment(joined) == {"t": {0, 1, 2, 3}}
    again = ok(h.hb("g", "a", 1, owned={"t": {0, 1, 2, 3}}))
    assert again.member_epoch == 1
    assert again.assignment is None


def test_a_v0_member_without_id_gets_one() -> None:
    h = harness()
    joined = ok(h.hb("g", "", 0, topics=["t"], version=0))
    assert joined.member_id
    assert joined.member_id.startswith("generated-")


def test_a_partition_is_revoked_before_it_is_assigned_elsewhere() -> None:
    h = harness()
    a = ok(h.hb("g", "a", 0, topics=["t"]))
    b = ok(h.hb("g", "b", 0, topics=["t"]))
    assert b.member_epoch == 2
    assert h.assignment(b) == {}  # a still holds everything
    group = h.coordinator.consumer_groups["g"]
    assert group.members["b"].state is MemberState.UNRELEASED_PARTITIONS
    # a is told to give two partitions up, at its old epoch
    a2 = ok(h.hb("g", "a", a.member_epoch, owned={"t": {0, 1, 2, 3}}))
    assert a2.member_epoch == 1
    kept = h.assignment(a2)
    assert kept is not None
    assert len(kept["t"]) == 2
    assert group.members["a"].state is MemberState.UNREVOKED_PARTITIONS
    # b still gets nothing: a has not confirmed the revocation
    assert h.assignment(ok(h.hb("g", "b", 2, owned={}))) is None
    # a confirms; it moves to epoch 2, and b gets the released partitions
    a3 = ok(h.hb("g", "a", 1, owned=kept))
    assert a3.member_epoch == 2
    b3 = ok(h.hb("g", "b", 2, owned={}))
    assert h.assignment(b3) == {"t": {0, 1, 2, 3} - kept["t"]}
    assert h.coordinator.consumer_group_describe(["g"])[0].group_state == "Stable"


def test_epochs_a_larger_one_or_an_old_one_is_fenced_the_previous_one_with_a_subset_is_not() -> None:
    h = harness()
    ok(h.hb("g", "a", 0, topics=["t"]))
    ok(h.hb("g", "b", 0, topics=["t"]))
    a = ok(h.hb("g", "a", 1, owned={"t": {0, 1, 2, 3}}))
    ok(h.hb("g", "a", 1, owned=h.assignment(a)))  # a moves to epoch 2 (previous 1)
    assert h.hb("g", "a", 3, owned={}).error_code == ErrorCode.FENCED_MEMBER_EPOCH
    # the response that moved it to 2 was lost: epoch 1 with owned partitions within its assignment
    assert ok(h.hb("g", "a", 1, owned=h.assignment(a))).member_epoch == 2
    # epoch 1 without owned partitions, or owning more than assigned: fenced
    assert h.hb("g", "a", 1).error_code == ErrorCode.FENCED_MEMBER_EPOCH
    assert h.hb("g", "a", 1, owned={"t": {0, 1, 2, 3}}).error_code == ErrorCode.FENCED_MEMBER_EPOCH
    assert h.hb("g", "nobody", 1, owned={}).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert h.hb("nogroup", "a", 1, owned={}).error_code == ErrorCode.GROUP_ID_NOT_FOUND


def test_invalid_requests() -> None:
    h = harness()
    assert h.hb("g", "", 0, topics=["t"]).error_code == ErrorCode.INVALID_REQUEST  # v1 needs an id
    assert h.hb("g", "a", 0, topics=["t"], owned={"t": {0}}).error_code == ErrorCode.INVALID_REQUEST
    assert h.hb("g", "a", -2).error_code == ErrorCode.INVALID_REQUEST  # a static leave without instance
    assert h.hb("g", "a", -3).error_code == ErrorCode.INVALID_REQUEST
    assert h.hb("g", "a", 0, topics=["t"], assignor="sticky").error_code == ErrorCode.UNSUPPORTED_ASSIGNOR
    bad = h.hb("g", "a", 0, regex="(?<=x)t")  # look-behind: not RE2
    assert bad.error_code == ErrorCode.INVALID_REGULAR_EXPRESSION
    assert "g" not in h.coordinator.consumer_groups


def test_group_max_size() -> None:
    h = harness(consumer_max_size=2)
    ok(h.hb("g", "a", 0, topics=["t"]))
    ok(h.hb("g", "b", 0, topics=["t"]))
    assert h.hb("g", "c", 0, topics=["t"]).error_code == ErrorCode.GROUP_MAX_SIZE_REACHED


def test_leaving_writes_tombstones_then_bumps_the_group_epoch() -> None:
    h = harness()
    ok(h.hb("g", "a", 0, topics=["t"]))
    ok(h.hb("g", "b", 0, topics=["t"]))
    start = len(h.log)
    left = ok(h.hb("g", "b", -1))
    assert left.member_epoch == -1
    assert keys_since(h, start) == [
        ConsumerGroupCurrentMemberAssignmentKey("g", "b"),
        ConsumerGroupTargetAssignmentMemberKey("g", "b"),
        ConsumerGroupMemberMetadataKey("g", "b"),
        ConsumerGroupMetadataKey("g"),
    ]
    assert [r.value is None for _, _, r in h.log[start:]] == [True, True, True, False]
    assert h.coordinator.consumer_groups["g"].group_epoch == 3
    # a gets everything back at the next epoch
    a = ok(h.hb("g", "a", 1, owned={"t": {0, 1, 2, 3}}))
    assert a.member_epoch == 3


def test_session_timeout_fences_like_a_leave() -> None:
    h = harness(consumer_session_timeout_ms=3000)
    ok(h.hb("g", "a", 0, topics=["t"]))
    ok(h.hb("g", "b", 0, topics=["t"]))
    h.advance(2000)
    ok(h.hb("g", "a", 1, owned={"t": {0, 1, 2, 3}}))
    start = len(h.log)
    h.advance(1500)  # b's session (3 s from its join) ended; a's has not
    assert set(h.coordinator.consumer_groups["g"].members) == {"a"}
    assert keys_since(h, start)[:3] == [
        ConsumerGroupCurrentMemberAssignmentKey("g", "b"),
        ConsumerGroupTargetAssignmentMemberKey("g", "b"),
        ConsumerGroupMemberMetadataKey("g", "b"),
    ]


def test_rebalance_timeout_fences_a_member_that_does_not_revoke() -> None:
    h = harness()
    ok(h.hb("g", "a", 0, topics=["t"], rebalance_ms=1000))
    ok(h.hb("g", "b", 0, topics=["t"]))
    ok(h.hb("g", "a", 1, owned={"t": {0, 1, 2, 3}}))  # told to revoke
    h.advance(900)
    ok(h.hb("g", "b", 2, owned={}))
    h.advance(200)
    assert set(h.coordinator.consumer_groups["g"].members) == {"b"}
    assert h.hb("g", "a", 1, owned={"t": {0, 1, 2, 3}}).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    b = ok(h.hb("g", "b", 2, owned={}))
    assert h.assignment(b) == {"t": {0, 1, 2, 3}}


def test_static_member_leaves_temporarily_and_its_successor_takes_over() -> None:
    h = harness()
    a = ok(h.hb("g", "a", 0, topics=["t"], instance_id="i1"))
    ok(h.hb("g", "b", 0, topics=["t"]))
    a = ok(h.hb("g", "a", 1, owned={"t": {0, 1, 2, 3}}))
    kept = h.assignment(a)
    a = ok(h.hb("g", "a", 1, owned=kept))
    assert a.member_epoch == 2
    # a second instance with the same id while a is there
    assert h.hb("g", "a2", 0, topics=["t"], instance_id="i1").error_code == ErrorCode.UNRELEASED_INSTANCE_ID
    left = ok(h.hb("g", "a", -2, instance_id="i1"))
    assert left.member_epoch == -2
    assert h.coordinator.consumer_groups["g"].members["a"].member_epoch == -2
    successor = ok(h.hb("g", "a2", 0, topics=["t"], instance_id="i1"))
    assert h.assignment(successor) == kept
    assert successor.member_epoch == 2
    assert set(h.coordinator.consumer_groups["g"].members) == {"a2", "b"}


def test_regex_subscription_and_a_new_matching_topic_bumps_the_epoch() -> None:
    h = harness()
    h.create_topic("orders-eu", 2)
    joined = ok(h.hb("g", "a", 0, regex="orders-.*"))
    assert h.assignment(joined) == {"orders-eu": {0, 1}}
    h.create_topic("orders-us", 1)
    h.create_topic("__orders-internal", 1)
    after = ok(h.hb("g", "a", joined.member_epoch, owned={"orders-eu": {0, 1}}))
    assert after.member_epoch == joined.member_epoch + 1
    assert h.assignment(after) == {"orders-eu": {0, 1}, "orders-us": {0}}


def test_added_partitions_bump_the_epoch() -> None:
    h = harness(partitions=2)
    joined = ok(h.hb("g", "a", 0, topics=["t"]))
    h.create_topic("t", 3)
    after = ok(h.hb("g", "a", joined.member_epoch, owned={"t": {0, 1}}))
    assert h.assignment(after) == {"t": {0, 1, 2}}


def test_the_most_asked_assignor_is_used() -> None:
    h = harness()
    ok(h.hb("g", "a", 0, topics=["t"], assignor="range"))
    described = h.coordinator.consumer_group_describe(["g"])[0]
    assert described.assignor_name == "range"


def test_describe_answers_group_id_not_found_for_classic_or_unknown_groups() -> None:
    h = harness()
    h.commit("simple", {("t", 0): 5})
    [classic, unknown, empty] = h.coordinator.consumer_group_describe(["simple", "nope", ""])
    assert classic.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert unknown.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert empty.error_code == ErrorCode.INVALID_GROUP_ID


def test_describe_shows_epochs_and_assignments() -> None:
    h = harness()
    ok(h.hb("g", "a", 0, topics=["t"]))
    [described] = h.coordinator.consumer_group_describe(["g"])
    assert (described.group_state, described.group_epoch, described.assignment_epoch) == ("Stable", 1, 1)
    [member] = described.members
    assert (member.member_id, member.member_epoch, member.member_type) == ("a", 1, 1)
    assert [(tp.topic_name, tp.partitions) for tp in member.assignment.topic_partitions] == [
        ("t", [0, 1, 2, 3])
    ]
    assert member.target_assignment == member.assignment


def test_an_empty_classic_group_is_replaced_and_keeps_its_offsets() -> None:
    h = harness()
    h.commit("g", {("t", 0): 42})
    assert "g" in h.coordinator.groups
    start = len(h.log)
    ok(h.hb("g", "a", 0, topics=["t"]))
    assert keys_since(h, start)[0] == GroupMetadataKey("g")
    assert "g" not in h.coordinator.groups
    assert h.committed("g", "t", 0) == 42
    listed = h.coordinator.list_groups()
    assert [(g.group_id, g.group_type, g.group_state) for g in listed] == [("g", "consumer", "Stable")]
    rebuilt = h.rebuilt()
    assert "g" in rebuilt.consumer_groups
    assert "g" not in rebuilt.groups
    assert rebuilt.fetch_offsets("g", [("t", [0])]).topics[0].partitions[0].committed_offset == 42


def test_a_classic_group_with_members_cannot_be_joined_by_the_consumer_protocol() -> None:
    h = harness()
    _member_id, _ = h.join_new("g")
    assert h.hb("g", "a", 0, topics=["t"]).error_code == ErrorCode.GROUP_ID_NOT_FOUND


def test_classic_join_converts_an_empty_consumer_group_and_refuses_a_live_one() -> None:
    h = harness()
    ok(h.hb("g", "a", 0, topics=["t"]))
    refused = h.join("g")
    assert isinstance(refused, JoinGroupResponse)
    assert refused.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    ok(h.hb("g", "a", -1))
    first = h.join("g")
    assert isinstance(first, JoinGroupResponse)
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
    assert "g" not in h.coordinator.consumer_groups


def commit(h: ConsumerHarness, member: str, epoch: int, version: int = 9) -> ErrorCode:
    request = OffsetCommitRequest(
        "g",
        epoch,
        member,
        None,
        -1,
        [OffsetCommitRequestTopic("t", partitions=[OffsetCommitRequestPartition(0, 7)])],
    )
    response = h.apply(h.coordinator.commit_offsets(ClientInfo("c", "/h", version), request))
    assert isinstance(response, OffsetCommitResponse)
    return ErrorCode(response.topics[0].partitions[0].error_code)


def test_offset_commits_check_the_member_epoch() -> None:
    h = harness()
    ok(h.hb("g", "a", 0, topics=["t"]))
    assert commit(h, "a", 1) == ErrorCode.NONE
    assert commit(h, "a", 2) == ErrorCode.STALE_MEMBER_EPOCH
    assert commit(h, "x", 1) == ErrorCode.UNKNOWN_MEMBER_ID
    assert commit(h, "a", 1, version=8) == ErrorCode.UNSUPPORTED_VERSION
    assert commit(h, "", -1) == ErrorCode.UNKNOWN_MEMBER_ID  # an admin commit while members are there
    ok(h.hb("g", "a", -1))
    assert commit(h, "", -1, version=8) == ErrorCode.NONE  # the group is empty


def test_offset_fetch_v9_checks_the_member() -> None:
    h = harness()
    ok(h.hb("g", "a", 0, topics=["t"]))
    assert h.coordinator.fetch_offsets("g", [("t", [0])], False, "a", 1).error_code == ErrorCode.NONE
    assert (
        h.coordinator.fetch_offsets("g", [("t", [0])], False, "a", 2).error_code
        == ErrorCode.STALE_MEMBER_EPOCH
    )
    assert (
        h.coordinator.fetch_offsets("g", [("t", [0])], False, "b", 1).error_code
        == ErrorCode.UNKNOWN_MEMBER_ID
    )
    assert h.coordinator.fetch_offsets("g", [("t", [0])], False, None, -1).error_code == ErrorCode.NONE


def test_replaying_the_log_rebuilds_the_same_group() -> None:
    h = harness()
    ok(h.hb("g", "a", 0, topics=["t"], instance_id="i"))
    ok(h.hb("g", "b", 0, topics=["t"]))
    a = ok(h.hb("g", "a", 1, owned={"t": {0, 1, 2, 3}}))
    rebuilt = h.rebuilt()
    original = h.coordinator.consumer_groups["g"]
    copy = rebuilt.consumer_groups["g"]
    assert (copy.group_epoch, copy.assignment_epoch, copy.metadata_hash) == (
        original.group_epoch,
        original.assignment_epoch,
        original.metadata_hash,
    )
    assert copy.members == original.members
    assert copy.target == original.target
    assert copy.holders == original.holders
    assert a.member_epoch == 1


def test_deleting_an_empty_consumer_group_removes_it_from_a_replay_too() -> None:
    h = harness()
    ok(h.hb("g", "a", 0, topics=["t"]))
    assert h.apply(h.coordinator.delete_group("g")).error_code == ErrorCode.NON_EMPTY_GROUP
    ok(h.hb("g", "a", -1))
    assert h.apply(h.coordinator.delete_group("g")).error_code == ErrorCode.NONE
    assert "g" not in h.coordinator.consumer_groups
    assert "g" not in h.rebuilt().consumer_groups


def txn_commit(h: ConsumerHarness, member: str, epoch: int) -> ErrorCode:
    request = TxnOffsetCommitRequest(
        "tx",
        "g",
        7,
        0,
        epoch,
        member,
        None,
        [TxnOffsetCommitRequestTopic("t", [TxnOffsetCommitRequestPartition(0, 5)])],
    )
    response = h.apply(h.coordinator.commit_transactional_offsets(request))
    assert isinstance(response, TxnOffsetCommitResponse)
    return ErrorCode(response.topics[0].partitions[0].error_code)


def test_transactional_commits_carry_the_member_epoch_as_generation() -> None:
    h = harness()
    ok(h.hb("g", "a", 0, topics=["t"]))
    assert txn_commit(h, "a", 1) == ErrorCode.NONE
    assert txn_commit(h, "a", 2) == ErrorCode.ILLEGAL_GENERATION  # TxnOffsetCommit has no STALE_MEMBER_EPOCH
    assert txn_commit(h, "b", 1) == ErrorCode.UNKNOWN_MEMBER_ID
    assert txn_commit(h, "", -1) == ErrorCode.NONE  # no member named: not checked (KIP-447 v0-2 style)


def test_a_commit_at_the_previous_epoch_is_accepted() -> None:
    """KIP-1251: the member committed just before the response that moved it to the next epoch."""
    h = harness()
    ok(h.hb("g", "a", 0, topics=["t"]))
    ok(h.hb("g", "b", 0, topics=["t"]))
    a = ok(h.hb("g", "a", 1, owned={"t": {0, 1, 2, 3}}))
    assert ok(h.hb("g", "a", 1, owned=h.assignment(a))).member_epoch == 2
    assert commit(h, "a", 1) == ErrorCode.NONE
    assert commit(h, "a", 2) == ErrorCode.NONE
    assert commit(h, "a", 0) == ErrorCode.STALE_MEMBER_EPOCH
