"""TxnOffsetCommit (key 28, v0-4): offsets committed inside a transaction (`send_offsets_to_transaction`).

The group coordinator validates the commit (KIP-447 generation/member fencing for v3) and appends the
offsets to the group's `__consumer_offsets` partition as a transactional batch of the producer, after
the transaction coordinator confirms that partition is in the producer's transaction (AddOffsetsToTxn
came first; KIP-890 part 1). The offsets stay pending — invisible to OffsetFetch, UNSTABLE_OFFSET_COMMIT
for `require_stable` — until the transaction's COMMIT marker reaches the partition; ABORT drops them.

v4 (KIP-890) knows TRANSACTION_ABORTABLE: the verification of a group partition that is not in the
transaction answers it instead of INVALID_TXN_STATE. v5 is transaction version 2 (KIP-890 part 2): the
group's `__consumer_offsets` partition is added to the transaction implicitly (no AddOffsetsToTxn round
trip), durably, before the offsets are appended (`TransactionService.append_guard(add=True)`).
"""

from __future__ import annotations

import dataclasses

from exactly.broker import guard as authz
from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.broker.groups import OFFSETS_TOPIC
from exactly.errors import ErrorCode, KafkaError
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestTopic,
    TxnOffsetCommitResponse,
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)

_TRANSACTION_ABORTABLE_VERSION = 4
_IMPLICIT_ADD_VERSION = 5


@handler(ApiKey.TXN_OFFSET_COMMIT)
async def handle(ctx: RequestContext, request: TxnOffsetCommitRequest) -> TxnOffsetCommitResponse:
    refused = _refused(ctx, request)
    if refused is not None:
        return refused
    denied = {
        t.name for t in request.topics if not authz.allowed(ctx, ApiKey.TXN_OFFSET_COMMIT, "topic", t.name)
    }
    if denied:
        allowed_part = dataclasses.replace(
            request, topics=[t for t in request.topics if t.name not in denied]
        )
        response = await _commit(ctx, allowed_part) if allowed_part.topics else TxnOffsetCommitResponse()
        response.topics += _errors(
            [t for t in request.topics if t.name in denied], ErrorCode.TOPIC_AUTHORIZATION_FAILED
        ).topics
        return response
    return await _commit(ctx, request)


def _refused(ctx: RequestContext, request: TxnOffsetCommitRequest) -> TxnOffsetCommitResponse | None:
    if not authz.allowed(ctx, ApiKey.TXN_OFFSET_COMMIT, "transactional_id", request.transactional_id):
        return _errors(request.topics, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not authz.allowed(ctx, ApiKey.TXN_OFFSET_COMMIT, "group", request.group_id):
        return _errors(request.topics, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    return None


def _errors(topics: list[TxnOffsetCommitRequestTopic], code: ErrorCode) -> TxnOffsetCommitResponse:
    return TxnOffsetCommitResponse(
        topics=[
            TxnOffsetCommitResponseTopic(
                t.name, [TxnOffsetCommitResponsePartition(p.partition_index, code) for p in t.partitions]
            )
            for t in topics
        ]
    )


async def _commit(ctx: RequestContext, request: TxnOffsetCommitRequest) -> TxnOffsetCommitResponse:
    broker = ctx.broker
    groups = broker.groups
    try:
        await groups.check_coordinator(request.group_id)  # as Kafka: the group's status first
        # in a cluster the transaction coordinator may be another broker: asked before the append
        guard = await broker.transactions.append_guard(
            request.transactional_id,
            OFFSETS_TOPIC,
            groups.coordinator.partition_for(request.group_id),
            request.producer_id,
            request.producer_epoch,
            transaction_abortable=ctx.version >= _TRANSACTION_ABORTABLE_VERSION,
            add=ctx.version >= _IMPLICIT_ADD_VERSION,
        )
        # `call` appends the accepted offsets as one transactional batch of the producer, which runs
        # `guard` if it is the producer's first batch of this transaction on the partition.
        response: TxnOffsetCommitResponse = await groups.call(
            request.group_id,
            lambda coordinator: coordinator.commit_transactional_offsets(
                request, broker.topics.has_partition
            ),
            guard,
        )
    except KafkaError as e:
        response = TxnOffsetCommitResponse(
            topics=[
                TxnOffsetCommitResponseTopic(
                    t.name,
                    [TxnOffsetCommitResponsePartition(p.partition_index, e.code) for p in t.partitions],
                )
                for t in request.topics
            ]
        )
    return response
