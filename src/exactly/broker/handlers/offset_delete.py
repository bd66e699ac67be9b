"""OffsetDelete (key 47): delete a group's committed offsets for some partitions. Allowed for an empty
group, and for a consumer group only on topics it is not subscribed to (GROUP_SUBSCRIBED_TO_TOPIC)."""

from __future__ import annotations

from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.errors import KafkaError
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.offset_delete import OffsetDeleteRequest, OffsetDeleteResponse


@handler(ApiKey.OFFSET_DELETE)
async def handle(ctx: RequestContext, request: OffsetDeleteRequest) -> OffsetDeleteResponse:
    groups = ctx.broker.groups
    try:
        response: OffsetDeleteResponse = await groups.call(
            lambda coordinator: coordinator.delete_offsets(request)
        )
    except KafkaError as e:
        response = OffsetDeleteResponse(error_code=e.code)
    return response
