"""OffsetForLeaderEpoch (key 23). One broker, leader epoch 0 forever: the end offset of epoch 0 is the
log end offset; a client asking about a later epoch is told the partition is at epoch 0."""

from __future__ import annotations

from exactly.broker import guard as authz
from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.errors import ErrorCode
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.offset_for_leader_epoch import (
    EpochEndOffset,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderTopicResult,
)

LEADER_EPOCH = 0


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
            log = ctx.broker.replicas.partition(topic.topic, p.partition)
            if log is None:
                partitions.append(EpochEndOffset(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, p.partition))
            elif p.current_leader_epoch > LEADER_EPOCH:
                partitions.append(EpochEndOffset(ErrorCode.UNKNOWN_LEADER_EPOCH, p.partition))
            elif p.leader_epoch < LEADER_EPOCH:
                partitions.append(EpochEndOffset(ErrorCode.NONE, p.partition, -1, -1))
            else:
                partitions.append(
                    EpochEndOffset(ErrorCode.NONE, p.partition, LEADER_EPOCH, log.log_end_offset)
                )
        topics.append(OffsetForLeaderTopicResult(topic.topic, partitions))
    return OffsetForLeaderEpochResponse(topics=topics)
