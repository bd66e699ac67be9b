"""JoinGroup (key 11): join a classic group; answered when the rebalance completes (or at once with
MEMBER_ID_REQUIRED, v4+, or an error). The membership logic is the group coordinator's."""

from __future__ import annotations

from exactly.broker import guard as authz
from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.errors import ErrorCode, KafkaError
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.join_group import JoinGroupRequest, JoinGroupResponse


@handler(ApiKey.JOIN_GROUP)
async def handle(ctx: RequestContext, request: JoinGroupRequest) -> JoinGroupResponse:
    groups = ctx.broker.groups
    if not authz.allowed(ctx, ApiKey.JOIN_GROUP, "group", request.group_id):
        code = ErrorCode.GROUP_AUTHORIZATION_FAILED
        response = JoinGroupResponse(error_code=code, member_id=request.member_id, protocol_name=None)
        if ctx.version < 7:
            response.protocol_name = ""
        return response
    client = groups.client(ctx)
    try:
        response = await groups.call(
            request.group_id, lambda coordinator: coordinator.join_group(client, request)
        )
    except KafkaError as e:
        response = JoinGroupResponse(error_code=e.code, member_id=request.member_id, protocol_name=None)
    if ctx.version < 7 and response.protocol_name is None:
        response.protocol_name = ""  # not nullable before v7
    return response
