"""DescribeCluster (key 60): this one broker is the whole cluster and its controller."""

from __future__ import annotations

from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.describe_cluster import (
    DescribeClusterBroker,
    DescribeClusterRequest,
    DescribeClusterResponse,
)


@handler(ApiKey.DESCRIBE_CLUSTER)
async def handle(ctx: RequestContext, request: DescribeClusterRequest) -> DescribeClusterResponse:
    broker = ctx.broker
    host, port = broker.advertised_host_port
    node = broker.config.node_id
    return DescribeClusterResponse(
        cluster_id=broker.config.cluster_id,
        controller_id=node,
        brokers=[DescribeClusterBroker(node, host, port, None)],
    )
