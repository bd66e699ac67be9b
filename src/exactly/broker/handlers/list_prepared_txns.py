"""ListPreparedTxns (key 10003, exactly's two-phase commit extension, docs/two-phase-commit.md): the
Prepared transactions with their tags, and the recorded batch decisions (`exactly txn list-prepared`)."""

from __future__ import annotations

from exactly.broker import guard as authz
from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.errors import ErrorCode
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.list_prepared_txns import (
    BatchDecision,
    ListPreparedTxnsRequest,
    ListPreparedTxnsResponse,
    PreparedTransaction,
    TopicData,
)


@handler(ApiKey.LIST_PREPARED_TXNS)
async def handle(ctx: RequestContext, request: ListPreparedTxnsRequest) -> ListPreparedTxnsResponse:
    if not ctx.broker.config.transaction_two_phase_commit_enable:
        return ListPreparedTxnsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION)
    coordinator = ctx.broker.transactions.coordinator
    transactions: list[PreparedTransaction] = []
    for txn in coordinator.list_prepared(request.query_id):
        if not authz.quietly(ctx, ApiKey.LIST_PREPARED_TXNS, "transactional_id", txn.transactional_id):
            continue
        tag = txn.prepared
        assert tag is not None
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(txn.partitions):
            by_topic.setdefault(topic, []).append(partition)
        transactions.append(
            PreparedTransaction(
                txn.transactional_id,
                txn.producer_id,
                txn.producer_epoch,
                tag.query_id,
                tag.batch_id,
                tag.partition,
                tag.prepared_timestamp_ms,
                [TopicData(topic, ids) for topic, ids in by_topic.items()],
            )
        )
    decisions = [
        BatchDecision(d.query_id, d.batch_id, list(d.winners), d.timestamp_ms)
        for d in coordinator.decisions.all()
        if request.query_id is None or d.query_id == request.query_id
    ]
    return ListPreparedTxnsResponse(transactions=transactions, decisions=decisions)
