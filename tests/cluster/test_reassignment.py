"""Reassignment's znode steps (KIP-455 in ZooKeeper mode): start, replace, cancel, and the end once the
targets are in the ISR, with the leader moved off a removed replica."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from exactly.cluster import reassignment
from exactly.cluster.znodes import PartitionState, TopicAssignment
from exactly.errors import ErrorCode, KafkaError

TOPIC_ID = uuid.UUID(int=7)


def _topic(replicas: tuple[int, ...]) -> TopicAssignment:
    return TopicAssignment(TOPIC_ID, {0: replicas, 1: (3, 1, 2)})


def test_start_puts_the_targets_first_and_names_what_is_added_and_removed() -> None:
    moved = reassignment.start(_topic((1, 2, 3)), 0, [4, 2, 5])
    assert moved.partitions[0] == (4, 2, 5, 1, 3)
    assert moved.adding[0] == (4, 5)
    assert moved.removing[0] == (1, 3)
    assert moved.partitions[1] == (3, 1, 2)  # other partitions untouched
    assert reassignment.original_replicas(moved, 0) == (2, 1, 3)
    assert reassignment.target_replicas(moved, 0) == (4, 2, 5)


def test_a_new_target_replaces_a_running_reassignment_from_the_same_original() -> None:
    moved = reassignment.start(reassignment.start(_topic((1, 2, 3)), 0, [4, 5, 6]), 0, [1, 2, 4])
    assert moved.partitions[0] == (1, 2, 4, 3)
    assert moved.adding[0] == (4,)
    assert moved.removing[0] == (3,)


def test_cancel_restores_the_original_set_and_nothing_running_is_an_error() -> None:
    moved = reassignment.start(_topic((1, 2, 3)), 0, [4, 5, 6])
    back = reassignment.cancel(moved, 0)
    assert sorted(back.partitions[0]) == [1, 2, 3]
    assert not back.adding
    assert not back.removing
    with pytest.raises(KafkaError) as e:
        reassignment.cancel(back, 0)
    assert e.value.code == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS


@pytest.mark.parametrize(
    ("target", "message"),
    [([], "empty replica list"), ([1, 1], "more than once"), ([1, 9], "broker 9")],
)
def test_invalid_targets(target: list[int], message: str) -> None:
    with pytest.raises(KafkaError) as e:
        reassignment.check_target("t", 0, target, {1, 2, 3})
    assert e.value.code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert message in (e.value.message or "")


def test_the_end_waits_for_every_target_in_the_isr() -> None:
    moved = reassignment.start(_topic((1, 2)), 0, [2, 3])
    waiting = PartitionState(1, 4, (1, 2), 1)
    assert reassignment.complete(moved, 0, waiting, {1, 2, 3}, 1) is None
    caught_up = PartitionState(1, 4, (1, 2, 3), 1)
    done = reassignment.complete(moved, 0, caught_up, {1, 2, 3}, 2)
    assert done is not None
    assert done.state == PartitionState(2, 5, (2, 3), 2)  # leader 1 leaves: a target takes over
    assert done.assignment.partitions[0] == (2, 3)
    assert not done.assignment.adding
    assert not done.assignment.removing


def test_the_end_keeps_a_leader_that_stays() -> None:
    moved = reassignment.start(_topic((1, 2)), 0, [1, 3])
    done = reassignment.complete(moved, 0, PartitionState(1, 0, (1, 2, 3), 0), {1, 2, 3}, 0)
    assert done is not None
    assert done.state == PartitionState(1, 1, (1, 3), 0)


@given(
    st.lists(st.integers(1, 8), min_size=1, max_size=4, unique=True),
    st.lists(st.integers(1, 8), min_size=1, max_size=4, unique=True),
)
def test_start_then_end_lands_exactly_on_the_target(original: list[int], target: list[int]) -> None:
    moved = reassignment.start(_topic(tuple(original)), 0, target)
    assert set(moved.partitions[0]) == set(original) | set(target)
    everyone = tuple(moved.partitions[0])
    done = reassignment.complete(moved, 0, PartitionState(everyone[-1], 3, everyone, 0), set(everyone), 0)
    if set(target) == set(original):
        assert done is None  # nothing was in progress
        assert moved.partitions[0] == tuple(target)
        return
    assert done is not None
    assert done.assignment.partitions[0] == tuple(target)
    final_leader = done.state.leader if done.state is not None else everyone[-1]
    assert final_leader in target
