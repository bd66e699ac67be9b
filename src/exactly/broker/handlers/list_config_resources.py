"""ListConfigResources (key 74, KIP-1142, Kafka 4.1): the config resources a cluster has, for
`kafka-configs.sh --describe --entity-type ... ` without a name and admin clients' `listConfigResources`.

v1 asks for resource types (none: every type the broker supports): every topic (TOPIC 2), every live
broker id (BROKER 4 and BROKER_LOGGER 8), the groups with configs (GROUP 32) and the client-metrics
subscriptions (CLIENT_METRICS 16) - exactly has neither of the last two, so they list nothing. A type the
broker does not support makes the whole answer UNSUPPORTED_VERSION. v0 is KIP-714's
ListClientMetricsResources under its new name: client-metrics resources only. Needs DESCRIBE_CONFIGS on
the cluster.
"""

from __future__ import annotations

from exactly.broker import guard as authz
from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.errors import ErrorCode
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.list_config_resources import (
    ConfigResource,
    ListConfigResourcesRequest,
    ListConfigResourcesResponse,
)

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
SUPPORTED = (TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP)


def config_resources(types: list[int], topics: list[str], brokers: list[int]) -> list[ConfigResource] | None:
    """The resources of `types` (empty: all supported), by type then name; None if a type is unknown."""
    wanted = set(types or SUPPORTED)
    if not wanted <= set(SUPPORTED):
        return None
    names: dict[int, list[str]] = {
        TOPIC: sorted(topics),
        BROKER: [str(b) for b in sorted(brokers)],
        BROKER_LOGGER: [str(b) for b in sorted(brokers)],
        CLIENT_METRICS: [],
        GROUP: [],
    }
    return [ConfigResource(name, kind) for kind in SUPPORTED if kind in wanted for name in names[kind]]


@handler(ApiKey.LIST_CONFIG_RESOURCES)
async def handle(ctx: RequestContext, request: ListConfigResourcesRequest) -> ListConfigResourcesResponse:
    if not authz.allowed(ctx, ApiKey.LIST_CONFIG_RESOURCES, "cluster"):
        return ListConfigResourcesResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    broker = ctx.broker
    types = request.resource_types if ctx.version >= 1 else [CLIENT_METRICS]
    brokers = [broker.config.node_id]
    if broker.cluster is not None:
        listener = (ctx.listener or broker.config.listeners[0]).name
        brokers = [b for b, *_ in broker.cluster.cache.live_brokers(listener)]
    found = config_resources(types, list(broker.metadata.topics), brokers)
    if found is None:
        return ListConfigResourcesResponse(error_code=ErrorCode.UNSUPPORTED_VERSION)
    return ListConfigResourcesResponse(config_resources=found)
