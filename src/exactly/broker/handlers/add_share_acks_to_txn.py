"""AddShareAcksToTxn (key 10004, exactly's transactional share-acknowledgement extension,
docs/share-transactional-acks.md): a share group member's acknowledgements held by a producer's open
transaction, so that the records it consumed and the records the producer wrote from them become
acknowledged and visible together (Pulsar's pending acks).

Sent to the leader of each topic partition (where its share partition lives), like ShareAcknowledge. For
each partition: the share partition's `__share_group_state` partition is added to the producer's
transaction (as AddOffsetsToTxn adds a group's `__consumer_offsets` partition; implicitly, in the same
request), the acknowledgements are checked (every offset ACQUIRED by the member and not already pending:
INVALID_RECORD_STATE otherwise, nothing taken) and appended there as a transactional record of the
producer; the answer waits until it is durable. The transaction's COMMIT marker on that partition applies
them, its ABORT marker (EndTxn abort, `transaction.timeout.ms`, a fenced producer) releases the records.

Top-level errors: UNSUPPORTED_VERSION (`share.transactional.ack.enable` or `group.share.enable` false),
TRANSACTIONAL_ID_AUTHORIZATION_FAILED (WRITE on the transactional id), GROUP_AUTHORIZATION_FAILED (READ on
the group), INVALID_REQUEST (empty ids). Per partition: TOPIC_AUTHORIZATION_FAILED (READ on the topic),
UNKNOWN_TOPIC_ID, NOT_LEADER_OR_FOLLOWER, the transaction coordinator's answer to the add
(PRODUCER_FENCED, INVALID_PRODUCER_EPOCH, INVALID_PRODUCER_ID_MAPPING, INVALID_TXN_STATE,
CONCURRENT_TRANSACTIONS, NOT_COORDINATOR...), INVALID_REQUEST / INVALID_RECORD_STATE from the share
partition, and the append's errors (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE).

The share partition's `__share_group_state` partition must be led by this broker (the topic partition's
leader): the pending acks are appended there as the producer's records and its markers decide them
here. When another broker leads it the partition answers NOT_COORDINATOR with a message saying so,
before the transaction is touched (docs/share-transactional-acks.md, Limits).
"""

from __future__ import annotations

import uuid

from exactly.broker import guard as authz
from exactly.broker.context import RequestContext
from exactly.broker.dispatch import SHARE_TXN_ACK_DISABLED_MESSAGE, handler
from exactly.broker.shares import resolve
from exactly.errors import ErrorCode, KafkaError
from exactly.group.share.partition import AckBatch
from exactly.group.share.records import SHARE_STATE_TOPIC, SharePartitionKey
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.add_share_acks_to_txn import (
    AcknowledgePartition,
    AcknowledgeTopicResponse,
    AddShareAcksToTxnRequest,
    AddShareAcksToTxnResponse,
    PartitionResult,
)

_API = ApiKey.ADD_SHARE_ACKS_TO_TXN


@handler(_API)
async def handle(ctx: RequestContext, request: AddShareAcksToTxnRequest) -> AddShareAcksToTxnResponse:
    config = ctx.broker.config
    if not (config.share_transactional_ack_enable and config.group_share_enable):
        return AddShareAcksToTxnResponse(
            error_code=ErrorCode.UNSUPPORTED_VERSION, error_message=SHARE_TXN_ACK_DISABLED_MESSAGE
        )
    if not authz.allowed(ctx, _API, "transactional_id", request.transactional_id):
        return AddShareAcksToTxnResponse(error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not authz.allowed(ctx, _API, "group", request.group_id):
        return AddShareAcksToTxnResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if not request.transactional_id or not request.group_id or not request.member_id:
        return AddShareAcksToTxnResponse(
            error_code=ErrorCode.INVALID_REQUEST,
            error_message="TransactionalId, GroupId and MemberId are required",
        )
    responses = []
    for topic in request.topics:
        results = []
        for partition in topic.partitions:
            code, message = await _partition(ctx, request, topic.topic_id, partition)
            results.append(PartitionResult(partition.partition_index, code, message))
        responses.append(AcknowledgeTopicResponse(topic.topic_id, results))
    return AddShareAcksToTxnResponse(responses=responses)


async def _partition(
    ctx: RequestContext,
    request: AddShareAcksToTxnRequest,
    topic_id: uuid.UUID,
    partition: AcknowledgePartition,
) -> tuple[ErrorCode, str | None]:
    index = partition.partition_index
    broker = ctx.broker
    name, error = resolve(ctx, _API, topic_id)
    if name is None:
        return error, None
    shares = broker.shares
    key = SharePartitionKey(request.group_id, topic_id, index)
    acks = [
        AckBatch(b.first_offset, b.last_offset, tuple(b.acknowledge_types))
        for b in partition.acknowledgement_batches
    ]
    if not acks:
        return ErrorCode.INVALID_REQUEST, "no acknowledgement batches"
    transactions = broker.transactions
    tid = request.transactional_id
    try:
        await shares.coordinator.runtime.ensure_topic()
        await shares.load(key, name)  # NOT_LEADER_OR_FOLLOWER & co. before touching the transaction
        state_partition = shares.check_pending_path(key)  # NOT_COORDINATOR: the state is led elsewhere
        remote = transactions.verifies_remotely(tid)
        if not remote:
            # AddOffsetsToTxn's step: the state partition joins the transaction (the client's transaction
            # version is kept: a TV2 transaction stays TV2)
            known = transactions.coordinator.transactions.get(tid)
            version = known.client_transaction_version if known is not None else 0
            result = await transactions.run(
                tid,
                lambda c: c.add_partitions(
                    tid,
                    request.producer_id,
                    request.producer_epoch,
                    [(SHARE_STATE_TOPIC, state_partition)],
                    transaction_version=version,
                ),
                ctx.request_name,
            )
            if result.error:
                return result.error, f"the transaction coordinator refused: {result.error.name}"
        guard = await transactions.append_guard(
            tid, SHARE_STATE_TOPIC, state_partition, request.producer_id, request.producer_epoch, add=remote
        )
    except KafkaError as e:
        return e.code, e.message
    code = await shares.add_pending(
        key, name, request.member_id, request.producer_id, request.producer_epoch, acks, guard
    )
    return code, None
