"""Produce (key 0): validate and append each partition's batches, then wait for the durability asked for.

Request-level checks first, as Kafka's `ProduceRequest.validateRecords` does: from v3 a partition's
records are exactly one magic-2 batch (anything else, a truncated batch included, is INVALID_RECORD), and
zstd needs v7+ (UNSUPPORTED_COMPRESSION_TYPE). The log then validates the batch itself (CRC, sizes,
producer state).

acks=0 gets no response at all; acks=1 is answered once the batches are appended; acks=-1 (all) once they
are durable under the log's flush policy (by default fsynced, with group commit). Errors are per
partition, as in Kafka; a failure in one partition does not stop the others. A transactional batch of an
id whose transaction is Prepared (two-phase commit extension) gets INVALID_TXN_STATE: the prepared
transaction is closed to new data.

A client with a `producer_byte_rate` quota has the request's size recorded once it is appended (and
durable); over the quota it gets throttle_time_ms and its connection is muted (broker/throttling.py),
acks=0 included.

In a cluster only the leader appends: a partition this broker follows is NOT_LEADER_OR_FOLLOWER, and so
is one it has no replica of while the cluster has it (UNKNOWN_TOPIC_OR_PARTITION is for partitions the
cluster does not have), as Kafka's `ReplicaManager.getPartitionOrError`.

Versions: v10 adds KIP-951 leader hints: each NOT_LEADER_OR_FOLLOWER partition carries the
`current_leader` (id and epoch) and the response's `node_endpoints` that leader's endpoint on the
request's listener (exactly.broker.leader_hints; one broker alone never answers the error). From
v11 a transactional batch that fails KIP-890 verification because its partition is not in the
transaction gets TRANSACTION_ABORTABLE instead of INVALID_TXN_STATE (Kafka's
`AddPartitionsToTxnManager.produceRequestVersionToTransactionSupportedOperation`). From v12 (transaction
version 2, KIP-890 part 2) a transactional batch adds its partition to the producer's transaction: the
coordinator is asked to add it (in process, or AddPartitionsToTxn v5 to the coordinator broker) before
the append, instead of the client's AddPartitionsToTxn round trip; a retriable refusal (the previous
transaction's markers still being written, the coordinator moving) answers NOT_ENOUGH_REPLICAS, a fenced
producer INVALID_PRODUCER_EPOCH. A TV1 client that sends v12 has added its partitions already (a no-op
add). v13 names topics by id: an unknown id is UNKNOWN_TOPIC_ID.
"""

from __future__ import annotations

import struct

from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.broker.guard import allowed
from exactly.broker.leader_hints import current_leader, missing_partition_error
from exactly.broker.replica_manager import DurableTarget
from exactly.broker.throttling import throttle
from exactly.errors import CorruptRecordError, ErrorCode, KafkaError, RecordValidationError
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.produce import (
    BatchIndexAndErrorMessage,
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionProduceResponse,
    ProduceRequest,
    ProduceResponse,
    TopicProduceResponse,
)
from exactly.records.batch import (
    ATTR_COMPRESSION_MASK,
    ATTR_CONTROL,
    ATTR_TRANSACTIONAL,
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    Compression,
)

Buffer = bytes | bytearray | memoryview
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_PREPARED = "the transaction is prepared (two-phase commit): nothing may be added to it"
_LEGACY_MIN_RECORD_SIZE = 14  # Kafka's LegacyRecord.RECORD_OVERHEAD_V0: smaller is corrupt in any format
_TRANSACTION_ABORTABLE_VERSION = 11
_IMPLICIT_ADD_VERSION = 12
_TOPIC_IDS_VERSION = 13
_LEADER_HINTS_VERSION = 10


@handler(ApiKey.PRODUCE)
async def handle(ctx: RequestContext, request: ProduceRequest) -> ProduceResponse | None:
    broker = ctx.broker
    acks = request.acks
    txn_id = request.transactional_id
    replicas = broker.replicas
    stats = broker.stats  # metrics (None: off)
    durable: list[DurableTarget] = []
    durable_at: list[tuple[list[PartitionProduceResponse], int]] = []  # where each durable's answer is
    replicated: list[DurableTarget] = []  # acks=all on a replicated partition: wait for the ISR
    replicated_at: list[tuple[list[PartitionProduceResponse], int]] = []
    topics: list[TopicProduceResponse] = []
    names: list[str] = []  # each entry of `topics`' topic name (v13+ responses name topics by id)
    if txn_id is not None and not allowed(ctx, ApiKey.PRODUCE, "transactional_id", txn_id):
        code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        for topic in request.topic_data:
            errors = [_error(data.index, code) for data in topic.partition_data]
            topics.append(TopicProduceResponse(topic.name, topic.topic_id, errors))
        return None if acks == 0 else ProduceResponse(topics)
    for topic in request.topic_data:
        partitions: list[PartitionProduceResponse] = []
        name = topic.name
        if ctx.version >= _TOPIC_IDS_VERSION:
            info = broker.metadata.by_id(topic.topic_id)
            if info is None:
                partitions = [_error(data.index, ErrorCode.UNKNOWN_TOPIC_ID) for data in topic.partition_data]
                topics.append(TopicProduceResponse(name, topic.topic_id, partitions))
                names.append(name)
                continue
            name = info.name
        else:
            info = broker.metadata.topics.get(name)
        if not allowed(ctx, ApiKey.PRODUCE, "topic", name):
            partitions = [
                _error(data.index, ErrorCode.TOPIC_AUTHORIZATION_FAILED) for data in topic.partition_data
            ]
            topics.append(TopicProduceResponse(topic.name, topic.topic_id, partitions))
            names.append(name)
            continue
        for data in topic.partition_data:
            if acks not in (0, 1, -1):
                partitions.append(_error(data.index, ErrorCode.INVALID_REQUIRED_ACKS))
                continue
            if info is not None and info.internal:
                partitions.append(_error(data.index, ErrorCode.INVALID_TOPIC_EXCEPTION))
                continue
            partition = replicas.partition(name, data.index)
            if partition is None:
                partitions.append(_error(data.index, missing_partition_error(ctx, name, data.index)))
                continue
            invalid = check_records(data.records, ctx.version)
            if invalid is not None or data.records is None:
                partitions.append(_error(data.index, invalid or ErrorCode.INVALID_RECORD))
                continue
            guard = None
            if _is_transactional(data.records):
                if txn_id is None:
                    partitions.append(_error(data.index, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
                    continue
                if broker.transactions.is_prepared(txn_id):
                    partitions.append(_error(data.index, ErrorCode.INVALID_TXN_STATE, _PREPARED))
                    continue
                producer_id, producer_epoch = _PRODUCER.unpack_from(data.records, 43)
                try:
                    guard = await broker.transactions.append_guard(
                        txn_id,
                        name,
                        data.index,
                        producer_id,
                        producer_epoch,
                        transaction_abortable=ctx.version >= _TRANSACTION_ABORTABLE_VERSION,
                        add=ctx.version >= _IMPLICIT_ADD_VERSION,
                    )
                except KafkaError as e:
                    partitions.append(_error(data.index, e.code))
                    continue
            try:
                appended = replicas.append_records(
                    partition, data.records, required_acks=acks, verification_guard=guard
                )
            except RecordValidationError as e:  # e.g. a keyless record on a compacted topic
                partitions.append(_record_errors(data.index, e))
                continue
            except (KafkaError, CorruptRecordError) as e:
                partitions.append(_error(data.index, e.code, str(e)))
                continue
            if stats is not None and not appended.info.duplicate:
                stats.topic(name).appended(appended.info.records_count, len(data.records))
            if appended.durable_offset is not None:
                durable.append((partition, appended.durable_offset))
                durable_at.append((partitions, len(partitions)))
            if acks == -1 and partition.replicated:  # a duplicate waits for its original too
                replicated.append((partition, appended.info.last_offset + 1))
                replicated_at.append((partitions, len(partitions)))
            written = appended.info
            partitions.append(
                PartitionProduceResponse(
                    data.index,
                    ErrorCode.NONE,
                    written.first_offset,
                    written.log_append_time,
                    written.log_start_offset,
                )
            )
        topics.append(TopicProduceResponse(topic.name, topic.topic_id, partitions))
        names.append(name)
    if durable:
        failures = await replicas.wait_durable_each(durable)
        for (answers, i), failure in zip(durable_at, failures, strict=True):
            if failure is not None:  # appended but not durable: not acknowledged (the client retries)
                answers[i] = _error(answers[i].index, failure.code, str(failure))
    if replicated:
        outcomes = await replicas.wait_replicated(replicated, request.timeout_ms / 1000)
        for (answers, i), code in zip(replicated_at, outcomes, strict=True):
            if code != ErrorCode.NONE and answers[i].error_code == ErrorCode.NONE:
                answers[i] = _error(answers[i].index, code)
    if stats is not None:
        for name, answer in zip(names, topics, strict=True):
            if not name:
                continue  # an unknown topic id
            answers = answer.partition_responses
            failed = sum(1 for a in answers if a.error_code != ErrorCode.NONE)
            stats.topic(name, exists=name in broker.metadata.topics).produce_requests(len(answers), failed)
    throttle_ms = broker.produce_quotas.record_and_get_throttle_ms(
        ctx.header.client_id, ctx.size, broker.clock.monotonic_ms()
    )
    if throttle_ms:
        await throttle(ctx, throttle_ms, response=acks != 0)
    if acks == 0:
        return None
    response = ProduceResponse(topics, throttle_time_ms=throttle_ms)
    if ctx.version >= _LEADER_HINTS_VERSION:
        _add_leader_hints(ctx, response, names)
    return response


def _add_leader_hints(ctx: RequestContext, response: ProduceResponse, names: list[str]) -> None:
    """KIP-951: the current leader of each NOT_LEADER_OR_FOLLOWER partition, and its endpoint."""
    endpoints: dict[int, NodeEndpoint] = {}
    for topic, name in zip(response.responses, names, strict=True):
        for answer in topic.partition_responses:
            if answer.error_code != ErrorCode.NOT_LEADER_OR_FOLLOWER:
                continue
            hint = current_leader(ctx, name, answer.index)
            answer.current_leader = LeaderIdAndEpoch(hint.leader_id, hint.leader_epoch)
            if hint.endpoint is not None:
                endpoints[hint.endpoint[0]] = NodeEndpoint(*hint.endpoint)
    response.node_endpoints = list(endpoints.values())


def _error(index: int, code: ErrorCode, message: str | None = None) -> PartitionProduceResponse:
    return PartitionProduceResponse(index, code, -1, -1, -1, error_message=message)


def _record_errors(index: int, e: RecordValidationError) -> PartitionProduceResponse:
    """Kafka's answer to a RecordValidationException: the code, its message, and one entry per refused
    record (`record_errors`, sent from v8; older versions get the code alone)."""
    response = _error(index, e.code, e.message)
    response.record_errors = [BatchIndexAndErrorMessage(r.batch_index, r.message) for r in e.record_errors]
    return response


_PRODUCER = struct.Struct(">qh")  # a v2 batch's producerId and producerEpoch, at byte 43


def _is_transactional(records: Buffer) -> bool:
    """A transactional data batch (a control batch from a client is refused later as INVALID_RECORD)."""
    (attributes,) = _INT16.unpack_from(records, 21)
    return bool(attributes & (ATTR_TRANSACTIONAL | ATTR_CONTROL) == ATTR_TRANSACTIONAL)


def check_records(records: Buffer | None, version: int) -> ErrorCode | None:
    """Kafka's request-level rule (`ProduceRequest.validateRecords` and the batch iterator under it):
    exactly one whole magic-2 batch; zstd only from Produce v7."""
    if records is None or len(records) < LOG_OVERHEAD:
        return ErrorCode.INVALID_RECORD  # no batch at all
    (batch_length,) = _INT32.unpack_from(records, 8)
    if batch_length < _LEGACY_MIN_RECORD_SIZE:
        return ErrorCode.CORRUPT_MESSAGE
    if batch_length + LOG_OVERHEAD > len(records) or len(records) < 17:
        return ErrorCode.INVALID_RECORD  # truncated: not even one whole batch
    magic = records[16]
    if magic > MAGIC:  # an int8: also catches negative values
        return ErrorCode.CORRUPT_MESSAGE
    if magic != MAGIC or batch_length + LOG_OVERHEAD != len(records):
        return ErrorCode.INVALID_RECORD  # legacy message set, or more than one batch
    if len(records) < BATCH_HEADER_SIZE:
        return ErrorCode.CORRUPT_MESSAGE
    (attributes,) = _INT16.unpack_from(records, 21)
    if attributes & ATTR_COMPRESSION_MASK == Compression.ZSTD and version < 7:
        return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    return None
