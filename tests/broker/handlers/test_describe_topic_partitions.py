"""KIP-966 paging of DescribeTopicPartitions (`describe_page`), against Kafka's describeTopicResponse."""

from __future__ import annotations

import uuid

import pytest

from exactly.broker.handlers.describe_topic_partitions import TOPIC_AUTHORIZED_OPERATIONS, describe_page
from exactly.cluster.metadata import TopicInfo
from exactly.errors import ErrorCode, KafkaError
from exactly.protocol.messages.describe_topic_partitions import (
    Cursor,
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
    TopicRequest,
)

NODE = 7
TOPICS = {
    name: TopicInfo(name, uuid.uuid5(uuid.NAMESPACE_DNS, name), count)
    for name, count in [("b", 2), ("a", 3), ("c", 1), ("__consumer_offsets", 2)]
}


def page(
    names: list[str], limit: int, cursor: tuple[str, int] | None = None
) -> DescribeTopicPartitionsResponse:
    request = DescribeTopicPartitionsRequest(
        [TopicRequest(n) for n in names], limit, Cursor(*cursor) if cursor else None
    )
    return describe_page(TOPICS, request, limit, NODE)


def flat(response: DescribeTopicPartitionsResponse) -> list[tuple[str | None, int]]:
    return [(t.name, p.partition_index) for t in response.topics for p in t.partitions]


def cursor_of(response: DescribeTopicPartitionsResponse) -> tuple[str, int] | None:
    c = response.next_cursor
    return None if c is None else (c.topic_name, c.partition_index)


def test_named_topics_in_name_order_with_every_field() -> None:
    response = page(["c", "a"], 100)
    assert [t.name for t in response.topics] == ["a", "c"]
    a = response.topics[0]
    assert (a.error_code, a.topic_id, a.is_internal) == (ErrorCode.NONE, TOPICS["a"].topic_id, False)
    assert a.topic_authorized_operations == TOPIC_AUTHORIZED_OPERATIONS == 3576
    assert [p.partition_index for p in a.partitions] == [0, 1, 2]
    p = a.partitions[1]
    assert (p.error_code, p.leader_id, p.leader_epoch, p.replica_nodes, p.isr_nodes) == (
        0,
        NODE,
        0,
        [NODE],
        [NODE],
    )
    assert (p.eligible_leader_replicas, p.last_known_elr, p.offline_replicas) == ([], [], [])
    assert response.next_cursor is None


def test_a_topic_that_does_not_fit_is_split_at_the_limit() -> None:
    first = page(["a", "b"], 2)
    assert flat(first) == [("a", 0), ("a", 1)]
    assert cursor_of(first) == ("a", 2)
    second = page(["a", "b"], 2, ("a", 2))
    assert flat(second) == [("a", 2), ("b", 0)]
    assert cursor_of(second) == ("b", 1)
    third = page(["a", "b"], 2, ("b", 1))
    assert flat(third) == [("b", 1)]
    assert third.next_cursor is None


def test_limit_reached_at_a_topic_boundary_points_at_the_next_topic() -> None:
    response = page(["a", "b", "zz-missing"], 3)
    assert flat(response) == [("a", 0), ("a", 1), ("a", 2)]
    assert cursor_of(response) == ("b", 0)
    # Even a topic that does not exist can be the next one (Kafka: "it does not mean this topic exists").
    response = page(["a", "b", "bb-missing"], 5)
    assert flat(response) == [("a", 0), ("a", 1), ("a", 2), ("b", 0), ("b", 1)]
    assert cursor_of(response) == ("bb-missing", 0)


def test_all_topics_when_none_named_and_no_unknown_entries() -> None:
    response = page([], 100)
    assert [t.name for t in response.topics] == ["__consumer_offsets", "a", "b", "c"]
    assert response.topics[0].is_internal is True
    paged = page([], 4, ("a", 1))
    assert flat(paged) == [("a", 1), ("a", 2), ("b", 0), ("b", 1)]
    assert cursor_of(paged) == ("c", 0)


def test_unknown_and_illegal_names() -> None:
    response = page(["nope", "bad name!", "a"], 100)
    by_name = {t.name: t for t in response.topics}
    assert by_name["nope"].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert by_name["bad name!"].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert by_name["nope"].partitions == []
    assert by_name["nope"].topic_id == uuid.UUID(int=0)
    assert by_name["a"].error_code == ErrorCode.NONE


def test_cursor_past_the_last_partition_gives_the_topic_without_partitions() -> None:
    response = page(["a", "b"], 100, ("a", 9))
    assert [(t.name, len(t.partitions)) for t in response.topics] == [("a", 0), ("b", 2)]
    assert response.next_cursor is None


@pytest.mark.parametrize(
    ("names", "cursor"),
    [(["a", "b"], ("c", 0)), (["a"], ("a", -1)), ([], ("gone", 0))],
    ids=["cursor-topic-not-asked-for", "negative-partition", "cursor-topic-deleted"],
)
def test_bad_cursor_is_invalid_request(names: list[str], cursor: tuple[str, int]) -> None:
    with pytest.raises(KafkaError) as e:
        page(names, 10, cursor)
    assert e.value.code == ErrorCode.INVALID_REQUEST
