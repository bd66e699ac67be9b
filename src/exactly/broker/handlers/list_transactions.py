"""ListTransactions (key 66, v0-2, KIP-664): the transactional ids this coordinator knows, filtered by
state names, producer ids, (v1) how long the transaction has been running and (v2, KIP-1152) a regular
expression the whole id must match (null or empty: no filter; one that does not compile:
INVALID_REGULAR_EXPRESSION). Unknown state names are returned in `unknown_state_filters` and ignored, as
in Kafka. A Prepared transaction (two-phase commit extension) is reported as Ongoing
(`TxnState.reported_name`) and matches the filters "Ongoing" and "Prepared"."""

from __future__ import annotations

import re

from exactly.broker import guard as authz
from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.errors import ErrorCode
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.list_transactions import (
    ListTransactionsRequest,
    ListTransactionsResponse,
    TransactionState,
)
from exactly.txn import TxnState

_KNOWN = {state.kafka_name for state in TxnState}


@handler(ApiKey.LIST_TRANSACTIONS)
async def handle(ctx: RequestContext, request: ListTransactionsRequest) -> ListTransactionsResponse:
    pattern = None
    if request.transactional_id_pattern:
        try:
            pattern = re.compile(request.transactional_id_pattern)
        except re.error:
            return ListTransactionsResponse(error_code=ErrorCode.INVALID_REGULAR_EXPRESSION)
    unknown = [name for name in request.state_filters if name not in _KNOWN]
    states = [name for name in request.state_filters if name in _KNOWN]
    if unknown and not states:
        return ListTransactionsResponse(unknown_state_filters=unknown)  # nothing can match
    listed = ctx.broker.transactions.coordinator.list_transactions(
        states, request.producer_id_filters, request.duration_filter
    )
    return ListTransactionsResponse(
        unknown_state_filters=unknown,
        transaction_states=[
            TransactionState(t.transactional_id, t.producer_id, t.state.reported_name)
            for t in listed
            if (pattern is None or pattern.fullmatch(t.transactional_id))
            and authz.quietly(ctx, ApiKey.LIST_TRANSACTIONS, "transactional_id", t.transactional_id)
        ],
    )
