"""IncrementalAlterConfigs (key 44): SET / DELETE / APPEND / SUBTRACT on a topic's config overrides."""

from __future__ import annotations

from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.errors import ErrorCode, KafkaError
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.incremental_alter_configs import (
    AlterConfigsResource,
    AlterConfigsResourceResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)

RESOURCE_TOPIC = 2
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


@handler(ApiKey.INCREMENTAL_ALTER_CONFIGS)
async def handle(
    ctx: RequestContext, request: IncrementalAlterConfigsRequest
) -> IncrementalAlterConfigsResponse:
    responses = []
    for resource in request.resources:
        try:
            _alter(ctx, resource, request.validate_only)
        except KafkaError as e:
            responses.append(
                AlterConfigsResourceResponse(
                    e.code, e.message, resource.resource_type, resource.resource_name
                )
            )
            continue
        responses.append(
            AlterConfigsResourceResponse(ErrorCode.NONE, None, resource.resource_type, resource.resource_name)
        )
    return IncrementalAlterConfigsResponse(responses=responses)


def _alter(ctx: RequestContext, resource: AlterConfigsResource, validate_only: bool) -> None:
    broker = ctx.broker
    if resource.resource_type != RESOURCE_TOPIC:
        raise KafkaError(
            ErrorCode.INVALID_REQUEST, "only topic configs can be altered; broker configs are static"
        )
    info = broker.metadata.topics.get(resource.resource_name)
    if info is None:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {resource.resource_name!r}")
    configs = dict(info.configs)
    effective = broker.validate_topic_configs(configs).to_properties()
    for change in resource.configs:
        op = change.config_operation
        if op == SET:
            if change.value is None:
                raise KafkaError(ErrorCode.INVALID_CONFIG, f"null value for {change.name}")
            configs[change.name] = change.value
        elif op == DELETE:
            configs.pop(change.name, None)
        elif op in (APPEND, SUBTRACT):
            if change.name != "cleanup.policy":
                raise KafkaError(ErrorCode.INVALID_CONFIG, f"{change.name} is not a list config")
            current = [v for v in configs.get(change.name, effective.get(change.name, "")).split(",") if v]
            values = [v.strip() for v in (change.value or "").split(",") if v.strip()]
            if op == APPEND:
                current += [v for v in values if v not in current]
            else:
                current = [v for v in current if v not in values]
            configs[change.name] = ",".join(current)
        else:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"unknown config operation {op}")
    broker.validate_topic_configs(configs)
    if not validate_only:
        broker.alter_topic_configs(resource.resource_name, configs)
