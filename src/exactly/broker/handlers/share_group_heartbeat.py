"""ShareGroupHeartbeat (key 76, KIP-932): a share group member joins, heartbeats and leaves; the
coordinator assigns (`exactly.group.share`). Served only with group.share.enable=true (UNSUPPORTED_VERSION
otherwise: the API is not advertised then).

Authorization as Kafka's: GROUP READ (else GROUP_AUTHORIZATION_FAILED), then TOPIC DESCRIBE on every
subscribed topic named (else TOPIC_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from exactly.broker import guard as authz
from exactly.broker.context import RequestContext
from exactly.broker.dispatch import SHARE_DISABLED_MESSAGE, handler
from exactly.errors import ErrorCode, KafkaError
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.share_group_heartbeat import (
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
)


@handler(ApiKey.SHARE_GROUP_HEARTBEAT)
async def handle(ctx: RequestContext, request: ShareGroupHeartbeatRequest) -> ShareGroupHeartbeatResponse:
    if not ctx.broker.config.group_share_enable:
        return ShareGroupHeartbeatResponse(
            error_code=ErrorCode.UNSUPPORTED_VERSION, error_message=SHARE_DISABLED_MESSAGE
        )
    groups = ctx.broker.groups
    key = ApiKey.SHARE_GROUP_HEARTBEAT
    if not authz.allowed(ctx, key, "group", request.group_id):
        return ShareGroupHeartbeatResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    denied = [t for t in request.subscribed_topic_names or [] if not authz.allowed(ctx, key, "topic", t)]
    if denied:
        return ShareGroupHeartbeatResponse(
            error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
            error_message=f"Topic authorization failed for topics {sorted(denied)}",
        )
    client = groups.client(ctx)
    try:
        response: ShareGroupHeartbeatResponse = await groups.call(
            request.group_id, lambda coordinator: coordinator.share_group_heartbeat(client, request)
        )
    except KafkaError as e:  # NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS
        response = ShareGroupHeartbeatResponse(error_code=e.code, error_message=e.message)
    return response
