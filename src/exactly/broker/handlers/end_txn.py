"""EndTxn (key 26): commit or abort the open transaction.

Answered once PrepareCommit/PrepareAbort is durable in `__transaction_state`; the markers and
CompleteCommit/CompleteAbort follow (broker/transactions.py). Versions below 2 get INVALID_PRODUCER_EPOCH
for PRODUCER_FENCED, as in Kafka.
"""

from __future__ import annotations

from exactly.broker import guard as authz
from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.errors import ErrorCode
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.end_txn import EndTxnRequest, EndTxnResponse


@handler(ApiKey.END_TXN)
async def handle(ctx: RequestContext, request: EndTxnRequest) -> EndTxnResponse:
    if not authz.allowed(ctx, ApiKey.END_TXN, "transactional_id", request.transactional_id):
        return EndTxnResponse(error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    result = await ctx.broker.transactions.run(
        request.transactional_id,
        lambda c: c.end_transaction(
            request.transactional_id, request.producer_id, request.producer_epoch, request.committed
        ),
        f"{ctx.request_name} {'commit' if request.committed else 'abort'}",
    )
    return EndTxnResponse(error_code=fenced_code(result.error, ctx.version, 2))


def fenced_code(error: ErrorCode, version: int, first_version_with_fenced: int) -> ErrorCode:
    """Older request versions know PRODUCER_FENCED as INVALID_PRODUCER_EPOCH."""
    if error == ErrorCode.PRODUCER_FENCED and version < first_version_with_fenced:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return error
