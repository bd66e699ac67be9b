"""OffsetCommit (key 8): store committed offsets in `__consumer_offsets`; answered once durable.

Members are fenced by generation (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS); a
commit with generation -1 (admin tools, consumers that assign() partitions) is accepted while the group
has no members. Partitions of topics that do not exist answer UNKNOWN_TOPIC_OR_PARTITION, as in Kafka.

v9 (KIP-848) changes nothing for classic groups except GROUP_ID_NOT_FOUND, instead of ILLEGAL_GENERATION,
for a commit with a generation to a group that does not exist. v10 names topics by id: an id this broker
does not know answers UNKNOWN_TOPIC_ID for each of its partitions (Kafka's `handleOffsetCommitRequest`).
"""

from __future__ import annotations

import dataclasses

from exactly.broker import guard as authz
from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.errors import ErrorCode, KafkaError
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestTopic,
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)

_TOPIC_IDS_VERSION = 10


@handler(ApiKey.OFFSET_COMMIT)
async def handle(ctx: RequestContext, request: OffsetCommitRequest) -> OffsetCommitResponse:
    broker = ctx.broker
    groups = broker.groups
    client = groups.client(ctx)
    unknown: list[OffsetCommitRequestTopic] = []
    if ctx.version >= _TOPIC_IDS_VERSION:
        known: list[OffsetCommitRequestTopic] = []
        for topic in request.topics:
            info = broker.metadata.by_id(topic.topic_id)
            if info is None:
                unknown.append(topic)
            else:
                known.append(dataclasses.replace(topic, name=info.name))
        request = dataclasses.replace(request, topics=known)
    refused: list[OffsetCommitResponseTopic] = []
    if not authz.allowed(ctx, ApiKey.OFFSET_COMMIT, "group", request.group_id):
        refused = _refused(request.topics, ErrorCode.GROUP_AUTHORIZATION_FAILED)
        request = dataclasses.replace(request, topics=[])
    else:
        denied = [t for t in request.topics if not authz.allowed(ctx, ApiKey.OFFSET_COMMIT, "topic", t.name)]
        if denied:
            refused = _refused(denied, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            request = dataclasses.replace(request, topics=[t for t in request.topics if t not in denied])
    if not request.topics and (refused or unknown):
        return OffsetCommitResponse(topics=refused + _unknown(unknown))
    try:
        response: OffsetCommitResponse = await groups.call(
            request.group_id,
            lambda coordinator: coordinator.commit_offsets(client, request, broker.topics.has_partition),
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
    response.topics += refused + _unknown(unknown)
    return response


def _refused(topics: list[OffsetCommitRequestTopic], code: ErrorCode) -> list[OffsetCommitResponseTopic]:
    return [
        OffsetCommitResponseTopic(
            t.name, t.topic_id, [OffsetCommitResponsePartition(p.partition_index, code) for p in t.partitions]
        )
        for t in topics
    ]


def _unknown(unknown: list[OffsetCommitRequestTopic]) -> list[OffsetCommitResponseTopic]:
    return [
        OffsetCommitResponseTopic(
            "",
            t.topic_id,
            [
                OffsetCommitResponsePartition(p.partition_index, ErrorCode.UNKNOWN_TOPIC_ID)
                for p in t.partitions
            ],
        )
        for t in unknown
    ]
