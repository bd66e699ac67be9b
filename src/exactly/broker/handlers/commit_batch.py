"""CommitBatch (key 10001, exactly's two-phase commit extension, docs/two-phase-commit.md): decide a
batch once; answered once the decision and its transitions are durable (markers follow). A batch decided
before gets its stored winners with AlreadyDecided."""

from __future__ import annotations

from exactly.broker import guard as authz
from exactly.broker.context import RequestContext
from exactly.broker.dispatch import DISABLED_MESSAGE, handler
from exactly.errors import ErrorCode
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.commit_batch import CommitBatchRequest, CommitBatchResponse


@handler(ApiKey.COMMIT_BATCH)
async def handle(ctx: RequestContext, request: CommitBatchRequest) -> CommitBatchResponse:
    if not ctx.broker.config.transaction_two_phase_commit_enable:
        return CommitBatchResponse(error_code=ErrorCode.UNSUPPORTED_VERSION, error_message=DISABLED_MESSAGE)
    api = ApiKey.COMMIT_BATCH
    if authz.batch_refused(ctx, api, request.query_id, request.batch_id, list(request.winners)):
        code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        return CommitBatchResponse(error_code=code, error_message=None, already_decided=False, winners=[])
    result = await ctx.broker.transactions.commit_batch(request.query_id, request.batch_id, request.winners)
    winners = list(result.decision.winners) if result.decision is not None and not result.error else []
    return CommitBatchResponse(
        error_code=result.error,
        error_message=result.message,
        already_decided=result.already_decided,
        winners=winners,
    )
