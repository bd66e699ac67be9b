"""LeaveGroup (key 13): members leave (v3+ a batch, e.g. an admin removing static members by
group.instance.id); the group rebalances without them."""

from __future__ import annotations

from exactly.broker import guard as authz
from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.errors import ErrorCode, KafkaError
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.leave_group import LeaveGroupRequest, LeaveGroupResponse, MemberIdentity


@handler(ApiKey.LEAVE_GROUP)
async def handle(ctx: RequestContext, request: LeaveGroupRequest) -> LeaveGroupResponse:
    groups = ctx.broker.groups
    if not authz.allowed(ctx, ApiKey.LEAVE_GROUP, "group", request.group_id):
        return LeaveGroupResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    client = groups.client(ctx)
    members = request.members if ctx.version >= 3 else [MemberIdentity(request.member_id, None)]
    try:
        response: LeaveGroupResponse = await groups.call(
            request.group_id, lambda coordinator: coordinator.leave_group(client, request.group_id, members)
        )
    except KafkaError as e:
        response = LeaveGroupResponse(error_code=e.code)
    if ctx.version < 3:  # one member, its error is the response's
        code = response.error_code or (response.members[0].error_code if response.members else ErrorCode.NONE)
        return LeaveGroupResponse(error_code=code)
    return response
