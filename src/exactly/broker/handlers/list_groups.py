"""ListGroups (key 16): every group this broker coordinates (v4+ filtered by state, v5+ by type): in a
cluster, the groups of the `__consumer_offsets` partitions it leads; COORDINATOR_LOAD_IN_PROGRESS while
one of them loads."""

from __future__ import annotations

from exactly.broker import guard as authz
from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.errors import KafkaError
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.list_groups import ListGroupsRequest, ListGroupsResponse


@handler(ApiKey.LIST_GROUPS)
async def handle(ctx: RequestContext, request: ListGroupsRequest) -> ListGroupsResponse:
    try:
        listed = ctx.broker.groups.list_groups(request.states_filter, request.types_filter)
    except KafkaError as e:
        return ListGroupsResponse(error_code=e.code, groups=[])
    if not authz.quietly(ctx, ApiKey.LIST_GROUPS, "cluster"):  # else only the groups it may describe
        listed = [g for g in listed if authz.quietly(ctx, ApiKey.LIST_GROUPS, "group", g.group_id)]
    return ListGroupsResponse(groups=listed)
