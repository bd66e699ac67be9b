"""`ClassicGroup` as a `group.Group`: what the offset manager and the coordinator ask of any group type."""

from __future__ import annotations

from exactly.errors import ErrorCode
from exactly.group.classic.group import ClassicGroup
from exactly.group.classic.member import Member
from exactly.group.classic.state import ClassicGroupState, GroupEvent
from exactly.group.group import Group, GroupType
from exactly.group.offsets import OffsetAndMetadata
from exactly.group.records import CoordinatorRecord, GroupMetadataKey
from tests.group.helpers import subscription

S = ClassicGroupState
E = GroupEvent
COMMITTED_AT = 1_000
OFFSET = OffsetAndMetadata(5, -1, "", COMMITTED_AT, -1, 0)


def member(member_id: str, *topics: str, protocol_type: str = "consumer") -> Member:
    return Member(
        member_id, None, "c", "/h", 30_000, 10_000, protocol_type, [("range", subscription(*topics))]
    )


def group_in(
    state: ClassicGroupState, *, protocol_type: str = "consumer", topics: tuple[str, ...] = ("t",)
) -> ClassicGroup:
    group = ClassicGroup("g", state_timestamp=500)
    if state is S.EMPTY:
        return group
    group.add(member("m1", *topics, protocol_type=protocol_type))
    group.transition(E.MEMBER_JOINED, 600)
    if state is S.PREPARING_REBALANCE:
        return group
    group.generation = 1
    group.protocol_name = group.select_protocol()
    group.transition(E.JOIN_COMPLETED, 700)
    group.members["m1"].assignment = b"a"
    if state is S.STABLE:
        group.transition(E.GENERATION_STORED, 800)
    return group


def test_a_classic_group_is_a_group() -> None:
    group: Group = ClassicGroup("g")
    assert group.group_type is GroupType.CLASSIC
    assert group.is_empty
    assert group.tombstones() == [CoordinatorRecord(GroupMetadataKey("g"), None)]
    listed = group_in(S.STABLE).as_listed_group()
    assert (listed.group_id, listed.protocol_type, listed.group_state, listed.group_type) == (
        "g",
        "consumer",
        "Stable",
        "classic",
    )


def test_describe_shows_metadata_and_assignments_only_when_stable() -> None:
    stable = group_in(S.STABLE).describe()
    assert (stable.group_state, stable.protocol_data) == ("Stable", "range")
    assert [(m.member_id, m.member_assignment) for m in stable.members] == [("m1", b"a")]
    assert stable.members[0].member_metadata == subscription("t")
    rebalancing = group_in(S.COMPLETING_REBALANCE).describe()
    assert (rebalancing.group_state, rebalancing.protocol_data) == ("CompletingRebalance", "")
    assert [(m.member_metadata, m.member_assignment) for m in rebalancing.members] == [(b"", b"")]


def test_deleting_the_group_or_its_offsets() -> None:
    assert ClassicGroup("g").validate_delete_group() == ErrorCode.NONE
    assert group_in(S.STABLE).validate_delete_group() == ErrorCode.NON_EMPTY_GROUP
    assert ClassicGroup("g").validate_offset_delete() == ErrorCode.NONE
    assert group_in(S.STABLE).validate_offset_delete() == ErrorCode.NONE  # the consumer protocol
    assert group_in(S.STABLE, protocol_type="connect").validate_offset_delete() == ErrorCode.NON_EMPTY_GROUP


def test_subscribed_topics_count_only_while_the_group_has_members() -> None:
    stable = group_in(S.STABLE, topics=("t", "u"))
    assert stable.is_subscribed_to_topic("t")
    assert not stable.is_subscribed_to_topic("v")
    assert not ClassicGroup("g", protocol_type="consumer").is_subscribed_to_topic("t")


def test_offset_expiration_base() -> None:
    simple = ClassicGroup("g")  # offsets only: no protocol type
    base = simple.offset_expiration_base()
    assert base is not None
    assert base(OFFSET) == COMMITTED_AT
    empty = ClassicGroup("g", state_timestamp=500, protocol_type="consumer")
    base = empty.offset_expiration_base()
    assert base is not None
    assert base(OFFSET) == 500  # from when the group became empty
    empty.state_timestamp = -1  # an old record that does not say
    base = empty.offset_expiration_base()
    assert base is not None
    assert base(OFFSET) == COMMITTED_AT
    base = group_in(S.STABLE).offset_expiration_base()
    assert base is not None
    assert base(OFFSET) == COMMITTED_AT
    assert group_in(S.PREPARING_REBALANCE).offset_expiration_base() is None
    assert group_in(S.STABLE, protocol_type="connect").offset_expiration_base() is None
