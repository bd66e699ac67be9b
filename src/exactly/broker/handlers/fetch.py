"""Fetch (key 1): read whole batches up to the high watermark (read_uncommitted) or the last stable
offset (read_committed, with the aborted transactions overlapping what is returned).

A fetch that finds fewer than `min_bytes` waits until more data is appended or `max_wait_ms` passes
(long poll). Limits: `partition_max_bytes` per partition and `max_bytes` for the response; the first batch
is returned even if it is larger (so that a consumer can always make progress).

Fetch sessions (KIP-227, `exactly.fetch.session`): a request with epoch 0 opens a session, and the
client then sends only what changed; the response to an incremental request holds only partitions with
news. v13+ name topics by id: an id the broker does not know gets UNKNOWN_TOPIC_ID for each of its
partitions (and does not end the long poll, as in Kafka, where such partitions never reach the log
read). v15 (replica state), v16 (KIP-951 leader hints on NOT_LEADER errors, which one broker never
returns) and v17 (replica directory id) only concern followers.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.errors import ErrorCode, KafkaError
from exactly.fetch.session import ContextKind, FetchContext, FetchPosition, PartitionKey, PartitionResult
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.fetch import (
    AbortedTransaction,
    FetchableTopicResponse,
    FetchRequest,
    FetchResponse,
    PartitionData,
)
from exactly.storage.log import Isolation

_TOPIC_IDS_VERSION = 13


@handler(ApiKey.FETCH)
async def handle(ctx: RequestContext, request: FetchRequest) -> FetchResponse:
    broker = ctx.broker
    isolation = Isolation.READ_COMMITTED if request.isolation_level == 1 else Isolation.READ_UNCOMMITTED
    uses_topic_ids = ctx.version >= _TOPIC_IDS_VERSION
    fetch = [
        (
            _key(uses_topic_ids, topic.topic_id, topic.topic, p.partition),
            FetchPosition(p.fetch_offset, p.partition_max_bytes),
        )
        for topic in request.topics
        for p in topic.partitions
    ]
    forgotten = [
        _key(uses_topic_ids, topic.topic_id, topic.topic, partition)
        for topic in request.forgotten_topics_data
        for partition in topic.partitions
    ]
    context = broker.fetch_sessions.new_context(
        request.session_id,
        request.session_epoch,
        uses_topic_ids,
        fetch,
        forgotten,
        broker.clock.monotonic_ms(),
    )
    if context.kind is ContextKind.ERROR:
        return FetchResponse(error_code=context.error, session_id=0)
    deadline = broker.clock.monotonic_ms() + max(0, request.max_wait_ms)
    while True:
        waiter = broker.data_waiter()
        partitions, total, errors = _read(ctx, context, isolation, request.max_bytes)
        remaining = deadline - broker.clock.monotonic_ms()
        if total >= request.min_bytes or errors or remaining <= 0 or not context.partitions:
            break
        await broker.wait_for_data(waiter, remaining / 1000)
    # A sessionless fetch answers every partition: only a session compares the results with its cache.
    results = _results(partitions) if context.kind is not ContextKind.SESSIONLESS else {}
    session_id, keys = broker.fetch_sessions.complete(context, results, broker.clock.monotonic_ms())
    return FetchResponse(
        session_id=session_id, responses=_group_by_topic((key, partitions[key]) for key in keys)
    )


def _results(partitions: dict[PartitionKey, PartitionData]) -> dict[PartitionKey, PartitionResult]:
    return {
        key: PartitionResult(
            data.error_code,
            data.high_watermark,
            data.last_stable_offset,
            data.log_start_offset,
            len(data.records) if data.records is not None else 0,
        )
        for key, data in partitions.items()
    }


def _key(uses_topic_ids: bool, topic_id: uuid.UUID, topic: str, partition: int) -> PartitionKey:
    if uses_topic_ids:
        return PartitionKey(topic_id, "", partition)
    return PartitionKey(uuid.UUID(int=0), topic, partition)


def _read(
    ctx: RequestContext, context: FetchContext, isolation: Isolation, max_bytes: int
) -> tuple[dict[PartitionKey, PartitionData], int, bool]:
    broker = ctx.broker
    budget = max_bytes if max_bytes > 0 else 0x7FFFFFFF
    total = 0
    errors = False
    out: dict[PartitionKey, PartitionData] = {}
    for key, position in context.partitions:
        topic = key.topic
        if context.uses_topic_ids:
            info = broker.metadata.by_id(key.topic_id)
            if info is None:
                out[key] = PartitionData(key.partition, ErrorCode.UNKNOWN_TOPIC_ID, -1, -1, -1)
                continue
            topic = info.name
        log = broker.log(topic, key.partition)
        if log is None:
            errors = True
            out[key] = PartitionData(key.partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, -1, -1)
            continue
        limit = min(position.max_bytes, budget - total)
        try:
            data = log.read(position.fetch_offset, max(limit, 0), isolation, min_one_message=total == 0)
        except KafkaError as e:
            errors = True
            out[key] = PartitionData(
                key.partition, e.code, log.high_watermark, log.last_stable_offset, log.log_start_offset
            )
            continue
        total += len(data.records)
        aborted = None
        if data.aborted_transactions is not None:
            aborted = [AbortedTransaction(t.producer_id, t.first_offset) for t in data.aborted_transactions]
        out[key] = PartitionData(
            partition_index=key.partition,
            error_code=ErrorCode.NONE,
            high_watermark=data.high_watermark,
            last_stable_offset=data.last_stable_offset,
            log_start_offset=data.log_start_offset,
            aborted_transactions=aborted,
            records=data.records,
        )
    return out, total, errors


def _group_by_topic(partitions: Iterable[tuple[PartitionKey, PartitionData]]) -> list[FetchableTopicResponse]:
    """Consecutive partitions of one topic share a topic entry (Kafka's `FetchResponse.of`)."""
    responses: list[FetchableTopicResponse] = []
    for key, data in partitions:
        last = responses[-1] if responses else None
        if last is None or last.topic != key.topic or last.topic_id != key.topic_id:
            last = FetchableTopicResponse(key.topic, key.topic_id, [])
            responses.append(last)
        last.partitions.append(data)
    return responses
