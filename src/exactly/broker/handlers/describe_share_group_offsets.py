"""DescribeShareGroupOffsets (key 90, KIP-932): each share partition's start offset (SPSO), as Kafka's
`kafka-share-groups.sh --describe` shows it. Served only with group.share.enable=true.

As Kafka's KafkaApis / GroupCoordinatorService: GROUP DESCRIBE (else GROUP_AUTHORIZATION_FAILED for the
group); named topics without TOPIC DESCRIBE get TOPIC_AUTHORIZATION_FAILED per partition, and are
silently left out when all the group's partitions are asked for (Topics null). An unknown topic, or a
partition with no state, answers start offset -1 (no error: absence of data, as OffsetFetch). The group
is not required to exist. The state comes from this broker's `ShareService` (exactly has no
ReadShareGroupStateSummary RPC: in a cluster only the share partitions this broker holds are seen).
"""

from __future__ import annotations

from exactly.broker import guard as authz
from exactly.broker.context import RequestContext
from exactly.broker.dispatch import SHARE_DISABLED_MESSAGE, handler
from exactly.errors import ErrorCode, KafkaError
from exactly.group.share.records import SharePartitionKey
from exactly.protocol import primitives as p
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.describe_share_group_offsets import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequestGroup,
    DescribeShareGroupOffsetsResponse,
    DescribeShareGroupOffsetsResponseGroup,
    DescribeShareGroupOffsetsResponsePartition,
    DescribeShareGroupOffsetsResponseTopic,
)

API = ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS
UNINITIALIZED = -1


@handler(API)
async def handle(
    ctx: RequestContext, request: DescribeShareGroupOffsetsRequest
) -> DescribeShareGroupOffsetsResponse:
    return DescribeShareGroupOffsetsResponse(groups=[await _describe(ctx, g) for g in request.groups])


async def _describe(
    ctx: RequestContext, wanted: DescribeShareGroupOffsetsRequestGroup
) -> DescribeShareGroupOffsetsResponseGroup:
    group_id = wanted.group_id
    out = DescribeShareGroupOffsetsResponseGroup(group_id)
    if not ctx.broker.config.group_share_enable:
        out.error_code, out.error_message = ErrorCode.UNSUPPORTED_VERSION, SHARE_DISABLED_MESSAGE
        return out
    if not authz.allowed(ctx, API, "group", group_id):
        out.error_code = ErrorCode.GROUP_AUTHORIZATION_FAILED
        return out
    try:
        await ctx.broker.groups.read(group_id, lambda c: None)  # NOT_COORDINATOR & co.
    except KafkaError as e:
        out.error_code, out.error_message = e.code, e.message
        return out
    metadata = ctx.broker.metadata
    shares = ctx.broker.shares
    if wanted.topics is None:  # every share partition of the group
        by_topic: dict[str, list[int]] = {}
        for key in shares.group_keys(group_id):
            info = metadata.by_id(key.topic_id)
            if info is not None and authz.quietly(ctx, API, "topic", info.name):
                by_topic.setdefault(info.name, []).append(key.partition)
        asked = sorted(by_topic.items())
    else:
        asked = [(t.topic_name, list(t.partitions)) for t in wanted.topics]
    for name, partitions in asked:
        info = metadata.topics.get(name)
        topic = DescribeShareGroupOffsetsResponseTopic(
            name, info.topic_id if info is not None else p.UUID_ZERO
        )
        denied = wanted.topics is not None and not authz.allowed(ctx, API, "topic", name)
        for index in partitions:
            partition = DescribeShareGroupOffsetsResponsePartition(index, UNINITIALIZED, -1)
            if denied:
                partition.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                partition.error_message = "Topic authorization failed."
            elif info is not None:
                found = shares.describe(SharePartitionKey(group_id, info.topic_id, index))
                if found is not None:
                    partition.start_offset, partition.leader_epoch = found.start_offset, found.leader_epoch
            topic.partitions.append(partition)
        if denied:
            topic.topic_id = p.UUID_ZERO
        out.topics.append(topic)
    return out
