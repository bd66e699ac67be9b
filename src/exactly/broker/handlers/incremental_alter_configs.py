"""IncrementalAlterConfigs (key 44): SET / DELETE / APPEND / SUBTRACT on a topic's overrides or on the
broker's run-time configs (resource name "" = cluster default, or this broker's id); SET / DELETE of the
level of one of the broker's loggers (BROKER_LOGGER, exactly.broker.loggers)."""

from __future__ import annotations

import logging

from exactly.broker import guard as authz
from exactly.broker import loggers
from exactly.broker.config_changes import (
    RESOURCE_BROKER_LOGGER,
    apply_incremental,
    check_unique,
    commit,
    current_configs,
    logger_resource,
    per_resource,
)
from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.incremental_alter_configs import (
    AlterConfigsResource,
    AlterConfigsResourceResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)

log = logging.getLogger(__name__)


@handler(ApiKey.INCREMENTAL_ALTER_CONFIGS)
async def handle(
    ctx: RequestContext, request: IncrementalAlterConfigsRequest
) -> IncrementalAlterConfigsResponse:
    responses = await per_resource(
        request.resources,
        lambda resource: _alter(ctx, resource, request.validate_only),
        AlterConfigsResourceResponse,
    )
    return IncrementalAlterConfigsResponse(responses=responses)


async def _alter(ctx: RequestContext, resource: AlterConfigsResource, validate_only: bool) -> None:
    api = ApiKey.INCREMENTAL_ALTER_CONFIGS
    authz.check_config_resource(ctx, api, resource.resource_type, resource.resource_name)
    check_unique(change.name for change in resource.configs)
    if resource.resource_type == RESOURCE_BROKER_LOGGER:
        logger_resource(ctx.broker, resource.resource_name)
        changes = [(c.name, c.config_operation, c.value) for c in resource.configs]
        loggers.check(changes)
        if not validate_only:
            loggers.apply(changes)
            log.info("logger levels changed by %s: %s", ctx.principal, changes)
        return
    configs = current_configs(ctx.broker, resource.resource_type, resource.resource_name)
    for change in resource.configs:
        apply_incremental(resource.resource_type, configs, change.name, change.config_operation, change.value)
    await commit(ctx.broker, resource.resource_type, resource.resource_name, configs, validate_only)
