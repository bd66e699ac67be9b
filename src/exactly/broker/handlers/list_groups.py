"""ListGroups (key 16): every group this broker coordinates (v4+ filtered by state, v5+ by type)."""

from __future__ import annotations

from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.list_groups import ListGroupsRequest, ListGroupsResponse


@handler(ApiKey.LIST_GROUPS)
async def handle(ctx: RequestContext, request: ListGroupsRequest) -> ListGroupsResponse:
    coordinator = ctx.broker.groups.coordinator
    return ListGroupsResponse(groups=coordinator.list_groups(request.states_filter, request.types_filter))
