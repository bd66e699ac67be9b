"""ShareGroupDescribe (key 77, KIP-932): a share group's epochs, assignor and members with their
assignments. No group, or a group of another type, answers GROUP_ID_NOT_FOUND."""

from __future__ import annotations

from exactly.broker.context import RequestContext
from exactly.broker.dispatch import SHARE_DISABLED_MESSAGE, handler
from exactly.broker.guard import allowed, operations_field
from exactly.errors import ErrorCode, KafkaError
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.share_group_describe import (
    DescribedGroup,
    ShareGroupDescribeRequest,
    ShareGroupDescribeResponse,
)
from exactly.security.operations import ResourceType


@handler(ApiKey.SHARE_GROUP_DESCRIBE)
async def handle(ctx: RequestContext, request: ShareGroupDescribeRequest) -> ShareGroupDescribeResponse:
    groups = ctx.broker.groups
    described: list[DescribedGroup] = []
    for group_id in request.group_ids:
        if not ctx.broker.config.group_share_enable:
            described.append(DescribedGroup(ErrorCode.UNSUPPORTED_VERSION, SHARE_DISABLED_MESSAGE, group_id))
            continue
        if not allowed(ctx, ApiKey.SHARE_GROUP_DESCRIBE, "group", group_id):
            described.append(DescribedGroup(ErrorCode.GROUP_AUTHORIZATION_FAILED, None, group_id))
            continue
        try:
            described += await groups.read(
                group_id,
                lambda c, g=group_id: c.share_group_describe([g]),  # type: ignore[misc]
            )
        except KafkaError as e:
            described.append(DescribedGroup(e.code, e.message, group_id))
    if request.include_authorized_operations:
        for group in described:
            if group.error_code == ErrorCode.NONE:
                group.authorized_operations = operations_field(ctx, ResourceType.GROUP, group.group_id)
    return ShareGroupDescribeResponse(groups=described)
