"""InitProducerId (key 22) for idempotent producers (no transactional.id): a fresh producer id, epoch 0.

Transactional ids are the transaction coordinator's (a later issue); until then they are refused with
TRANSACTIONAL_ID_AUTHORIZATION_FAILED so that a transactional client fails clearly instead of hanging.
"""

from __future__ import annotations

from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.errors import ErrorCode
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse


@handler(ApiKey.INIT_PRODUCER_ID)
async def handle(ctx: RequestContext, request: InitProducerIdRequest) -> InitProducerIdResponse:
    if request.transactional_id is not None:
        return InitProducerIdResponse(error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    return InitProducerIdResponse(producer_id=ctx.broker.producer_ids.next_id(), producer_epoch=0)
