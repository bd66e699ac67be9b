"""Fetch (key 1): read whole batches up to the high watermark (read_uncommitted) or the last stable
offset (read_committed, with the aborted transactions overlapping what is returned).

A fetch that finds fewer than `min_bytes` waits until more data is appended or `max_wait_ms` passes
(long poll). Limits: `partition_max_bytes` per partition and `max_bytes` for the response; the first batch
is returned even if it is larger (so that a consumer can always make progress).

Fetch sessions (KIP-227, `exactly.fetch.session`): a request with epoch 0 opens a session, and the
client then sends only what changed; the response to an incremental request holds only partitions with
news. v13+ name topics by id: an id the broker does not know gets UNKNOWN_TOPIC_ID for each of its
partitions (and does not end the long poll, as in Kafka, where such partitions never reach the log
read). v15 (replica state) and v17 (replica directory id) only concern followers. A partition's
`current_leader_epoch` (v9+, -1: no check) other than the partition's leader epoch is
UNKNOWN_LEADER_EPOCH (greater) or FENCED_LEADER_EPOCH (smaller), as Kafka's
`Partition.localLogWithEpochOrThrow`.

In a cluster (Kafka's `FetchParams.fetchOnlyLeader`): a follower's replication fetch (replica id >= 0)
and a consumer's fetch before v11 are answered by the leader only (NOT_LEADER_OR_FOLLOWER elsewhere); a
consumer's fetch from v11 may be served by a follower too, up to the follower's own high watermark (or
last stable offset), which trails the leader's by about one replication round. A partition this broker
has no replica of is NOT_LEADER_OR_FOLLOWER when the cluster has it, else UNKNOWN_TOPIC_OR_PARTITION.

KIP-392 (fetch from the closest replica): with `replica.selector.class` set to Kafka's
RackAwareReplicaSelector, the leader answers a consumer's fetch (v11+, with the client's `rack_id`) with
`preferred_read_replica` and no records when an in-sync follower in the client's rack covers the fetch
offset (exactly.replication.replica_selector); the fetch returns at once, as with an error.

Before v10 a partition of a topic whose `compression.type` is zstd is UNSUPPORTED_COMPRESSION_TYPE (KIP-110:
such clients cannot read zstd; Kafka's `maybeConvertFetchedData` checks the topic's config, not the batches).

v16 adds KIP-951 leader hints: a NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH partition carries the
`current_leader` (id and epoch), and the response's `node_endpoints` that leader's endpoint on the
request's listener (exactly.broker.leader_hints; one broker alone never answers these errors).

Zero copy: on a connection that can send from files (plaintext, `RequestContext.zero_copy`) each
partition's records are a `FileSlice` of its segment: the connection writes the response's header and
per-partition fields, then has the kernel send each range from the file (sendfile). TLS gets the bytes.

Authorization: a consumer needs TOPIC READ on each topic; a follower (replica id >= 0) needs CLUSTER_ACTION
on the cluster instead, and a follower without it gets TOPIC_AUTHORIZATION_FAILED for every partition
(Kafka's rule; brokers' principals are usually in `super.users`).

A client with a `consumer_byte_rate` quota (Kafka's KafkaApis.handleFetchRequest): `max_bytes` is capped
at what the quota allows in one quota window; the encoded response's size is recorded, and if that puts
the client over its quota, the size is taken back, the answer is an empty response carrying
throttle_time_ms and session 0 (the client's next fetch is a full one), and the connection is muted
(broker/throttling.py).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import cast

from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.broker.guard import allowed
from exactly.broker.leader_hints import current_leader, missing_partition_error, rack_on_listener
from exactly.broker.throttling import throttle
from exactly.errors import ErrorCode, KafkaError
from exactly.fetch.session import ContextKind, FetchContext, FetchPosition, PartitionKey, PartitionResult
from exactly.protocol.api import encode_response
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.fetch import (
    AbortedTransaction,
    EpochEndOffset,
    FetchableTopicResponse,
    FetchRequest,
    FetchResponse,
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionData,
)
from exactly.replication.partition import Partition
from exactly.replication.replica_selector import preferred_read_replica
from exactly.storage.config import BrokerCompressionType
from exactly.storage.log import Isolation

# An error partition carries an empty record set, never a null one: Kafka always sends one
# (`FetchResponse.recordsOrFail`), and librdkafka fails to parse the whole response on a null
# ("invalid MessageSetSize -1"), so it would never see the error (no auto.offset.reset, a busy loop).
NO_RECORDS = b""

_TOPIC_IDS_VERSION = 13
_ZSTD_VERSION = 10  # the first version whose clients read zstd batches (KIP-110)
_CLIENT_RACK_VERSION = 11  # rack_id, preferred_read_replica; a consumer may fetch from a follower
_LEADER_HINTS_VERSION = 16
CONSUMER_REPLICA_ID = -1


@handler(ApiKey.FETCH)
async def handle(ctx: RequestContext, request: FetchRequest) -> FetchResponse:
    broker = ctx.broker
    isolation = Isolation.READ_COMMITTED if request.isolation_level == 1 else Isolation.READ_UNCOMMITTED
    replica_id = request.replica_state.replica_id if request.replica_state is not None else request.replica_id
    # a follower's fetch: (last fetched epoch, its log start offset) by partition
    followers: dict[PartitionKey, tuple[int, int]] | None = None
    if replica_id >= 0:
        isolation = Isolation.LOG_END  # followers read to the log end; the isolation level is ignored
        followers = {
            _key(ctx.version >= _TOPIC_IDS_VERSION, topic.topic_id, topic.topic, p.partition): (
                p.last_fetched_epoch,
                p.log_start_offset,
            )
            for topic in request.topics
            for p in topic.partitions
        }
    # Kafka's fetchOnlyLeader: followers, and consumers from before KIP-392, read from the leader only
    only_leader = replica_id >= 0 or (
        replica_id == CONSUMER_REPLICA_ID and ctx.version < _CLIENT_RACK_VERSION
    )
    client_rack = request.rack_id if ctx.version >= _CLIENT_RACK_VERSION and replica_id < 0 else None
    if broker.config.replica_selector_class is None:
        client_rack = None  # no selector: every consumer is served by the replica it asks
    uses_topic_ids = ctx.version >= _TOPIC_IDS_VERSION
    fetch = [
        (
            _key(uses_topic_ids, topic.topic_id, topic.topic, p.partition),
            FetchPosition(p.fetch_offset, p.partition_max_bytes, p.current_leader_epoch),
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
    max_bytes = request.max_bytes if request.max_bytes > 0 else 0x7FFFFFFF
    quota_window = broker.fetch_quotas.max_value_in_window(ctx.header.client_id)
    if quota_window is not None:
        max_bytes = min(max_bytes, int(quota_window))
    min_bytes = min(request.min_bytes, max_bytes)
    # A follower needs CLUSTER_ACTION on the cluster (no TOPIC READ); without it every partition is
    # TOPIC_AUTHORIZATION_FAILED, as Kafka answers.
    follower_allowed = followers is not None and allowed(ctx, ApiKey.FETCH, "follower")
    while True:
        waiter = broker.replicas.wakeups.waiter()
        partitions, total, errors = _read(
            ctx,
            context,
            isolation,
            max_bytes,
            replica_id,
            followers,
            follower_allowed,
            only_leader,
            client_rack,
        )
        remaining = deadline - broker.clock.monotonic_ms()
        if total >= min_bytes or errors or remaining <= 0 or not context.partitions:
            break
        await broker.replicas.wakeups.wait(waiter, remaining / 1000)
    # A sessionless fetch answers every partition: only a session compares the results with its cache.
    results = _results(partitions) if context.kind is not ContextKind.SESSIONLESS else {}
    session_id, keys = broker.fetch_sessions.complete(context, results, broker.clock.monotonic_ms())
    response = FetchResponse(
        session_id=session_id, responses=_group_by_topic((key, partitions[key]) for key in keys)
    )
    if ctx.version >= _LEADER_HINTS_VERSION:
        _add_leader_hints(ctx, response, [partitions[key] for key in keys])
    if broker.stats is not None:
        _count(ctx, keys, partitions, replica=replica_id >= 0)
    if quota_window is None:
        return response
    return await _within_quota(ctx, response)


def _count(
    ctx: RequestContext,
    keys: Iterable[PartitionKey],
    partitions: dict[PartitionKey, PartitionData],
    *,
    replica: bool,
) -> None:
    """Metrics: each topic's partitions answered, failed, and record bytes returned (BrokerTopicMetrics)."""
    stats = ctx.broker.stats
    assert stats is not None
    by_topic: dict[str, list[int]] = {}  # topic -> [partitions, failed, bytes]
    for key in keys:
        name = key.topic
        if not name:
            info = ctx.broker.metadata.by_id(key.topic_id)
            if info is None:
                continue
            name = info.name
        counts = by_topic.get(name)
        if counts is None:
            counts = by_topic[name] = [0, 0, 0]
        data = partitions[key]
        counts[0] += 1
        if data.error_code != ErrorCode.NONE:
            counts[1] += 1
        elif data.records:
            counts[2] += len(data.records)
    topics = ctx.broker.metadata.topics
    for name, (answered, failed, size) in by_topic.items():
        topic = stats.topic(name, exists=name in topics)
        topic.fetch_requests(answered, failed)
        if size:
            topic.fetched(size, replica=replica)


def _results(partitions: dict[PartitionKey, PartitionData]) -> dict[PartitionKey, PartitionResult]:
    return {
        key: PartitionResult(
            data.error_code,
            data.high_watermark,
            data.last_stable_offset,
            data.log_start_offset,
            len(data.records) if data.records is not None else 0,
            data.preferred_read_replica,
        )
        for key, data in partitions.items()
    }


def _key(uses_topic_ids: bool, topic_id: uuid.UUID, topic: str, partition: int) -> PartitionKey:
    if uses_topic_ids:
        return PartitionKey(topic_id, "", partition)
    return PartitionKey(uuid.UUID(int=0), topic, partition)


async def _within_quota(ctx: RequestContext, response: FetchResponse) -> FetchResponse:
    fetch_quotas = ctx.broker.fetch_quotas
    size = sum(len(chunk) for chunk in encode_response(ctx.header, response))
    now = ctx.broker.clock.monotonic_ms()
    throttle_ms = fetch_quotas.record_and_get_throttle_ms(ctx.header.client_id, size, now)
    if throttle_ms <= 0:
        return response
    fetch_quotas.unrecord(ctx.header.client_id, size, now)
    await throttle(ctx, throttle_ms)
    return FetchResponse(throttle_time_ms=throttle_ms, error_code=ErrorCode.NONE, session_id=0, responses=[])


def _read(
    ctx: RequestContext,
    context: FetchContext,
    isolation: Isolation,
    max_bytes: int,
    replica_id: int = -1,
    followers: dict[PartitionKey, tuple[int, int]] | None = None,
    follower_allowed: bool = False,
    only_leader: bool = True,
    client_rack: str | None = None,
) -> tuple[dict[PartitionKey, PartitionData], int, bool]:
    """Read every partition of the fetch; the flag says the fetch must be answered now (an error, a
    diverging epoch, a preferred read replica)."""
    broker = ctx.broker
    budget = max_bytes if max_bytes > 0 else 0x7FFFFFFF
    total = 0
    errors = False
    out: dict[PartitionKey, PartitionData] = {}
    permitted: dict[str, bool] = {}
    for key, position in context.partitions:
        topic = key.topic
        if context.uses_topic_ids:
            info = broker.metadata.by_id(key.topic_id)
            if info is None:
                out[key] = PartitionData(
                    key.partition, ErrorCode.UNKNOWN_TOPIC_ID, -1, -1, -1, records=NO_RECORDS
                )
                continue
            topic = info.name
        if topic not in permitted:
            permitted[topic] = (
                follower_allowed if followers is not None else allowed(ctx, ApiKey.FETCH, "topic", topic)
            )
        if not permitted[topic]:
            errors = True
            out[key] = PartitionData(
                key.partition, ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1, -1, -1, records=NO_RECORDS
            )
            continue
        partition = broker.replicas.partition(topic, key.partition)
        if partition is None:
            errors = True
            code = missing_partition_error(ctx, topic, key.partition)
            out[key] = PartitionData(key.partition, code, -1, -1, -1, records=NO_RECORDS)
            continue
        epoch_error = partition.check_leader_epoch(position.current_leader_epoch, require_leader=only_leader)
        if epoch_error != ErrorCode.NONE:  # Kafka: -1 offsets with these errors (createLogReadResult)
            errors = True
            out[key] = PartitionData(key.partition, epoch_error, -1, -1, -1, records=NO_RECORDS)
            continue
        if client_rack:
            preferred = preferred_read_replica(
                partition,
                client_rack,
                position.fetch_offset,
                broker.clock.monotonic_ms(),
                lambda broker_id: rack_on_listener(ctx, broker_id),
            )
            if preferred is not None:  # Kafka skips the read and answers at once
                errors = True
                out[key] = PartitionData(
                    key.partition,
                    ErrorCode.NONE,
                    partition.high_watermark,
                    partition.last_stable_offset,
                    partition.log_start_offset,
                    preferred_read_replica=preferred,
                    records=NO_RECORDS,
                )
                continue
        if ctx.version < _ZSTD_VERSION and partition.config.compression_type is BrokerCompressionType.ZSTD:
            errors = True  # Kafka: the topic's compression.type, whatever the batches read would hold
            out[key] = PartitionData(
                key.partition, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, -1, -1, -1, records=NO_RECORDS
            )
            continue
        if followers is not None:
            last_fetched_epoch, follower_log_start = followers[key]
            diverging = _follower_position(
                ctx, partition, replica_id, position.fetch_offset, last_fetched_epoch, follower_log_start
            )
            if diverging is not None:
                errors = True
                out[key] = diverging
                continue
        limit = min(position.max_bytes, budget - total)
        try:
            data = partition.read(
                position.fetch_offset,
                max(limit, 0),
                isolation,
                min_one_message=total == 0,
                zero_copy=ctx.zero_copy,
            )
        except KafkaError as e:
            errors = True
            out[key] = PartitionData(
                key.partition,
                e.code,
                partition.high_watermark,
                partition.last_stable_offset,
                partition.log_start_offset,
                records=NO_RECORDS,
            )
            continue
        # A FileSlice stands in for the bytes: encoding takes its len() and passes it on as a chunk.
        records = data.records if data.file_slice is None else cast("memoryview", data.file_slice)
        total += len(records)
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
            records=records,
        )
    return out, total, errors


def _follower_position(
    ctx: RequestContext,
    partition: Partition,
    replica_id: int,
    fetch_offset: int,
    last_fetched_epoch: int,
    log_start_offset: int = -1,
) -> PartitionData | None:
    """A follower's fetch (Kafka's `Partition.fetchRecords` for a replica): a fetch whose last fetched
    epoch ends before `fetch_offset` on this leader answers the diverging epoch, so the follower
    truncates (KIP-595's fields, KAFKA-10554); otherwise it records how far the follower has got."""
    if last_fetched_epoch >= 0:
        epoch, end = partition.end_offset_for_epoch(last_fetched_epoch)
        if epoch < 0 or fetch_offset < partition.log_start_offset:
            return PartitionData(
                partition.index,
                ErrorCode.OFFSET_OUT_OF_RANGE,
                partition.high_watermark,
                partition.last_stable_offset,
                partition.log_start_offset,
                records=NO_RECORDS,
            )
        if epoch < last_fetched_epoch or end < fetch_offset:
            return PartitionData(
                partition.index,
                ErrorCode.NONE,
                partition.high_watermark,
                partition.last_stable_offset,
                partition.log_start_offset,
                diverging_epoch=EpochEndOffset(epoch, end),
                records=NO_RECORDS,
            )
    ctx.broker.replicas.follower_fetched(partition, replica_id, fetch_offset, log_start_offset)
    return None


def _add_leader_hints(ctx: RequestContext, response: FetchResponse, answered: list[PartitionData]) -> None:
    """KIP-951: the current leader of each NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH partition, and
    its endpoint."""
    if not any(data.error_code in _LEADER_HINT_ERRORS for data in answered):
        return
    endpoints: dict[int, NodeEndpoint] = {}
    for topic in response.responses:
        name = topic.topic
        if not name:
            info = ctx.broker.metadata.by_id(topic.topic_id)
            if info is None:
                continue
            name = info.name
        for data in topic.partitions:
            if data.error_code not in _LEADER_HINT_ERRORS:
                continue
            hint = current_leader(ctx, name, data.partition_index)
            data.current_leader = LeaderIdAndEpoch(hint.leader_id, hint.leader_epoch)
            if hint.endpoint is not None:
                endpoints[hint.endpoint[0]] = NodeEndpoint(*hint.endpoint)
    response.node_endpoints = list(endpoints.values())


_LEADER_HINT_ERRORS = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH})


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
