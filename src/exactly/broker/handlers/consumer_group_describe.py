"""ConsumerGroupDescribe (key 69, KIP-848): a consumer group's epochs, assignor and members, each with
its current and target assignment. A classic group, or no group, answers GROUP_ID_NOT_FOUND (clients
then fall back to DescribeGroups). v1 adds each member's type (KIP-1099): always the consumer protocol.
"""

from __future__ import annotations

from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.broker.guard import allowed, operations_field
from exactly.errors import ErrorCode, KafkaError
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.consumer_group_describe import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    DescribedGroup,
)
from exactly.security.operations import ResourceType


@handler(ApiKey.CONSUMER_GROUP_DESCRIBE)
async def handle(ctx: RequestContext, request: ConsumerGroupDescribeRequest) -> ConsumerGroupDescribeResponse:
    groups = ctx.broker.groups
    described: list[DescribedGroup] = []
    for group_id in request.group_ids:
        if not allowed(ctx, ApiKey.CONSUMER_GROUP_DESCRIBE, "group", group_id):
            described.append(DescribedGroup(ErrorCode.GROUP_AUTHORIZATION_FAILED, None, group_id))
            continue
        try:
            described += await groups.read(
                group_id,
                lambda c, g=group_id: c.consumer_group_describe([g]),  # type: ignore[misc]
            )
        except KafkaError as e:  # NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS: for this group only
            described.append(DescribedGroup(e.code, e.message, group_id))
    if request.include_authorized_operations:
        for group in described:
            if group.error_code == ErrorCode.NONE:
                group.authorized_operations = operations_field(ctx, ResourceType.GROUP, group.group_id)
    return ConsumerGroupDescribeResponse(groups=described)
