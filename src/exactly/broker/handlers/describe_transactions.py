"""DescribeTransactions (key 65, KIP-664): state, timeout, start time, producer and partitions of each
transactional id (TRANSACTIONAL_ID_NOT_FOUND for an id the coordinator does not know). A Prepared
transaction (two-phase commit extension) is reported as Ongoing: `TxnState.reported_name`."""

from __future__ import annotations

from exactly.broker import guard as authz
from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.errors import ErrorCode
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.describe_transactions import (
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    TopicData,
    TransactionState,
)


@handler(ApiKey.DESCRIBE_TRANSACTIONS)
async def handle(ctx: RequestContext, request: DescribeTransactionsRequest) -> DescribeTransactionsResponse:
    known = ctx.broker.transactions.coordinator.transactions
    states: list[TransactionState] = []
    for txn_id in request.transactional_ids:
        if not authz.allowed(ctx, ApiKey.DESCRIBE_TRANSACTIONS, "transactional_id", txn_id):
            states.append(TransactionState(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, txn_id))
            continue
        txn = known.get(txn_id)
        if txn is None:
            states.append(TransactionState(ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, txn_id))
            continue
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(txn.partitions):
            by_topic.setdefault(topic, []).append(partition)
        states.append(
            TransactionState(
                ErrorCode.NONE,
                txn_id,
                txn.state.reported_name,  # Prepared is reported as Ongoing
                txn.timeout_ms,
                txn.start_timestamp,
                txn.producer_id,
                txn.producer_epoch,
                [TopicData(topic, partitions) for topic, partitions in by_topic.items()],
            )
        )
    return DescribeTransactionsResponse(transaction_states=states)
