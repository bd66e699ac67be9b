"""ApiVersions (key 18): the API ranges this broker serves."""

from __future__ import annotations

from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse


@handler(ApiKey.API_VERSIONS)
async def handle(ctx: RequestContext, request: ApiVersionsRequest) -> ApiVersionsResponse:
    from exactly.broker.server import api_versions_body

    return api_versions_body(two_phase_commit=ctx.broker.config.transaction_two_phase_commit_enable)
