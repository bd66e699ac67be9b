"""AddOffsetsToTxn (key 25): add the group's `__consumer_offsets` partition to the transaction, so that
a TxnOffsetCommit may follow and the transaction's markers reach the group's offsets. Versions below 2
get INVALID_PRODUCER_EPOCH for PRODUCER_FENCED."""

from __future__ import annotations

from exactly.broker import guard as authz
from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.broker.groups import OFFSETS_TOPIC
from exactly.broker.handlers.end_txn import fenced_code
from exactly.errors import ErrorCode
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse


@handler(ApiKey.ADD_OFFSETS_TO_TXN)
async def handle(ctx: RequestContext, request: AddOffsetsToTxnRequest) -> AddOffsetsToTxnResponse:
    if not authz.allowed(ctx, ApiKey.ADD_OFFSETS_TO_TXN, "transactional_id", request.transactional_id):
        return AddOffsetsToTxnResponse(error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not authz.allowed(ctx, ApiKey.ADD_OFFSETS_TO_TXN, "group", request.group_id):
        return AddOffsetsToTxnResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if not request.group_id:
        return AddOffsetsToTxnResponse(error_code=ErrorCode.INVALID_GROUP_ID)
    groups = ctx.broker.groups
    await groups.ensure_topic()
    partition = groups.coordinator.partition_for(request.group_id)
    result = await ctx.broker.transactions.run(
        request.transactional_id,
        lambda c: c.add_partitions(
            request.transactional_id,
            request.producer_id,
            request.producer_epoch,
            [(OFFSETS_TOPIC, partition)],
        ),
        ctx.request_name,
    )
    return AddOffsetsToTxnResponse(error_code=fenced_code(result.error, ctx.version, 2))
