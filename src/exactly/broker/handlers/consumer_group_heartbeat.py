"""ConsumerGroupHeartbeat (key 68, KIP-848): a consumer-protocol member joins, heartbeats, reconciles
and leaves; the coordinator assigns (`exactly.group.consumer`). Answered once its records are durable.

Authorization as Kafka's: GROUP READ (else GROUP_AUTHORIZATION_FAILED), then TOPIC DESCRIBE on every
subscribed topic named (else TOPIC_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from exactly.broker import guard as authz
from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.errors import ErrorCode, KafkaError
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)


@handler(ApiKey.CONSUMER_GROUP_HEARTBEAT)
async def handle(
    ctx: RequestContext, request: ConsumerGroupHeartbeatRequest
) -> ConsumerGroupHeartbeatResponse:
    groups = ctx.broker.groups
    key = ApiKey.CONSUMER_GROUP_HEARTBEAT
    if not authz.allowed(ctx, key, "group", request.group_id):
        return ConsumerGroupHeartbeatResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    denied = [t for t in request.subscribed_topic_names or [] if not authz.allowed(ctx, key, "topic", t)]
    if denied:
        return ConsumerGroupHeartbeatResponse(
            error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
            error_message=f"Topic authorization failed for topics {sorted(denied)}",
        )
    client = groups.client(ctx)
    try:
        response: ConsumerGroupHeartbeatResponse = await groups.call(
            request.group_id, lambda coordinator: coordinator.consumer_group_heartbeat(client, request)
        )
    except KafkaError as e:  # NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, a failed write
        response = ConsumerGroupHeartbeatResponse(error_code=e.code, error_message=e.message)
    return response
