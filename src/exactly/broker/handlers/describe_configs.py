"""DescribeConfigs (key 32): a topic's effective config (overrides and defaults) or the broker's."""

from __future__ import annotations

from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.errors import ErrorCode
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.describe_configs import (
    DescribeConfigsRequest,
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
    DescribeConfigsResult,
)

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
SOURCE_DYNAMIC_TOPIC = 1
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5


@handler(ApiKey.DESCRIBE_CONFIGS)
async def handle(ctx: RequestContext, request: DescribeConfigsRequest) -> DescribeConfigsResponse:
    broker = ctx.broker
    results = []
    for resource in request.resources:
        wanted = set(resource.configuration_keys) if resource.configuration_keys else None
        if resource.resource_type == RESOURCE_TOPIC:
            info = broker.metadata.topics.get(resource.resource_name)
            if info is None:
                results.append(
                    DescribeConfigsResult(
                        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        f"unknown topic {resource.resource_name!r}",
                        resource.resource_type,
                        resource.resource_name,
                    )
                )
                continue
            effective = broker.validate_topic_configs(info.configs).to_properties()
            entries = [
                DescribeConfigsResourceResult(
                    name=name,
                    value=value,
                    config_source=SOURCE_DYNAMIC_TOPIC if name in info.configs else SOURCE_DEFAULT,
                    is_default=name not in info.configs,
                )
                for name, value in sorted(effective.items())
                if wanted is None or name in wanted
            ]
        elif resource.resource_type == RESOURCE_BROKER:
            config = broker.config
            host, port = config.listen
            static = {
                "node.id": str(config.node_id),
                "listeners": f"PLAINTEXT://{host}:{port}",
                "log.dirs": str(config.data_dir),
                "num.partitions": str(config.num_partitions),
                "auto.create.topics.enable": str(config.auto_create_topics).lower(),
                "message.max.bytes": str(config.message_max_bytes),
                "socket.request.max.bytes": str(config.socket_request_max_bytes),
            }
            entries = [
                DescribeConfigsResourceResult(
                    name=name, value=value, config_source=SOURCE_STATIC_BROKER, read_only=True
                )
                for name, value in sorted(static.items())
                if wanted is None or name in wanted
            ]
        else:
            results.append(
                DescribeConfigsResult(
                    ErrorCode.INVALID_REQUEST,
                    f"resource type {resource.resource_type} is not supported",
                    resource.resource_type,
                    resource.resource_name,
                )
            )
            continue
        results.append(
            DescribeConfigsResult(
                ErrorCode.NONE, None, resource.resource_type, resource.resource_name, entries
            )
        )
    return DescribeConfigsResponse(results=results)
