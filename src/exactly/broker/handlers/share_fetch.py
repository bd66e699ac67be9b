"""ShareFetch (key 78, KIP-932): a share group member's fetch, which acquires records for it
(`exactly.broker.shares`).

The share session (`ShareSessionEpoch`): 0 opens one (no acknowledgements allowed: INVALID_REQUEST),
then each request carries the next epoch; -1 closes it after applying the acknowledgements it carries,
and fetches nothing. The session's partitions are those named by any request since it opened, less the
forgotten ones. Acknowledgements ride along per partition; their outcome is the partition's
AcknowledgeErrorCode (INVALID_RECORD_STATE for an offset not acquired by this member). Records are
acquired from the session's partitions until `MaxRecords` (whole batches: it may be exceeded) and
`MaxBytes`; with nothing acquired the request waits up to `MaxWaitMs` for an append or a release. The
response carries `AcquisitionLockTimeoutMs` (group.share.record.lock.duration.ms) and, per partition,
the batches holding acquired offsets and the ranges acquired with their delivery counts.

Authorization: GROUP READ on the group (top-level GROUP_AUTHORIZATION_FAILED), TOPIC READ on each topic
(per partition TOPIC_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

import uuid

from exactly.broker.context import RequestContext
from exactly.broker.dispatch import SHARE_DISABLED_MESSAGE, handler
from exactly.broker.guard import allowed
from exactly.broker.shares import acknowledge_partitions, resolve
from exactly.errors import ErrorCode, KafkaError
from exactly.group.share.records import SharePartitionKey
from exactly.group.share.session import CLOSE_EPOCH, OPEN_EPOCH
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.share_fetch import (
    AcquiredRecords,
    LeaderIdAndEpoch,
    PartitionData,
    ShareFetchableTopicResponse,
    ShareFetchRequest,
    ShareFetchResponse,
)


@handler(ApiKey.SHARE_FETCH)
async def handle(ctx: RequestContext, request: ShareFetchRequest) -> ShareFetchResponse:
    broker = ctx.broker
    config = broker.config
    lock_ms = config.group_share_record_lock_duration_ms
    if not config.group_share_enable:
        return ShareFetchResponse(
            error_code=ErrorCode.UNSUPPORTED_VERSION, error_message=SHARE_DISABLED_MESSAGE
        )
    shares = broker.shares
    group_id = request.group_id or ""
    member_id = request.member_id or ""
    if not group_id or not member_id:
        return ShareFetchResponse(
            error_code=ErrorCode.INVALID_REQUEST, error_message="GroupId and MemberId are required"
        )
    if not allowed(ctx, ApiKey.SHARE_FETCH, "group", group_id):
        return ShareFetchResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    epoch = request.share_session_epoch
    acks = {
        (t.topic_id, p.partition_index): [
            (b.first_offset, b.last_offset, b.acknowledge_types) for b in p.acknowledgement_batches
        ]
        for t in request.topics
        for p in t.partitions
        if p.acknowledgement_batches
    }
    if epoch == OPEN_EPOCH:
        if acks:
            return ShareFetchResponse(
                error_code=ErrorCode.INVALID_REQUEST,
                error_message="Acknowledgements are not allowed when opening a share session",
            )
        session, gone = shares.sessions.open(group_id, member_id)
        for old in gone:
            shares.release_session(old)
    else:
        code, found = shares.sessions.continue_(group_id, member_id, epoch)
        if found is None:
            return ShareFetchResponse(error_code=code, acquisition_lock_timeout_ms=lock_ms)
        session = found
    results: dict[tuple[uuid.UUID, int], PartitionData] = {}
    for topic in request.topics:
        for p in topic.partitions:
            results[(topic.topic_id, p.partition_index)] = _empty(p.partition_index)
            if epoch != CLOSE_EPOCH:
                session.partitions.add((topic.topic_id, p.partition_index))
    for forgotten in request.forgotten_topics_data:
        for index in forgotten.partitions:
            session.partitions.discard((forgotten.topic_id, index))
    for tp, code in (
        await acknowledge_partitions(ctx, ApiKey.SHARE_FETCH, group_id, member_id, acks)
    ).items():
        results[tp].acknowledge_error_code = code
    if epoch == CLOSE_EPOCH:
        shares.release_session(session)
        shares.sessions.close(session)
        return _response(results, lock_ms)
    await _fetch(ctx, request, group_id, member_id, sorted(session.partitions), results)
    return _response(results, lock_ms)


async def _fetch(
    ctx: RequestContext,
    request: ShareFetchRequest,
    group_id: str,
    member_id: str,
    partitions: list[tuple[uuid.UUID, int]],
    results: dict[tuple[uuid.UUID, int], PartitionData],
) -> None:
    broker = ctx.broker
    clock = broker.clock
    deadline = clock.monotonic_ms() + max(request.max_wait_ms, 0)
    # a share partition new to this leader (or to its leader epoch) reads its state from its share
    # coordinator first; one that cannot answers its code (retriable: LEADER_NOT_AVAILABLE). A topic that
    # cannot be served answers its code here, once (one audit line for a denial)
    for topic_id, index in partitions:
        name, error = resolve(ctx, ApiKey.SHARE_FETCH, topic_id)
        data = results.setdefault((topic_id, index), _empty(index))
        if name is None:
            data.error_code = error
            continue
        try:
            await broker.shares.load(SharePartitionKey(group_id, topic_id, index), name)
        except KafkaError as e:
            data.error_code = e.code
            data.error_message = e.message
    partitions = [tp for tp in partitions if not results.get(tp, _empty(tp[1])).error_code]
    if not partitions:
        return
    while True:
        waiter = broker.replicas.wakeups.waiter()
        records_left = request.max_records if request.max_records > 0 else 500
        bytes_left = request.max_bytes if request.max_bytes > 0 else 0x7FFFFFFF
        answered = False
        for topic_id, index in partitions:
            if records_left <= 0 or bytes_left <= 0:
                break
            name, error = resolve(ctx, ApiKey.SHARE_FETCH, topic_id)
            data = results.setdefault((topic_id, index), _empty(index))
            if error != ErrorCode.NONE or name is None:
                data.error_code = error
                answered = True
                continue
            try:
                got = broker.shares.acquire(
                    SharePartitionKey(group_id, topic_id, index), name, member_id, records_left, bytes_left
                )
            except KafkaError as e:
                data.error_code = e.code
                data.error_message = e.message
                answered = True
                continue
            if got.ranges:
                data.records = got.records
                data.acquired_records = [
                    AcquiredRecords(r.first_offset, r.last_offset, r.delivery_count) for r in got.ranges
                ]
                records_left -= sum(r.last_offset - r.first_offset + 1 for r in got.ranges)
                bytes_left -= len(got.records)
                answered = True
        remaining = deadline - clock.monotonic_ms()
        if answered or remaining <= 0:
            return
        await broker.replicas.wakeups.wait(waiter, remaining / 1000)


def _empty(index: int) -> PartitionData:
    return PartitionData(index, current_leader=LeaderIdAndEpoch(-1, -1), records=b"")


def _response(results: dict[tuple[uuid.UUID, int], PartitionData], lock_ms: int) -> ShareFetchResponse:
    by_topic: dict[uuid.UUID, list[PartitionData]] = {}
    for (topic_id, _), data in sorted(results.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
        by_topic.setdefault(topic_id, []).append(data)
    return ShareFetchResponse(
        acquisition_lock_timeout_ms=lock_ms,
        responses=[ShareFetchableTopicResponse(t, ps) for t, ps in by_topic.items()],
    )
