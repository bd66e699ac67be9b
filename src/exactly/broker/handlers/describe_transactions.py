"""DescribeTransactions (key 65, KIP-664): state, timeout, start time, producer and partitions of each
transactional id (TRANSACTIONAL_ID_NOT_FOUND for an id the coordinator does not know, NOT_COORDINATOR for
one another broker coordinates or may coordinate by now). A Prepared transaction (two-phase commit
extension) is reported as Ongoing: `TxnState.reported_name`."""

from __future__ import annotations

from exactly.broker import guard as authz
from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.errors import ErrorCode, KafkaError
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.describe_transactions import (
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    TopicData,
    TransactionState,
)


@handler(ApiKey.DESCRIBE_TRANSACTIONS)
async def handle(ctx: RequestContext, request: DescribeTransactionsRequest) -> DescribeTransactionsResponse:
    service = ctx.broker.transactions
    known = service.coordinator.transactions
    states: list[TransactionState] = []
    for txn_id in request.transactional_ids:
        if not authz.allowed(ctx, ApiKey.DESCRIBE_TRANSACTIONS, "transactional_id", txn_id):
            states.append(TransactionState(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, txn_id))
            continue
        try:  # NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS: Kafka's answer for an id coordinated elsewhere
            service.runtime.check_owner(service.partition_for(txn_id))
        except KafkaError as e:
            states.append(TransactionState(e.code, txn_id))
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
