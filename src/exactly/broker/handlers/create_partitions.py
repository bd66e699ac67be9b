"""CreatePartitions (key 37): grow a topic's partition count.

A client with a `controller_mutation_rate` quota (KIP-599) has the partitions it adds counted; from v3 a
topic that does not fit is THROTTLING_QUOTA_EXCEEDED (broker/throttling.py)."""

from __future__ import annotations

from exactly.broker import guard as authz
from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.broker.throttling import mutation_quota, throttle_mutations
from exactly.errors import ErrorCode, KafkaError
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.create_partitions import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
)


@handler(ApiKey.CREATE_PARTITIONS)
async def handle(ctx: RequestContext, request: CreatePartitionsRequest) -> CreatePartitionsResponse:
    broker = ctx.broker
    results = []
    quota = mutation_quota(ctx)
    for topic in request.topics:
        if not authz.allowed(ctx, ApiKey.CREATE_PARTITIONS, "topic", topic.name):
            code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            results.append(CreatePartitionsTopicResult(topic.name, code, "Authorization failed."))
            continue
        try:
            info = broker.metadata.topics.get(topic.name)
            if info is None:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {topic.name!r}")
            if topic.count <= info.partitions:
                raise KafkaError(
                    ErrorCode.INVALID_PARTITIONS,
                    f"topic has {info.partitions} partitions; {topic.count} would not add any",
                )
            if topic.assignments and any(a.broker_ids != [broker.config.node_id] for a in topic.assignments):
                raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "this cluster has one broker")
            if not request.validate_only:
                quota.record(topic.count - info.partitions)  # THROTTLING_QUOTA_EXCEEDED when strict, over
                await broker.topics.add_partitions(topic.name, topic.count)
        except KafkaError as e:
            results.append(CreatePartitionsTopicResult(topic.name, e.code, e.message))
            continue
        results.append(CreatePartitionsTopicResult(topic.name, ErrorCode.NONE, None))
    return CreatePartitionsResponse(throttle_time_ms=throttle_mutations(ctx, quota), results=results)
