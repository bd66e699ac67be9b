"""DeleteRecords (key 21): move a partition's log start offset forward (-1 means the high watermark)."""

from __future__ import annotations

from exactly.broker import guard as authz
from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.errors import ErrorCode, KafkaError
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.delete_records import (
    DeleteRecordsPartitionResult,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteRecordsTopicResult,
)


@handler(ApiKey.DELETE_RECORDS)
async def handle(ctx: RequestContext, request: DeleteRecordsRequest) -> DeleteRecordsResponse:
    topics = []
    for topic in request.topics:
        partitions = []
        if not authz.allowed(ctx, ApiKey.DELETE_RECORDS, "topic", topic.name):
            code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            partitions = [DeleteRecordsPartitionResult(p.partition_index, -1, code) for p in topic.partitions]
            topics.append(DeleteRecordsTopicResult(topic.name, partitions))
            continue
        for p in topic.partitions:
            partition = ctx.broker.replicas.partition(topic.name, p.partition_index)
            if partition is None:
                partitions.append(
                    DeleteRecordsPartitionResult(p.partition_index, -1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                )
                continue
            offset = partition.high_watermark if p.offset == -1 else p.offset
            if offset < 0 or offset > partition.high_watermark:
                partitions.append(
                    DeleteRecordsPartitionResult(p.partition_index, -1, ErrorCode.OFFSET_OUT_OF_RANGE)
                )
                continue
            try:
                low = partition.delete_records_before(offset)
            except KafkaError as e:
                partitions.append(DeleteRecordsPartitionResult(p.partition_index, -1, e.code))
                continue
            partitions.append(DeleteRecordsPartitionResult(p.partition_index, low, ErrorCode.NONE))
        topics.append(DeleteRecordsTopicResult(topic.name, partitions))
    return DeleteRecordsResponse(topics=topics)
