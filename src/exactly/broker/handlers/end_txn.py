"""EndTxn (key 26): commit or abort the open transaction.

Answered once PrepareCommit/PrepareAbort is durable in `__transaction_state`; the markers and
CompleteCommit/CompleteAbort follow (broker/transactions.py). Versions below 2 get INVALID_PRODUCER_EPOCH
for PRODUCER_FENCED, as in Kafka.

v5 is transaction version 2 (KIP-890 part 2; Kafka's `transactionVersionForEndTxn`: the request version
decides, not the finalized feature): the coordinator bumps the epoch at every commit/abort, and the
response carries the producer id and epoch the client goes on with (a new producer id at epoch 0 when
the epoch was exhausted; -1/-1 with an error). A retry of the EndTxn that just ended the transaction
gets the same answer; a stale one PRODUCER_FENCED (exactly.txn.coordinator).
"""

from __future__ import annotations

from exactly.broker import guard as authz
from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.errors import ErrorCode
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.end_txn import EndTxnRequest, EndTxnResponse
from exactly.txn.coordinator import TV2

TV2_VERSION = 5  # EndTxn v5+: transaction version 2


@handler(ApiKey.END_TXN)
async def handle(ctx: RequestContext, request: EndTxnRequest) -> EndTxnResponse:
    if not authz.allowed(ctx, ApiKey.END_TXN, "transactional_id", request.transactional_id):
        return EndTxnResponse(error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    version = TV2 if ctx.version >= TV2_VERSION else 0
    result = await ctx.broker.transactions.run(
        request.transactional_id,
        lambda c: c.end_transaction(
            request.transactional_id,
            request.producer_id,
            request.producer_epoch,
            request.committed,
            transaction_version=version,
        ),
        f"{ctx.request_name} {'commit' if request.committed else 'abort'}",
        answered_first=True,  # the markers follow the answer
    )
    if result.error or version < TV2:
        return EndTxnResponse(error_code=fenced_code(result.error, ctx.version, 2))
    return EndTxnResponse(producer_id=result.producer_id, producer_epoch=result.producer_epoch)


def fenced_code(error: ErrorCode, version: int, first_version_with_fenced: int) -> ErrorCode:
    """Older request versions know PRODUCER_FENCED as INVALID_PRODUCER_EPOCH."""
    if error == ErrorCode.PRODUCER_FENCED and version < first_version_with_fenced:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return error
