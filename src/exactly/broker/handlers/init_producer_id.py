"""InitProducerId (key 22).

Without a transactional.id (idempotent producer): a fresh producer id, epoch 0, from any broker.
With one: the transaction coordinator bumps the epoch (fencing older instances), rotates the producer id
when the epoch is exhausted, aborts a transaction the previous instance left open (answering
CONCURRENT_TRANSACTIONS until the abort is complete), and honours KIP-360's current producer id/epoch.
Versions below 4 get INVALID_PRODUCER_EPOCH where Kafka now says PRODUCER_FENCED (`KafkaApis`).
"""

from __future__ import annotations

from exactly.broker import guard as authz
from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.broker.handlers.end_txn import fenced_code
from exactly.errors import ErrorCode
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse


@handler(ApiKey.INIT_PRODUCER_ID)
async def handle(ctx: RequestContext, request: InitProducerIdRequest) -> InitProducerIdResponse:
    txn_id = request.transactional_id
    if txn_id is None:
        if not authz.quietly(ctx, ApiKey.INIT_PRODUCER_ID, "idempotent") and not authz.by_resource_type(
            ctx, ApiKey.INIT_PRODUCER_ID, "idempotent_topic"
        ):
            authz.allowed(ctx, ApiKey.INIT_PRODUCER_ID, "idempotent")  # the audit line
            error = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            return InitProducerIdResponse(error_code=error, producer_id=-1, producer_epoch=-1)
        return InitProducerIdResponse(producer_id=ctx.broker.next_producer_id(), producer_epoch=0)
    if not authz.allowed(ctx, ApiKey.INIT_PRODUCER_ID, "transactional_id", txn_id):
        error = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        return InitProducerIdResponse(error_code=error, producer_id=-1, producer_epoch=-1)
    result = await ctx.broker.transactions.run(
        txn_id,
        lambda c: c.init_producer_id(
            txn_id, request.transaction_timeout_ms, request.producer_id, request.producer_epoch
        ),
        ctx.request_name,
    )
    if result.error:
        error = fenced_code(result.error, ctx.version, 4)
        return InitProducerIdResponse(error_code=error, producer_id=-1, producer_epoch=-1)
    return InitProducerIdResponse(producer_id=result.producer_id, producer_epoch=result.producer_epoch)
