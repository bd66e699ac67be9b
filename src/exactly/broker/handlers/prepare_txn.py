"""PrepareTxn (key 10000, exactly's two-phase commit extension, docs/two-phase-commit.md): move the id's
Ongoing transaction to Prepared, tagged (query, batch, partition); answered once durable."""

from __future__ import annotations

from exactly.broker import guard as authz
from exactly.broker.context import RequestContext
from exactly.broker.dispatch import DISABLED_MESSAGE, handler
from exactly.errors import ErrorCode
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.prepare_txn import PrepareTxnRequest, PrepareTxnResponse

_MESSAGES = {
    ErrorCode.TRANSACTIONAL_ID_NOT_FOUND: "the transactional id has no transaction here",
    ErrorCode.INVALID_TXN_STATE: "only an Ongoing transaction can be prepared (a producer that wrote "
    "nothing has none; a prepared one only for the same query, batch and partition)",
    ErrorCode.PRODUCER_FENCED: "the batch is already decided: this transaction was aborted",
    ErrorCode.INVALID_PRODUCER_EPOCH: "another producer instance holds the transactional id now: the "
    "named producer's transaction was aborted when it was fenced",
    ErrorCode.INVALID_REQUEST: "needs a transactional id, a query id, batch id >= 0 and partition >= 0",
}


@handler(ApiKey.PREPARE_TXN)
async def handle(ctx: RequestContext, request: PrepareTxnRequest) -> PrepareTxnResponse:
    if not ctx.broker.config.transaction_two_phase_commit_enable:
        return PrepareTxnResponse(error_code=ErrorCode.UNSUPPORTED_VERSION, error_message=DISABLED_MESSAGE)
    if not authz.allowed(ctx, ApiKey.PREPARE_TXN, "transactional_id", request.transactional_id):
        return PrepareTxnResponse(
            error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, error_message=None
        )
    result = await ctx.broker.transactions.prepare(
        request.transactional_id,
        request.query_id,
        request.batch_id,
        request.partition,
        request.producer_id,
        request.producer_epoch,
    )
    return PrepareTxnResponse(error_code=result.error, error_message=_MESSAGES.get(result.error))
