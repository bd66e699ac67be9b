"""OffsetDelete (key 47): delete a group's committed offsets for some partitions. Allowed for an empty
group, and for a consumer group only on topics it is not subscribed to (GROUP_SUBSCRIBED_TO_TOPIC)."""

from __future__ import annotations

import dataclasses

from exactly.broker import guard as authz
from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.errors import ErrorCode, KafkaError
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.offset_delete import (
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
)


@handler(ApiKey.OFFSET_DELETE)
async def handle(ctx: RequestContext, request: OffsetDeleteRequest) -> OffsetDeleteResponse:
    groups = ctx.broker.groups
    if not authz.allowed(ctx, ApiKey.OFFSET_DELETE, "group", request.group_id):
        return OffsetDeleteResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    denied = [t for t in request.topics if not authz.allowed(ctx, ApiKey.OFFSET_DELETE, "topic", t.name)]
    if denied:
        request = dataclasses.replace(request, topics=[t for t in request.topics if t not in denied])
    try:
        response: OffsetDeleteResponse = await groups.call(
            request.group_id, lambda coordinator: coordinator.delete_offsets(request)
        )
    except KafkaError as e:
        response = OffsetDeleteResponse(error_code=e.code)
    if denied:
        code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        response.topics += [
            OffsetDeleteResponseTopic(
                t.name, [OffsetDeleteResponsePartition(p.partition_index, code) for p in t.partitions]
            )
            for t in denied
        ]
    return response
