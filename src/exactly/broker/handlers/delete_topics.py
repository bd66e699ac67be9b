"""DeleteTopics (key 20): by name (v1-5) or by name or id (v6+).

A client with a `controller_mutation_rate` quota (KIP-599) has each topic's partitions counted before it
is deleted; from v5 a topic that does not fit is THROTTLING_QUOTA_EXCEEDED (broker/throttling.py)."""

from __future__ import annotations

from exactly.broker import guard as authz
from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.broker.throttling import mutation_quota, throttle_mutations
from exactly.errors import ErrorCode, KafkaError
from exactly.protocol import primitives as p
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.delete_topics import (
    DeletableTopicResult,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)


@handler(ApiKey.DELETE_TOPICS)
async def handle(ctx: RequestContext, request: DeleteTopicsRequest) -> DeleteTopicsResponse:
    broker = ctx.broker
    wanted = [(t.name, t.topic_id) for t in request.topics] or [(n, p.UUID_ZERO) for n in request.topic_names]
    results = []
    quota = mutation_quota(ctx)
    for name, topic_id in wanted:
        if name is None:
            info = broker.metadata.by_id(topic_id)
            if info is None:
                results.append(DeletableTopicResult(None, topic_id, ErrorCode.UNKNOWN_TOPIC_ID))
                continue
            name = info.name
        if not authz.allowed(ctx, ApiKey.DELETE_TOPICS, "topic", name):
            code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            results.append(DeletableTopicResult(name, topic_id, code, "Authorization failed."))
            continue
        try:
            if not broker.config.delete_topic_enable:
                raise KafkaError(ErrorCode.TOPIC_DELETION_DISABLED, "delete.topic.enable is false")
            existing = broker.metadata.topics.get(name)
            if existing is not None:
                quota.record(existing.partitions)  # THROTTLING_QUOTA_EXCEEDED when strict and over
            info = await broker.topics.delete_topic(name)
        except KafkaError as e:
            results.append(DeletableTopicResult(name, topic_id, e.code, e.message))
            continue
        results.append(DeletableTopicResult(name, info.topic_id, ErrorCode.NONE))
    return DeleteTopicsResponse(throttle_time_ms=throttle_mutations(ctx, quota), responses=results)
