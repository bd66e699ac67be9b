"""AlterConfigs (key 33), the legacy API (aiokafka's and older admin clients): the request's configs
REPLACE every override of the topic (or every run-time config of the broker resource); a config left out
goes back to its default. validate_only checks without changing anything."""

from __future__ import annotations

from exactly.broker import guard as authz
from exactly.broker.config_changes import check_unique, commit, current_configs, per_resource
from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.errors import ErrorCode, KafkaError
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.alter_configs import (
    AlterConfigsRequest,
    AlterConfigsResource,
    AlterConfigsResourceResponse,
    AlterConfigsResponse,
)


@handler(ApiKey.ALTER_CONFIGS)
async def handle(ctx: RequestContext, request: AlterConfigsRequest) -> AlterConfigsResponse:
    responses = await per_resource(
        request.resources,
        lambda resource: _alter(ctx, resource, request.validate_only),
        AlterConfigsResourceResponse,
    )
    return AlterConfigsResponse(responses=responses)


async def _alter(ctx: RequestContext, resource: AlterConfigsResource, validate_only: bool) -> None:
    authz.check_config_resource(ctx, ApiKey.ALTER_CONFIGS, resource.resource_type, resource.resource_name)
    check_unique(config.name for config in resource.configs)
    current_configs(ctx.broker, resource.resource_type, resource.resource_name)  # exists / is ours
    configs: dict[str, str] = {}
    for config in resource.configs:
        if config.value is None:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {config.name}")
        configs[config.name] = config.value
    await commit(ctx.broker, resource.resource_type, resource.resource_name, configs, validate_only)
