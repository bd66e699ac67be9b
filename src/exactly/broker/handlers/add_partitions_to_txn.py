"""AddPartitionsToTxn (key 24, v0-4): add partitions to the producer's transaction.

As Kafka's `KafkaApis.handleAddPartitionsToTxnRequest`: when a partition does not exist it gets
UNKNOWN_TOPIC_OR_PARTITION and every other partition OPERATION_NOT_ATTEMPTED, and nothing is added;
otherwise the coordinator's answer is every partition's. Versions below 2 get INVALID_PRODUCER_EPOCH
for PRODUCER_FENCED.

v4-v5 are what partition leaders send the coordinator (exactly.broker.txn_verifier, Kafka's
AddPartitionsToTxnManager): batches of transactions, answered but not advertised (dispatch.py). They
need CLUSTER_ACTION on the cluster (a broker's principal). An entry with VerifyOnly (KIP-890 part 1) is
answered by `TransactionCoordinator.verify` per partition; one without it is the implicit add of a
transaction version 2 client's Produce v12 / TxnOffsetCommit v5 (KIP-890 part 2; Kafka's
`transactionVersionForAddPartitionsToTxn`: above v3 is TV2) and runs `add_partitions` with transaction
version 2, its record durable before the answer. NOT_COORDINATOR for every partition when this broker
does not lead the id's `__transaction_state` partition.
"""

from __future__ import annotations

import asyncio

from exactly.broker import guard as authz
from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.broker.handlers.end_txn import fenced_code
from exactly.errors import ErrorCode
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnResult,
    AddPartitionsToTxnTopicResult,
    AddPartitionsToTxnTransaction,
)
from exactly.txn.coordinator import TV2


@handler(ApiKey.ADD_PARTITIONS_TO_TXN)
async def handle(ctx: RequestContext, request: AddPartitionsToTxnRequest) -> AddPartitionsToTxnResponse:
    if ctx.version >= _BATCH_VERSION:
        return await _batch(ctx, request)
    wanted = [(t.name, p) for t in request.v3_and_below_topics for p in t.partitions]
    txn_id = request.v3_and_below_transactional_id
    refused = _refused(ctx, txn_id, wanted)
    unknown = {
        (name, partition)
        for name, partition in wanted
        if not ctx.broker.topics.has_partition(name, partition)
    }
    if refused is not None:
        codes = refused
    elif unknown:
        codes = {
            tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else ErrorCode.OPERATION_NOT_ATTEMPTED
            for tp in wanted
        }
    else:
        result = await ctx.broker.transactions.run(
            request.v3_and_below_transactional_id,
            lambda c: c.add_partitions(
                request.v3_and_below_transactional_id,
                request.v3_and_below_producer_id,
                request.v3_and_below_producer_epoch,
                wanted,
            ),
            ctx.request_name,
        )
        error = fenced_code(result.error, ctx.version, 2)
        codes = dict.fromkeys(wanted, error)
    return _response(codes)


def _refused(
    ctx: RequestContext, txn_id: str, wanted: list[tuple[str, int]]
) -> dict[tuple[str, int], ErrorCode] | None:
    """Kafka's authorization: the transactional id (all refused), then each topic (the others are
    OPERATION_NOT_ATTEMPTED, unknown ones UNKNOWN_TOPIC_OR_PARTITION); None when all is allowed."""
    if not authz.allowed(ctx, ApiKey.ADD_PARTITIONS_TO_TXN, "transactional_id", txn_id):
        return dict.fromkeys(wanted, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    denied = {
        name
        for name in {n for n, _ in wanted}
        if not authz.allowed(ctx, ApiKey.ADD_PARTITIONS_TO_TXN, "topic", name)
    }
    if not denied:
        return None
    codes: dict[tuple[str, int], ErrorCode] = {}
    for name, partition in wanted:
        if name in denied:
            codes[(name, partition)] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif not ctx.broker.topics.has_partition(name, partition):
            codes[(name, partition)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        else:
            codes[(name, partition)] = ErrorCode.OPERATION_NOT_ATTEMPTED
    return codes


def _response(codes: dict[tuple[str, int], ErrorCode]) -> AddPartitionsToTxnResponse:
    by_topic: dict[str, list[AddPartitionsToTxnPartitionResult]] = {}
    for (name, partition), code in codes.items():
        by_topic.setdefault(name, []).append(AddPartitionsToTxnPartitionResult(partition, code))
    return AddPartitionsToTxnResponse(
        results_by_topic_v3_and_below=[AddPartitionsToTxnTopicResult(n, r) for n, r in by_topic.items()]
    )


_BATCH_VERSION = 4


async def _batch(ctx: RequestContext, request: AddPartitionsToTxnRequest) -> AddPartitionsToTxnResponse:
    if not authz.allowed(ctx, ApiKey.ADD_PARTITIONS_TO_TXN, "cluster"):
        return AddPartitionsToTxnResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    codes = await asyncio.gather(*(_answer(ctx, txn) for txn in request.transactions))
    return AddPartitionsToTxnResponse(
        results_by_transaction=[
            AddPartitionsToTxnResult(txn.transactional_id, _response(c).results_by_topic_v3_and_below)
            for txn, c in zip(request.transactions, codes, strict=True)
        ]
    )


async def _answer(
    ctx: RequestContext, txn: AddPartitionsToTxnTransaction
) -> dict[tuple[str, int], ErrorCode]:
    service = ctx.broker.transactions
    tid = txn.transactional_id
    wanted = [(t.name, p) for t in txn.topics for p in t.partitions]
    if not service.runtime.coordinates(service.partition_for(tid)):
        return dict.fromkeys(wanted, ErrorCode.NOT_COORDINATOR)
    if txn.verify_only:
        verify = service.coordinator.verify
        return {(name, p): verify(tid, txn.producer_id, txn.producer_epoch, name, p) for name, p in wanted}
    result = await service.run(
        tid,
        lambda c: c.add_partitions(tid, txn.producer_id, txn.producer_epoch, wanted, transaction_version=TV2),
        f"{ctx.request_name} (implicit add)",
    )
    return dict.fromkeys(wanted, result.error)
