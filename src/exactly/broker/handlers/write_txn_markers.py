"""WriteTxnMarkers (key 27, v1): append COMMIT/ABORT markers to partitions of this broker.

The transaction coordinator writes the markers of partitions it leads through the same
`TransactionService.write_markers` in-process, and sends this request to the leaders of the others (its
marker channel, exactly.broker.marker_channel); it is also how an operator ends a hanging transaction
(`exactly txn abort`, `kafka-transactions.sh abort`, KIP-664). Per-partition errors: the partition does
not exist (UNKNOWN_TOPIC_OR_PARTITION), this broker does not lead it (NOT_LEADER_OR_FOLLOWER), the ISR
is below min.insync.replicas (NOT_ENOUGH_REPLICAS) or did not catch up in time (REQUEST_TIMED_OUT), a
newer producer epoch was seen (INVALID_PRODUCER_EPOCH), a newer coordinator epoch was seen
(TRANSACTION_COORDINATOR_FENCED). Answered once the markers are durable and, on a replicated partition,
committed in its ISR (acks=all).
"""

from __future__ import annotations

import asyncio

from exactly.broker import guard as authz
from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.broker.marker_channel import Markers
from exactly.errors import ErrorCode
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.write_txn_markers import (
    WritableTxnMarkerPartitionResult,
    WritableTxnMarkerResult,
    WritableTxnMarkerTopicResult,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)


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
    answers = await asyncio.gather(
        *(
            service.write_markers(
                Markers(
                    marker.producer_id,
                    marker.producer_epoch,
                    marker.transaction_result,
                    marker.coordinator_epoch,
                ),
                [(t.name, i) for t in marker.topics for i in t.partition_indexes],
            )
            for marker in request.markers
        )
    )
    return WriteTxnMarkersResponse(
        [
            WritableTxnMarkerResult(
                marker.producer_id,
                [
                    WritableTxnMarkerTopicResult(
                        t.name,
                        [
                            WritableTxnMarkerPartitionResult(i, codes[(t.name, i)])
                            for i in t.partition_indexes
                        ],
                    )
                    for t in marker.topics
                ],
            )
            for marker, codes in zip(request.markers, answers, strict=True)
        ]
    )
