"""SyncGroup (key 14): the leader sends the assignment, every member receives its own; followers wait
until the leader's assignment is stored in `__consumer_offsets`."""

from __future__ import annotations

from exactly.broker import guard as authz
from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.errors import ErrorCode, KafkaError
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.sync_group import SyncGroupRequest, SyncGroupResponse


@handler(ApiKey.SYNC_GROUP)
async def handle(ctx: RequestContext, request: SyncGroupRequest) -> SyncGroupResponse:
    groups = ctx.broker.groups
    if not authz.allowed(ctx, ApiKey.SYNC_GROUP, "group", request.group_id):
        return SyncGroupResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    client = groups.client(ctx)
    try:
        response: SyncGroupResponse = await groups.call(
            request.group_id, lambda coordinator: coordinator.sync_group(client, request)
        )
    except KafkaError as e:
        response = SyncGroupResponse(error_code=e.code)
    return response
