"""OffsetCommit (key 8): store committed offsets in `__consumer_offsets`; answered once durable.

Members are fenced by generation (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS); a
commit with generation -1 (admin tools, consumers that assign() partitions) is accepted while the group
has no members. Partitions of topics that do not exist answer UNKNOWN_TOPIC_OR_PARTITION, as in Kafka.
"""

from __future__ import annotations

from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.errors import KafkaError
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)


@handler(ApiKey.OFFSET_COMMIT)
async def handle(ctx: RequestContext, request: OffsetCommitRequest) -> OffsetCommitResponse:
    broker = ctx.broker
    groups = broker.groups
    client = groups.client(ctx)
    try:
        response: OffsetCommitResponse = await groups.call(
            lambda coordinator: coordinator.commit_offsets(client, request, broker.has_partition)
        )
    except KafkaError as e:
        response = OffsetCommitResponse(
            topics=[
                OffsetCommitResponseTopic(
                    t.name,
                    t.topic_id,
                    [OffsetCommitResponsePartition(p.partition_index, e.code) for p in t.partitions],
                )
                for t in request.topics
            ]
        )
    return response
