"""WriteTxnMarkers (key 27, v1): append COMMIT/ABORT markers to partitions of this broker.

The transaction coordinator writes its markers through the same `TransactionService.write_marker`
(in-process on a single node); this API is how an operator ends a hanging transaction
(`exactly txn abort`, `kafka-transactions.sh abort`, KIP-664). Per-partition errors: the partition does
not exist (UNKNOWN_TOPIC_OR_PARTITION), a newer producer epoch was seen (INVALID_PRODUCER_EPOCH), a newer
coordinator epoch was seen (TRANSACTION_COORDINATOR_FENCED). Answered once the markers are durable.
"""

from __future__ import annotations

from exactly.broker import guard as authz
from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.errors import ErrorCode, KafkaError
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.write_txn_markers import (
    WritableTxnMarkerPartitionResult,
    WritableTxnMarkerResult,
    WritableTxnMarkerTopicResult,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from exactly.replication.partition import Partition


@handler(ApiKey.WRITE_TXN_MARKERS)
async def handle(ctx: RequestContext, request: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
    service = ctx.broker.transactions
    if not authz.allowed(ctx, ApiKey.WRITE_TXN_MARKERS, "cluster"):
        code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return WriteTxnMarkersResponse(
            [
                WritableTxnMarkerResult(
                    m.producer_id,
                    [
                        WritableTxnMarkerTopicResult(
                            t.name, [WritableTxnMarkerPartitionResult(i, code) for i in t.partition_indexes]
                        )
                        for t in m.topics
                    ],
                )
                for m in request.markers
            ]
        )
    durable: list[tuple[Partition, int, WritableTxnMarkerPartitionResult]] = []
    results: list[WritableTxnMarkerResult] = []
    for marker in request.markers:
        topics: list[WritableTxnMarkerTopicResult] = []
        for topic in marker.topics:
            partitions: list[WritableTxnMarkerPartitionResult] = []
            for index in topic.partition_indexes:
                code = ErrorCode.NONE
                try:
                    written = service.write_marker(
                        topic.name,
                        index,
                        marker.producer_id,
                        marker.producer_epoch,
                        marker.transaction_result,
                        marker.coordinator_epoch,
                    )
                except KafkaError as e:
                    code = e.code
                partitions.append(WritableTxnMarkerPartitionResult(index, code))
                if code == ErrorCode.NONE and written.durable_offset is not None:
                    durable.append((written.partition, written.durable_offset, partitions[-1]))
            topics.append(WritableTxnMarkerTopicResult(topic.name, partitions))
        results.append(WritableTxnMarkerResult(marker.producer_id, topics))
    if durable:
        failures = await ctx.broker.replicas.wait_durable_each([(p, end) for p, end, _ in durable])
        for (_, _, where), failure in zip(durable, failures, strict=True):
            if failure is not None:
                where.error_code = failure.code
    return WriteTxnMarkersResponse(results)
