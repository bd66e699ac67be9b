"""DeleteGroups (key 42): delete empty groups with their committed offsets (tombstones in
`__consumer_offsets`); NON_EMPTY_GROUP while a group has members, GROUP_ID_NOT_FOUND for unknown ones."""

from __future__ import annotations

from exactly.broker import guard as authz
from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.errors import ErrorCode, KafkaError
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.delete_groups import (
    DeletableGroupResult,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
)


@handler(ApiKey.DELETE_GROUPS)
async def handle(ctx: RequestContext, request: DeleteGroupsRequest) -> DeleteGroupsResponse:
    groups = ctx.broker.groups
    results: list[DeletableGroupResult] = []
    for group_id in request.groups_names:
        if not authz.allowed(ctx, ApiKey.DELETE_GROUPS, "group", group_id):
            results.append(DeletableGroupResult(group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED))
            continue
        try:
            result: DeletableGroupResult = await groups.call(
                group_id,
                lambda coordinator, g=group_id: coordinator.delete_group(g),  # type: ignore[misc]
            )
        except KafkaError as e:
            result = DeletableGroupResult(group_id, e.code)
        results.append(result)
    return DeleteGroupsResponse(results=results)
