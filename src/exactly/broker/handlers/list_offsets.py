"""ListOffsets (key 2): earliest (-2), latest (-1; the LSO for read_committed), max timestamp (-3), or the
first offset whose timestamp is at or after the one given."""

from __future__ import annotations

from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.errors import ErrorCode, KafkaError
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.list_offsets import (
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)
from exactly.storage.log import Isolation


@handler(ApiKey.LIST_OFFSETS)
async def handle(ctx: RequestContext, request: ListOffsetsRequest) -> ListOffsetsResponse:
    isolation = Isolation.READ_COMMITTED if request.isolation_level == 1 else Isolation.READ_UNCOMMITTED
    topics = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            log = ctx.broker.log(topic.name, p.partition_index)
            if log is None:
                partitions.append(
                    ListOffsetsPartitionResponse(p.partition_index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                )
                continue
            try:
                found = log.offset_for_timestamp(p.timestamp, isolation)
            except KafkaError as e:
                partitions.append(ListOffsetsPartitionResponse(p.partition_index, e.code))
                continue
            if found is None:
                partitions.append(
                    ListOffsetsPartitionResponse(p.partition_index, ErrorCode.NONE, [], -1, -1, -1)
                )
            else:
                partitions.append(
                    ListOffsetsPartitionResponse(
                        p.partition_index,
                        ErrorCode.NONE,
                        [],
                        found.timestamp,
                        found.offset,
                        found.leader_epoch,
                    )
                )
        topics.append(ListOffsetsTopicResponse(topic.name, partitions))
    return ListOffsetsResponse(topics=topics)
