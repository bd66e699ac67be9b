"""DescribeCluster (key 60): one broker alone is the whole cluster and its controller; in a replicated
cluster, every live broker (with its rack) and the controller ZooKeeper names. Asked for the
cluster's authorized operations, it answers every operation a cluster supports (no authorizer)."""

from __future__ import annotations

from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.broker.guard import operations_field
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.describe_cluster import (
    DescribeClusterBroker,
    DescribeClusterRequest,
    DescribeClusterResponse,
)
from exactly.security.operations import OMITTED, ResourceType


@handler(ApiKey.DESCRIBE_CLUSTER)
async def handle(ctx: RequestContext, request: DescribeClusterRequest) -> DescribeClusterResponse:
    broker = ctx.broker
    host, port = ctx.advertised
    node = broker.config.node_id
    brokers = [DescribeClusterBroker(node, host, port, None)]
    controller = node
    if broker.cluster is not None:
        cache = broker.cluster.cache
        listener = (ctx.listener or broker.config.listeners[0]).name
        brokers = [DescribeClusterBroker(*b) for b in cache.live_brokers(listener)]
        controller = cache.controller_id
    return DescribeClusterResponse(
        cluster_id=broker.config.cluster_id,
        controller_id=controller,
        brokers=brokers,
        cluster_authorized_operations=(
            operations_field(ctx, ResourceType.CLUSTER, "kafka-cluster")
            if request.include_cluster_authorized_operations
            else OMITTED
        ),
    )
