"""Produce (key 0): validate and append each partition's batches, then wait for the durability asked for.

acks=0 gets no response at all; acks=1 is answered once the batches are appended; acks=-1 (all) once they
are durable under the log's flush policy (by default fsynced, with group commit). Errors are per
partition, as in Kafka; a failure in one partition does not stop the others.
"""

from __future__ import annotations

from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.errors import CorruptRecordError, ErrorCode, KafkaError
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.produce import (
    PartitionProduceResponse,
    ProduceRequest,
    ProduceResponse,
    TopicProduceResponse,
)
from exactly.storage.log import PartitionLog


@handler(ApiKey.PRODUCE)
async def handle(ctx: RequestContext, request: ProduceRequest) -> ProduceResponse | None:
    broker = ctx.broker
    acks = request.acks
    durable: list[tuple[PartitionLog, int]] = []
    topics: list[TopicProduceResponse] = []
    for topic in request.topic_data:
        partitions: list[PartitionProduceResponse] = []
        info = broker.metadata.topics.get(topic.name)
        for data in topic.partition_data:
            if acks not in (0, 1, -1):
                partitions.append(PartitionProduceResponse(data.index, ErrorCode.INVALID_REQUIRED_ACKS))
                continue
            if info is not None and info.internal:
                partitions.append(PartitionProduceResponse(data.index, ErrorCode.INVALID_TOPIC_EXCEPTION))
                continue
            log = broker.log(topic.name, data.index)
            if log is None:
                partitions.append(PartitionProduceResponse(data.index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            if data.records is None or len(data.records) == 0:
                partitions.append(PartitionProduceResponse(data.index, ErrorCode.INVALID_RECORD))
                continue
            try:
                appended = log.append_as_leader(data.records, required_acks=acks)
            except (KafkaError, CorruptRecordError) as e:
                partitions.append(
                    PartitionProduceResponse(data.index, e.code, -1, -1, -1, error_message=str(e))
                )
                continue
            if not appended.duplicate:
                broker.data_appended()
            if acks == -1 and appended.flush_required:
                durable.append((log, appended.last_offset + 1))
            partitions.append(
                PartitionProduceResponse(
                    data.index,
                    ErrorCode.NONE,
                    appended.first_offset,
                    appended.log_append_time,
                    appended.log_start_offset,
                )
            )
        topics.append(TopicProduceResponse(topic.name, topic.topic_id, partitions))
    if durable:
        await broker.flusher.wait_durable(durable)
    if acks == 0:
        return None
    return ProduceResponse(topics)
