"""Replica assignment: Kafka's published vectors (AdminRackAwareTest), its distribution checks
(RackAwareTest.checkReplicaDistribution) over the same broker layouts, a hand-derived CreatePartitions
vector, Kafka's errors, and Hypothesis properties."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from exactly.cluster.assignment import (
    BrokerMetadata,
    assign_new_partitions,
    assign_replicas,
    rack_alternated_broker_list,
)
from exactly.errors import ErrorCode, KafkaError


def racked(mapping: dict[int, str]) -> list[BrokerMetadata]:
    return [BrokerMetadata(b, r) for b, r in mapping.items()]


def plain(*ids: int) -> list[BrokerMetadata]:
    return [BrokerMetadata(b, None) for b in ids]


# ------------------------------------------------------------------------------ Kafka's vectors

RACKS_1 = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}


def test_rack_alternated_broker_list() -> None:
    assert rack_alternated_broker_list(RACKS_1) == [0, 3, 1, 5, 4, 2]
    assert rack_alternated_broker_list({b: r for b, r in RACKS_1.items() if b != 5}) == [0, 3, 1, 4, 2]
    assert rack_alternated_broker_list({}) == []


def test_rack_aware_vector() -> None:
    # AdminRackAwareTest.testGetRackAlternatedBrokerListAndAssignReplicasToBrokers
    assert assign_replicas(racked(RACKS_1), 7, 3, fixed_start_index=0, start_partition_id=0) == {
        0: (0, 3, 1),
        1: (3, 1, 5),
        2: (1, 5, 4),
        3: (5, 4, 2),
        4: (4, 2, 0),
        5: (2, 0, 3),
        6: (0, 4, 2),
    }


def test_rack_unaware_vector() -> None:
    # AdminRackAwareTest.testReplicaAssignment: 5 brokers, 10 partitions, RF 3, fixed start index 0
    expected = {
        0: (0, 1, 2),
        1: (1, 2, 3),
        2: (2, 3, 4),
        3: (3, 4, 0),
        4: (4, 0, 1),
        5: (0, 2, 3),
        6: (1, 3, 4),
        7: (2, 4, 0),
        8: (3, 0, 1),
        9: (4, 1, 2),
    }
    assert assign_replicas(plain(0, 1, 2, 3, 4), 10, 3, fixed_start_index=0) == expected
    # brokers are sorted by id first
    assert assign_replicas(plain(3, 1, 4, 0, 2), 10, 3, fixed_start_index=0) == expected


def test_rack_unaware_with_fixed_start_index_2_by_hand() -> None:
    # n=3, start=shift=2. p0: first=(0+2)%3=2 -> broker 12; follower (2+1+(2+0)%2)%3 = 0 -> 10.
    # p1: first=0 -> 10; follower (0+1+0)%3 = 1 -> 11. p2: first=1 -> 11; follower (1+1+0)%3=2 -> 12.
    # p3: 3%3==0 so shift=3; first=2 -> 12; follower (2+1+(3%2=1))%3 = 1 -> 11.
    assert assign_replicas(plain(10, 11, 12), 4, 2, fixed_start_index=2) == {
        0: (12, 10),
        1: (10, 11),
        2: (11, 12),
        3: (12, 11),
    }


def test_new_partitions_by_hand() -> None:
    # Partition 0's first replica is 3, so start index = shift = index of broker 3 = 3; new partitions
    # are numbered from 2. p2: first=(2+3)%5=0 -> 0; followers (0+1+(3+j)%4)%5 for j=0,1 -> 4, 1.
    # p3: first=1; followers (1+1+3)%5=0, (1+1+0)%5=2. p4: first=2; followers 1, 3.
    existing = {0: (3, 4, 0), 1: (4, 0, 1)}
    assert assign_new_partitions(existing, plain(0, 1, 2, 3, 4), 5) == {
        2: (0, 4, 1),
        3: (1, 0, 2),
        4: (2, 1, 3),
    }


def test_new_partitions_start_at_the_first_broker_not_below_partition_0s_leader() -> None:
    # broker 7 is gone: the first broker with id >= 7 is 9 (index 2); start = shift = 2
    new = assign_new_partitions({0: (7, 1)}, plain(1, 5, 9), 2)
    assert new == assign_replicas(plain(1, 5, 9), 1, 2, fixed_start_index=2, start_partition_id=1)
    # no broker has an id >= partition 0's leader: start index 0
    assert assign_new_partitions({0: (8,)}, plain(1, 2), 3) == assign_replicas(
        plain(1, 2), 2, 1, fixed_start_index=0, start_partition_id=1
    )


# Kafka's AdminRackAwareTest layouts with the checks it makes on them (verify rack-awareness, even
# leaders, even replicas); random start indexes are run with several seeds.
SCENARIOS = [
    # (racks, partitions, rf, fixed start, start partition, check leaders, check replicas)
    ({0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}, 6, 3, 2, 0, True, True),
    ({0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}, 6, 3, -1, -1, True, True),
    ({0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}, 13, 3, 0, 0, False, False),
    ({0: "rack1", 1: "rack1", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}, 12, 3, -1, -1, True, False),
    ({0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}, 12, 2, -1, -1, True, True),
    ({6: "rack1", 7: "rack2", 8: "rack2", 9: "rack3", 10: "rack3", 11: "rack1"}, 12, 2, -1, 12, True, True),
    ({0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}, 6, 2, -1, -1, True, True),
    ({0: "rack1", 1: "rack2", 4: "rack3"}, 3, 2, -1, -1, True, True),
    (
        {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}
        | {6: "rack1", 7: "rack2", 8: "rack2", 9: "rack3", 10: "rack1", 11: "rack3"},
        96, 3, -1, -1, True, True,
    ),
]  # fmt: skip


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize(("racks", "partitions", "rf", "start", "first_id", "leaders", "replicas"), SCENARIOS)
def test_kafka_rack_aware_distribution(
    racks: dict[int, str],
    partitions: int,
    rf: int,
    start: int,
    first_id: int,
    leaders: bool,
    replicas: bool,
    seed: int,
) -> None:
    assignment = assign_replicas(
        racked(racks),
        partitions,
        rf,
        fixed_start_index=start,
        start_partition_id=first_id,
        rng=random.Random(seed),
    )
    assert len(assignment) == partitions
    for brokers in assignment.values():
        assert len(set(brokers)) == len(brokers) == rf
        assert len({racks[b] for b in brokers}) == rf
    if leaders:
        counts = Counter(brokers[0] for brokers in assignment.values())
        assert sorted(counts[b] for b in racks) == [partitions // len(racks)] * len(racks)
    if replicas:
        counts = Counter(b for brokers in assignment.values() for b in brokers)
        assert sorted(counts[b] for b in racks) == [partitions * rf // len(racks)] * len(racks)


@pytest.mark.parametrize(
    ("racks", "rf", "expected_racks"),
    [
        ({0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack2"}, 5, 3),  # more replicas
        ({0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack2"}, 2, 2),  # fewer replicas
        (dict.fromkeys(range(6), "rack1"), 3, 1),  # single rack
    ],
)
def test_kafka_racks_per_partition(racks: dict[int, str], rf: int, expected_racks: int) -> None:
    assignment = assign_replicas(racked(racks), 6, rf, rng=random.Random(1))
    assert all(len(r) == rf and len({racks[b] for b in r}) == expected_racks for r in assignment.values())


def test_single_rack_spreads_leaders_evenly() -> None:
    assignment = assign_replicas(racked(dict.fromkeys(range(6), "rack1")), 6, 3, rng=random.Random(3))
    assert Counter(r[0] for r in assignment.values()) == dict.fromkeys(range(6), 1)


def test_skip_broker_with_replica_already_assigned() -> None:
    # AdminRackAwareTest.testSkipBrokerWithReplicaAlreadyAssigned: 5 brokers, 3 racks, RF 4
    racks = {0: "a", 1: "b", 2: "c", 3: "a", 4: "a"}
    assignment = assign_replicas(racked(racks), 6, 4, fixed_start_index=2)
    assert all(len(set(r)) == 4 and {racks[b] for b in r} == {"a", "b", "c"} for r in assignment.values())


def test_random_start_and_shift_come_from_rng_in_that_order() -> None:
    brokers = plain(*range(10, 17))
    a = assign_replicas(brokers, 20, 3, rng=random.Random(42))
    assert a == assign_replicas(brokers, 20, 3, rng=random.Random(42))
    rng = random.Random(42)
    start, shift = rng.randrange(7), rng.randrange(7)
    assert a[0] == (10 + start, 10 + (start + 1 + shift % 6) % 7, 10 + (start + 1 + (shift + 1) % 6) % 7)
    assert len({tuple(assign_replicas(brokers, 20, 3, rng=random.Random(s)).items()) for s in range(20)}) > 1


# ----------------------------------------------------------------------------------------- errors


def test_errors_are_kafkas() -> None:
    brokers = plain(0, 1, 2, 3, 4)
    with pytest.raises(KafkaError) as info:
        assign_replicas(brokers, 0, 0)
    assert (info.value.code, info.value.message) == (
        ErrorCode.INVALID_PARTITIONS,
        "Number of partitions must be larger than 0.",
    )
    with pytest.raises(KafkaError) as info:
        assign_replicas(brokers, 10, 0)
    assert (info.value.code, info.value.message) == (
        ErrorCode.INVALID_REPLICATION_FACTOR,
        "Replication factor must be larger than 0.",
    )
    with pytest.raises(KafkaError) as info:
        assign_replicas(brokers, 10, 6)
    assert (info.value.code, info.value.message) == (
        ErrorCode.INVALID_REPLICATION_FACTOR,
        "Replication factor: 6 larger than available brokers: 5.",
    )
    with pytest.raises(KafkaError) as info:
        assign_replicas([], 1, 1)
    assert info.value.code == ErrorCode.INVALID_REPLICATION_FACTOR


def test_mixed_racks_is_an_unknown_server_error() -> None:
    # AdminRackAwareTest.testAssignReplicasToBrokersWithInvalidParameters: AdminOperationException
    brokers = racked({0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2"}) + plain(4)
    with pytest.raises(KafkaError) as info:
        assign_replicas(brokers, 10, 5)
    assert info.value.code == ErrorCode.UNKNOWN_SERVER_ERROR
    assert "Not all brokers have rack information" in info.value.message
    # the replication factor is checked first
    with pytest.raises(KafkaError) as info:
        assign_replicas(brokers, 10, 6)
    assert info.value.code == ErrorCode.INVALID_REPLICATION_FACTOR


def test_duplicate_broker_ids_are_a_programming_error() -> None:
    with pytest.raises(ValueError, match="duplicate"):
        assign_replicas(plain(1, 1, 2), 1, 1)


def test_new_partitions_errors() -> None:
    brokers = plain(0, 1, 2)
    existing = {0: (0, 1), 1: (1, 2)}
    with pytest.raises(KafkaError) as info:
        assign_new_partitions(existing, brokers, 1)
    assert (info.value.code, info.value.message) == (
        ErrorCode.INVALID_PARTITIONS,
        "Topic currently has 2 partitions, which is higher than the requested 1.",
    )
    with pytest.raises(KafkaError) as info:
        assign_new_partitions(existing, brokers, 2)
    assert (info.value.code, info.value.message) == (
        ErrorCode.INVALID_PARTITIONS,
        "Topic already has 2 partitions.",
    )
    with pytest.raises(KafkaError) as info:
        assign_new_partitions({1: (0, 1)}, brokers, 3)
    assert info.value.code == ErrorCode.UNKNOWN_SERVER_ERROR
    with pytest.raises(KafkaError) as info:
        assign_new_partitions({0: (0, 1, 2)}, plain(0, 1), 3)
    assert info.value.code == ErrorCode.INVALID_REPLICATION_FACTOR


# -------------------------------------------------------------------------------------- properties


@st.composite
def layouts(draw: st.DrawFn, with_racks: bool) -> tuple[list[BrokerMetadata], int, int, int, int]:
    ids = draw(st.lists(st.integers(0, 1000), min_size=1, max_size=9, unique=True))
    if with_racks:
        racks = draw(st.lists(st.sampled_from("abcd"), min_size=len(ids), max_size=len(ids)))
        brokers = [BrokerMetadata(b, r) for b, r in zip(ids, racks, strict=True)]
    else:
        brokers = plain(*ids)
    rf = draw(st.integers(1, len(ids)))
    partitions = draw(st.integers(1, 40))
    start = draw(st.integers(-1, 2 * len(ids)))
    first_id = draw(st.integers(-1, 50))
    return brokers, partitions, rf, start, first_id


@given(layouts(with_racks=False) | layouts(with_racks=True), st.randoms(use_true_random=False))
def test_every_partition_gets_rf_distinct_brokers(
    layout: tuple[list[BrokerMetadata], int, int, int, int], rng: random.Random
) -> None:
    brokers, partitions, rf, start, first_id = layout
    assignment = assign_replicas(
        brokers, partitions, rf, fixed_start_index=start, start_partition_id=first_id, rng=rng
    )
    first = max(0, first_id)
    assert list(assignment) == list(range(first, first + partitions))
    ids = {b.broker_id for b in brokers}
    for replicas in assignment.values():
        assert len(replicas) == rf
        assert set(replicas) <= ids
        assert len(set(replicas)) == rf


@given(layouts(with_racks=False) | layouts(with_racks=True), st.randoms(use_true_random=False))
def test_leaders_are_spread_evenly(
    layout: tuple[list[BrokerMetadata], int, int, int, int], rng: random.Random
) -> None:
    """First replicas go round robin over the (rack-alternated) broker list, so for any number of
    partitions the brokers' leader counts differ by at most one."""
    brokers, partitions, rf, start, first_id = layout
    assignment = assign_replicas(
        brokers, partitions, rf, fixed_start_index=start, start_partition_id=first_id, rng=rng
    )
    counts = Counter(r[0] for r in assignment.values())
    per_broker = [counts[b.broker_id] for b in brokers]
    assert max(per_broker) - min(per_broker) <= 1


@given(layouts(with_racks=False), st.integers(1, 4), st.randoms(use_true_random=False))
def test_rack_unaware_replicas_are_even_over_whole_rounds(
    layout: tuple[list[BrokerMetadata], int, int, int, int], rounds: int, rng: random.Random
) -> None:
    """The follower shift changes only at partition ids that are multiples of n, and within such a
    round of n partitions each replica position hits every broker once: so when the partitions fill
    whole rounds, every broker holds exactly rounds * RF replicas."""
    brokers, _, rf, start, _ = layout
    n = len(brokers)
    first_id = rng.choice([-1, 0, n, 3 * n])
    assignment = assign_replicas(
        brokers, rounds * n, rf, fixed_start_index=start, start_partition_id=first_id, rng=rng
    )
    counts = Counter(b for r in assignment.values() for b in r)
    assert all(counts[b.broker_id] == rounds * rf for b in brokers)


@given(layouts(with_racks=True), st.randoms(use_true_random=False))
def test_rack_aware_uses_distinct_racks_while_there_are_some(
    layout: tuple[list[BrokerMetadata], int, int, int, int], rng: random.Random
) -> None:
    brokers, partitions, rf, start, first_id = layout
    rack_of = {b.broker_id: b.rack for b in brokers}
    num_racks = len(set(rack_of.values()))
    assignment = assign_replicas(
        brokers, partitions, rf, fixed_start_index=start, start_partition_id=first_id, rng=rng
    )
    for replicas in assignment.values():
        racks = [rack_of[b] for b in replicas]
        assert len(set(racks)) == min(rf, num_racks)
        if rf <= num_racks:
            assert len(set(racks)) == rf


@given(
    layouts(with_racks=False) | layouts(with_racks=True),
    st.integers(1, 20),
    st.randoms(use_true_random=False),
)
def test_new_partitions_extend_the_topic(
    layout: tuple[list[BrokerMetadata], int, int, int, int], more: int, rng: random.Random
) -> None:
    brokers, partitions, rf, _, _ = layout
    existing = assign_replicas(brokers, partitions, rf, rng=rng)
    new = assign_new_partitions(existing, brokers, partitions + more, rng=rng)
    assert list(new) == list(range(partitions, partitions + more))
    assert all(len(set(r)) == len(r) == rf for r in new.values())
