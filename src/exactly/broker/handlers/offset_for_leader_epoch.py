"""OffsetForLeaderEpoch (key 23), as Kafka's leader (`Partition.lastOffsetForLeaderEpoch`): a
`current_leader_epoch` (-1: no check) above the partition's leader epoch is UNKNOWN_LEADER_EPOCH, below it
FENCED_LEADER_EPOCH; otherwise (epoch, end offset) from the log's leader-epoch cache
(`PartitionLog.end_offset_for_epoch`): the current epoch ends at the log end offset, an unknown later
epoch is (-1, -1). One broker's partitions stay at epoch 0, so epoch 0 gives the log end offset."""

from __future__ import annotations

from exactly.broker import guard as authz
from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.errors import ErrorCode, KafkaError
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.offset_for_leader_epoch import (
    EpochEndOffset,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderTopicResult,
)


@handler(ApiKey.OFFSET_FOR_LEADER_EPOCH)
async def handle(ctx: RequestContext, request: OffsetForLeaderEpochRequest) -> OffsetForLeaderEpochResponse:
    topics = []
    for topic in request.topics:
        partitions = []
        if not authz.allowed(ctx, ApiKey.OFFSET_FOR_LEADER_EPOCH, "topic", topic.topic):
            code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            partitions = [EpochEndOffset(code, p.partition) for p in topic.partitions]
            topics.append(OffsetForLeaderTopicResult(topic.topic, partitions))
            continue
        for p in topic.partitions:
            partition = ctx.broker.replicas.partition(topic.topic, p.partition)
            if partition is None:
                partitions.append(EpochEndOffset(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, p.partition))
            elif (code := partition.check_leader_epoch(p.current_leader_epoch)) != ErrorCode.NONE:
                partitions.append(EpochEndOffset(code, p.partition))
            else:
                try:
                    epoch, end_offset = partition.end_offset_for_epoch(p.leader_epoch)
                except KafkaError as e:
                    partitions.append(EpochEndOffset(e.code, p.partition))
                    continue
                partitions.append(EpochEndOffset(ErrorCode.NONE, p.partition, epoch, end_offset))
        topics.append(OffsetForLeaderTopicResult(topic.topic, partitions))
    return OffsetForLeaderEpochResponse(topics=topics)
