"""DescribeProducers (key 61, KIP-664): the active producers of partitions, with their open transaction's
first offset — what `kafka-transactions.sh find-hanging` and `abort` start from."""

from __future__ import annotations

from exactly.broker import guard as authz
from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.errors import ErrorCode
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.describe_producers import (
    DescribeProducersRequest,
    DescribeProducersResponse,
    PartitionResponse,
    ProducerState,
    TopicResponse,
)


@handler(ApiKey.DESCRIBE_PRODUCERS)
async def handle(ctx: RequestContext, request: DescribeProducersRequest) -> DescribeProducersResponse:
    topics: list[TopicResponse] = []
    for topic in request.topics:
        partitions: list[PartitionResponse] = []
        if not authz.allowed(ctx, ApiKey.DESCRIBE_PRODUCERS, "topic", topic.name):
            code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            partitions = [PartitionResponse(i, code) for i in topic.partition_indexes]
            topics.append(TopicResponse(topic.name, partitions))
            continue
        for index in topic.partition_indexes:
            partition = ctx.broker.replicas.partition(topic.name, index)
            if partition is None:
                partitions.append(PartitionResponse(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            producers = [
                ProducerState(
                    p.producer_id,
                    p.producer_epoch,
                    p.last_sequence,
                    p.last_timestamp,
                    p.coordinator_epoch,
                    p.current_txn_start_offset,
                )
                for p in partition.producer_infos()
            ]
            partitions.append(PartitionResponse(index, ErrorCode.NONE, None, producers))
        topics.append(TopicResponse(topic.name, partitions))
    return DescribeProducersResponse(topics=topics)
