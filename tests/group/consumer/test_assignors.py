"""The server-side assignors against Kafka's published expectations (`UniformHomogeneousAssignment
BuilderTest`, `RangeAssignorTest`) and their invariants (balance, stickiness, co-partitioning)."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st

from exactly.group.consumer.assignors import MemberSpec, RangeAssignor, UniformAssignor

T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)
T3 = uuid.UUID(int=3)


def spec(*topics: uuid.UUID, current: dict[uuid.UUID, set[int]] | None = None) -> MemberSpec:
    return MemberSpec(frozenset(topics), assignment={t: frozenset(ps) for t, ps in (current or {}).items()})


def as_sets(result: dict[str, dict[uuid.UUID, frozenset[int]]]) -> dict[str, dict[uuid.UUID, set[int]]]:
    return {m: {t: set(ps) for t, ps in a.items()} for m, a in result.items()}


def test_uniform_first_assignment_two_members_two_topics() -> None:
    """Kafka's testFirstAssignmentTwoMembersTwoTopicsNoMemberRacks: topic1 (3 partitions) and topic3
    (2): A gets topic1 0 and 2 and topic3 1; B gets topic1 1 and topic3 0."""
    members = {"A": spec(T1, T3), "B": spec(T1, T3)}
    result = UniformAssignor().assign(members, [(T1, 3), (T3, 2)])
    assert as_sets(result) == {"A": {T1: {0, 2}, T3: {1}}, "B": {T1: {1}, T3: {0}}}


def test_uniform_no_topics_assigns_nothing() -> None:
    assert UniformAssignor().assign({"A": spec()}, []) == {"A": {}}


def test_uniform_keeps_what_fits_the_quota_when_a_member_joins() -> None:
    """Kafka's testReassignmentWhenOneMemberAddedAfterInitialAssignmentWithTwoMembersTwoTopics, in
    spirit: the existing members keep what their quota allows, the newcomer gets what they give up."""
    members = {
        "A": spec(T1, T2, current={T1: {0, 2}, T2: {1}}),
        "B": spec(T1, T2, current={T1: {1}, T2: {0, 2}}),
        "C": spec(T1, T2),
    }
    result = as_sets(UniformAssignor().assign(members, [(T1, 3), (T2, 3)]))
    sizes = sorted(sum(len(ps) for ps in a.values()) for a in result.values())
    assert sizes == [2, 2, 2]
    kept_a = {(t, p) for t, ps in result["A"].items() for p in ps}
    kept_b = {(t, p) for t, ps in result["B"].items() for p in ps}
    assert kept_a <= {(T1, 0), (T1, 2), (T2, 1)}
    assert kept_b <= {(T1, 1), (T2, 0), (T2, 2)}


def test_range_gives_contiguous_ranges_first_members_one_more() -> None:
    """Kafka's RangeAssignor: 3 partitions over 2 members -> [0, 1] and [2]."""
    result = as_sets(RangeAssignor().assign({"A": spec(T1), "B": spec(T1)}, [(T1, 3)]))
    assert result == {"A": {T1: {0, 1}}, "B": {T1: {2}}}


def test_range_co_partitions_topics_of_equal_size() -> None:
    """Kafka's testFirstAssignmentThreeMembersTwoTopicsSameSubscriptions shape: with the same subscription
    and equal partition counts, every member gets the same partition numbers of each topic."""
    members = {m: spec(T1, T2) for m in ("A", "B", "C")}
    result = as_sets(RangeAssignor().assign(members, [(T1, 4), (T2, 4)]))
    assert result == {"A": {T1: {0, 1}, T2: {0, 1}}, "B": {T1: {2}, T2: {2}}, "C": {T1: {3}, T2: {3}}}


def test_range_orders_static_members_by_instance_id() -> None:
    members = {
        "z": MemberSpec(frozenset({T1}), instance_id="a"),
        "a": MemberSpec(frozenset({T1}), instance_id="b"),
    }
    assert as_sets(RangeAssignor().assign(members, [(T1, 2)])) == {"z": {T1: {0}}, "a": {T1: {1}}}


topic_counts = st.lists(st.integers(1, 8), min_size=1, max_size=3)


@st.composite
def groups(draw: st.DrawFn, homogeneous: bool) -> tuple[dict[str, MemberSpec], list[tuple[uuid.UUID, int]]]:
    counts = draw(topic_counts)
    topics = [(uuid.UUID(int=i + 1), n) for i, n in enumerate(counts)]
    names = draw(st.lists(st.sampled_from("ABCDEFG"), min_size=1, max_size=6, unique=True))
    members = {}
    for name in names:
        if homogeneous:
            subscribed = frozenset(t for t, _ in topics)
        else:
            subscribed = frozenset(draw(st.sets(st.sampled_from([t for t, _ in topics]), min_size=1)))
        current = {
            t: frozenset(draw(st.sets(st.integers(0, n + 1), max_size=3)))
            for t, n in topics
            if draw(st.booleans())
        }
        members[name] = MemberSpec(subscribed, assignment=current)
    return members, topics


def check_valid(
    members: dict[str, MemberSpec],
    topics: list[tuple[uuid.UUID, int]],
    result: dict[str, dict[uuid.UUID, frozenset[int]]],
) -> None:
    owners: dict[tuple[uuid.UUID, int], str] = {}
    for m, assignment in result.items():
        for t, ps in assignment.items():
            assert t in members[m].topics, (m, t)
            for p in ps:
                assert (t, p) not in owners, f"{t}-{p} given to {owners[(t, p)]} and {m}"
                owners[(t, p)] = m
    for t, n in topics:
        if any(t in s.topics for s in members.values()):
            assert {p for (tt, p) in owners if tt == t} == set(range(n))


@given(groups(homogeneous=True))
def test_uniform_homogeneous_balances_within_one(group: tuple[dict[str, MemberSpec], list]) -> None:
    members, topics = group
    result = UniformAssignor().assign(members, topics)
    check_valid(members, topics, result)
    sizes = [sum(len(ps) for ps in result.get(m, {}).values()) for m in members]
    assert max(sizes) - min(sizes) <= 1


@given(groups(homogeneous=False))
def test_uniform_heterogeneous_assigns_every_partition_to_a_subscriber(group: tuple) -> None:
    members, topics = group
    check_valid(members, topics, UniformAssignor().assign(members, topics))


@given(groups(homogeneous=False))
def test_range_assigns_every_partition_to_a_subscriber(group: tuple) -> None:
    members, topics = group
    check_valid(members, topics, RangeAssignor().assign(members, topics))
