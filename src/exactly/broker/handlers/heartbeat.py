"""Heartbeat (key 12): keeps a member's session alive; REBALANCE_IN_PROGRESS tells it to rejoin."""

from __future__ import annotations

from exactly.broker import guard as authz
from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.errors import ErrorCode, KafkaError
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.heartbeat import HeartbeatRequest, HeartbeatResponse


@handler(ApiKey.HEARTBEAT)
async def handle(ctx: RequestContext, request: HeartbeatRequest) -> HeartbeatResponse:
    groups = ctx.broker.groups
    if not authz.allowed(ctx, ApiKey.HEARTBEAT, "group", request.group_id):
        return HeartbeatResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    client = groups.client(ctx)
    try:
        response: HeartbeatResponse = await groups.call(
            request.group_id, lambda coordinator: coordinator.heartbeat(client, request)
        )
    except KafkaError as e:
        response = HeartbeatResponse(error_code=e.code)
    return response
