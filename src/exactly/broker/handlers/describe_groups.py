"""DescribeGroups (key 15): state, protocol and members of groups (with each member's subscription and
assignment while the group is Stable); an unknown group is described as Dead, and from v6 (KIP-1043) also
gets GROUP_ID_NOT_FOUND, as in Kafka's group coordinator. v3+ can ask for each group's authorized
operations: every operation a group supports (no authorizer), for groups without an error, as Kafka
does."""

from __future__ import annotations

from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.broker.guard import allowed, operations_field
from exactly.errors import ErrorCode, KafkaError
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.describe_groups import (
    DescribedGroup,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
)
from exactly.security.operations import ResourceType

_GROUP_ID_NOT_FOUND_VERSION = 6
_DEAD = "Dead"


@handler(ApiKey.DESCRIBE_GROUPS)
async def handle(ctx: RequestContext, request: DescribeGroupsRequest) -> DescribeGroupsResponse:
    groups = ctx.broker.groups
    described = []
    for group_id in request.groups:
        if not allowed(ctx, ApiKey.DESCRIBE_GROUPS, "group", group_id):
            described.append(DescribedGroup(ErrorCode.GROUP_AUTHORIZATION_FAILED, None, group_id))
            continue
        try:
            described += await groups.read(group_id, lambda c, g=group_id: c.describe_groups([g]))  # type: ignore[misc]
        except KafkaError as e:  # NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS: for this group only
            described.append(DescribedGroup(e.code, None, group_id))
    if ctx.version >= _GROUP_ID_NOT_FOUND_VERSION:
        for group in described:
            if group.error_code == ErrorCode.NONE and group.group_state == _DEAD:  # no such group
                group.error_code = ErrorCode.GROUP_ID_NOT_FOUND
                group.error_message = f"Group {group.group_id} not found."
    if ctx.version >= 3 and request.include_authorized_operations:
        for group in described:
            if group.error_code == ErrorCode.NONE:
                group.authorized_operations = operations_field(ctx, ResourceType.GROUP, group.group_id)
    return DescribeGroupsResponse(groups=described)
