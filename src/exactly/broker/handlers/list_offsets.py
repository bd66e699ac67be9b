"""ListOffsets (key 2): earliest (-2), latest (-1; the LSO for read_committed), max timestamp (-3), or the
first offset whose timestamp is at or after the one given.

Tiered-storage specs with no tiered storage, as Kafka answers them for a topic without remote storage:
earliest local (-4, v8+, KIP-405) is the log start offset; latest tiered (-5, v9+, KIP-1005) and earliest
pending upload (-6, v11+, KIP-1023) are "no offset" (-1, epoch -1). v10 adds `timeout_ms`, which only
bounds remote lookups. A spec the request's version does not have gets UNSUPPORTED_VERSION for that
partition (Kafka's `ReplicaManager` check of each spec's first version). A `current_leader_epoch` (v4+,
-1: no check) other than the partition's leader epoch is UNKNOWN_LEADER_EPOCH or FENCED_LEADER_EPOCH.
"""

from __future__ import annotations

from exactly.broker import guard as authz
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
from exactly.storage.log import EARLIEST_TIMESTAMP, Isolation, TimestampAndOffset

_EARLIEST_LOCAL = -4
_LATEST_TIERED = -5
_EARLIEST_PENDING_UPLOAD = -6
# A negative timestamp (a spec) -> the first ListOffsets version that has it.
_SPEC_MIN_VERSION = {-3: 7, _EARLIEST_LOCAL: 8, _LATEST_TIERED: 9, _EARLIEST_PENDING_UPLOAD: 11}
_NO_OFFSET = TimestampAndOffset(-1, -1, -1)


@handler(ApiKey.LIST_OFFSETS)
async def handle(ctx: RequestContext, request: ListOffsetsRequest) -> ListOffsetsResponse:
    isolation = Isolation.READ_COMMITTED if request.isolation_level == 1 else Isolation.READ_UNCOMMITTED
    topics = []
    for topic in request.topics:
        partitions = []
        if not authz.allowed(ctx, ApiKey.LIST_OFFSETS, "topic", topic.name):
            code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            partitions = [ListOffsetsPartitionResponse(p.partition_index, code) for p in topic.partitions]
            topics.append(ListOffsetsTopicResponse(topic.name, partitions))
            continue
        for p in topic.partitions:
            partition = ctx.broker.replicas.partition(topic.name, p.partition_index)
            if partition is None:
                partitions.append(
                    ListOffsetsPartitionResponse(p.partition_index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                )
                continue
            if ctx.version < _SPEC_MIN_VERSION.get(p.timestamp, 0):
                partitions.append(
                    ListOffsetsPartitionResponse(p.partition_index, ErrorCode.UNSUPPORTED_VERSION)
                )
                continue
            epoch_error = partition.check_leader_epoch(p.current_leader_epoch)  # v4+; -1 (no check) before
            if epoch_error != ErrorCode.NONE:
                partitions.append(ListOffsetsPartitionResponse(p.partition_index, epoch_error))
                continue
            try:
                found: TimestampAndOffset | None
                if p.timestamp in (_LATEST_TIERED, _EARLIEST_PENDING_UPLOAD):
                    found = _NO_OFFSET
                else:
                    timestamp = EARLIEST_TIMESTAMP if p.timestamp == _EARLIEST_LOCAL else p.timestamp
                    found = partition.offset_for_timestamp(timestamp, isolation)
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
