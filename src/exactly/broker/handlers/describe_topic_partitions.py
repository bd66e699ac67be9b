"""DescribeTopicPartitions (key 75, KIP-966): Metadata's topic answer, paginated by partition count.

As Kafka's DescribeTopicPartitionsRequestHandler and MetadataCache.describeTopicResponse:

- no topics named means every topic (unknown names are then impossible); otherwise the named ones, and an
  unknown name gets UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION if it is not a legal name);
- topics are answered in name order, starting at the cursor's topic (names before it are skipped) and,
  in that topic, at the cursor's partition;
- at most min(response_partition_limit, `max.request.partition.size.limit`) partitions (at least 1) are
  returned; when a topic does not fit, its partitions up to the limit are returned and `next_cursor`
  names the first one left out; when the limit is reached exactly at a topic boundary, `next_cursor`
  names the next topic at partition 0 (that topic may not exist);
- a cursor whose topic is not among the topics asked for (or no longer exists, when all are asked for),
  or whose partition is negative, is INVALID_REQUEST: every named topic gets that code
  (DescribeTopicPartitionsRequest.getErrorResponse).

Each partition: this node leads it with epoch 0 and is its only replica and ISR; eligible leader
replicas, last known ELR and offline replicas are empty. topic_authorized_operations is every operation
Kafka defines on a topic, what Kafka answers without an authorizer.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import IntEnum

from exactly.broker import guard as authz
from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.cluster.metadata import TopicInfo, validate_topic_name
from exactly.errors import ErrorCode, KafkaError
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.describe_topic_partitions import (
    Cursor,
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
    DescribeTopicPartitionsResponsePartition,
    DescribeTopicPartitionsResponseTopic,
)
from exactly.security.operations import ResourceType


class AclOperation(IntEnum):
    """Kafka's AclOperation codes (the bit positions of an authorized-operations field)."""

    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11


# AclEntry.supportedOperations(TOPIC), as Utils.to32BitField packs them: every one of the above.
TOPIC_AUTHORIZED_OPERATIONS = sum(1 << op for op in AclOperation)


@handler(ApiKey.DESCRIBE_TOPIC_PARTITIONS)
async def handle(
    ctx: RequestContext, request: DescribeTopicPartitionsRequest
) -> DescribeTopicPartitionsResponse:
    broker = ctx.broker
    limit = max(min(broker.config.max_request_partition_size_limit, request.response_partition_limit), 1)
    topics: Mapping[str, TopicInfo] = broker.metadata.topics
    denied: set[str] = set()
    if authz.enabled(ctx):  # topics it may not describe: left out of "every topic", refused by name
        api = ApiKey.DESCRIBE_TOPIC_PARTITIONS
        denied = {t.name for t in request.topics if not authz.allowed(ctx, api, "topic", t.name)}
        topics = {
            name: info
            for name, info in topics.items()
            if name not in denied and authz.quietly(ctx, api, "topic", name)
        }
    try:
        response = describe_page(topics, request, limit, broker.config.node_id)
    except KafkaError as e:
        return DescribeTopicPartitionsResponse(
            topics=[
                DescribeTopicPartitionsResponseTopic(e.code, t.name, is_internal=False)
                for t in request.topics
            ]
        )
    if authz.enabled(ctx):
        for topic in response.topics:
            if topic.name in denied:
                topic.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            name = topic.name or ""
            topic.topic_authorized_operations = authz.operations_field(ctx, ResourceType.TOPIC, name)
    return response


def describe_page(
    topics: Mapping[str, TopicInfo], request: DescribeTopicPartitionsRequest, limit: int, node: int
) -> DescribeTopicPartitionsResponse:
    """One page of the answer; KafkaError INVALID_REQUEST for a cursor that does not fit the request."""
    cursor = request.cursor
    start_topic = cursor.topic_name if cursor is not None else ""
    every_topic = not request.topics
    names = topics.keys() if every_topic else {t.name for t in request.topics}
    chosen = sorted(name for name in names if name >= start_topic)
    if cursor is not None:
        if cursor.partition_index < 0:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"cursor partition must be valid: {cursor}")
        if cursor.topic_name not in chosen:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST, f"topic list should contain the cursor topic: {start_topic}"
            )
    response = DescribeTopicPartitionsResponse()
    remaining = limit
    for name in chosen:
        if remaining == 0:
            response.next_cursor = Cursor(name, 0)
            break
        info = topics.get(name)
        if info is None:
            if not every_topic:
                response.topics.append(_unknown(name))
            continue
        first = cursor.partition_index if cursor is not None and name == start_topic else 0
        end = min(info.partitions, first + remaining)
        partitions = [
            DescribeTopicPartitionsResponsePartition(
                ErrorCode.NONE, i, node, 0, [node], [node], eligible_leader_replicas=[], last_known_elr=[]
            )
            for i in range(first, end)
        ]
        response.topics.append(
            DescribeTopicPartitionsResponseTopic(
                ErrorCode.NONE, name, info.topic_id, info.internal, partitions, TOPIC_AUTHORIZED_OPERATIONS
            )
        )
        if end < info.partitions:
            response.next_cursor = Cursor(name, end)
            break
        remaining -= len(partitions)
    return response


def _unknown(name: str) -> DescribeTopicPartitionsResponseTopic:
    try:
        validate_topic_name(name)
        code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    except KafkaError as e:
        code = e.code
    return DescribeTopicPartitionsResponseTopic(
        code, name, is_internal=name.startswith("__"), topic_authorized_operations=TOPIC_AUTHORIZED_OPERATIONS
    )
