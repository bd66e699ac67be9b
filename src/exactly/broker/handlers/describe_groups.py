"""DescribeGroups (key 15): state, protocol and members of groups (with each member's subscription and
assignment while the group is Stable); an unknown group is described as Dead."""

from __future__ import annotations

from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.describe_groups import DescribeGroupsRequest, DescribeGroupsResponse


@handler(ApiKey.DESCRIBE_GROUPS)
async def handle(ctx: RequestContext, request: DescribeGroupsRequest) -> DescribeGroupsResponse:
    groups = ctx.broker.groups
    described = []
    for group_id in request.groups:
        described += await groups.read(group_id, lambda c, g=group_id: c.describe_groups([g]))  # type: ignore[misc]
    return DescribeGroupsResponse(groups=described)
