"""AbortBatch (key 10002, exactly's two-phase commit extension, docs/two-phase-commit.md): abort the
undecided Prepared work of a batch (BatchId -1: of every undecided batch of the query). A decided batch
stays decided (roll forward): Decided and its winners are answered, nothing is aborted."""

from __future__ import annotations

from exactly.broker import guard as authz
from exactly.broker.context import RequestContext
from exactly.broker.dispatch import DISABLED_MESSAGE, handler
from exactly.errors import ErrorCode
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.abort_batch import AbortBatchRequest, AbortBatchResponse


@handler(ApiKey.ABORT_BATCH)
async def handle(ctx: RequestContext, request: AbortBatchRequest) -> AbortBatchResponse:
    if not ctx.broker.config.transaction_two_phase_commit_enable:
        return AbortBatchResponse(error_code=ErrorCode.UNSUPPORTED_VERSION, error_message=DISABLED_MESSAGE)
    if authz.batch_refused(ctx, ApiKey.ABORT_BATCH, request.query_id, request.batch_id, []):
        code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        return AbortBatchResponse(error_code=code, error_message=None, decided=False, winners=[], aborted=[])
    result, aborted = await ctx.broker.transactions.abort_batch(request.query_id, request.batch_id)
    decided = result.decision is not None
    return AbortBatchResponse(
        error_code=result.error,
        error_message=result.message,
        decided=decided,
        winners=list(result.decision.winners) if result.decision is not None else [],
        aborted=aborted,
    )
