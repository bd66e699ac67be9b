"""Fetch (key 1): read whole batches up to the high watermark (read_uncommitted) or the last stable
offset (read_committed, with the aborted transactions overlapping what is returned).

A fetch that finds fewer than `min_bytes` waits until more data is appended or `max_wait_ms` passes
(long poll). Fetch sessions (KIP-227) are not kept: every response says session 0, which tells clients to
send full fetch requests. Limits: `partition_max_bytes` per partition and `max_bytes` for the response;
the first batch is returned even if it is larger (so that a consumer can always make progress).

A client with a `consumer_byte_rate` quota (Kafka's KafkaApis.handleFetchRequest): `max_bytes` is capped
at what the quota allows in one quota window; the encoded response's size is recorded, and if that puts
the client over its quota, the size is taken back, the answer is an empty response carrying
throttle_time_ms, and the connection is muted (broker/throttling.py).
"""

from __future__ import annotations

from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.broker.throttling import throttle
from exactly.errors import ErrorCode, KafkaError
from exactly.protocol.api import encode_response
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.fetch import (
    AbortedTransaction,
    FetchableTopicResponse,
    FetchRequest,
    FetchResponse,
    PartitionData,
)
from exactly.storage.log import Isolation

# An error partition carries an empty record set, never a null one: Kafka always sends one
# (`FetchResponse.recordsOrFail`), and librdkafka fails to parse the whole response on a null
# ("invalid MessageSetSize -1"), so it would never see the error (no auto.offset.reset, a busy loop).
NO_RECORDS = b""


@handler(ApiKey.FETCH)
async def handle(ctx: RequestContext, request: FetchRequest) -> FetchResponse:
    broker = ctx.broker
    isolation = Isolation.READ_COMMITTED if request.isolation_level == 1 else Isolation.READ_UNCOMMITTED
    deadline = broker.clock.monotonic_ms() + max(0, request.max_wait_ms)
    max_bytes = request.max_bytes if request.max_bytes > 0 else 0x7FFFFFFF
    quota_window = broker.fetch_quotas.max_value_in_window(ctx.header.client_id)
    if quota_window is not None:
        max_bytes = min(max_bytes, int(quota_window))
    min_bytes = min(request.min_bytes, max_bytes)
    while True:
        waiter = broker.data_waiter()
        responses, total, errors = _read(ctx, request, isolation, max_bytes)
        remaining = deadline - broker.clock.monotonic_ms()
        if total >= min_bytes or errors or remaining <= 0 or not request.topics:
            response = FetchResponse(responses=responses)
            if quota_window is None:
                return response
            return await _within_quota(ctx, response)
        await broker.wait_for_data(waiter, remaining / 1000)


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
    ctx: RequestContext, request: FetchRequest, isolation: Isolation, max_bytes: int
) -> tuple[list[FetchableTopicResponse], int, bool]:
    broker = ctx.broker
    budget = max_bytes
    total = 0
    errors = False
    responses: list[FetchableTopicResponse] = []
    for topic in request.topics:
        partitions: list[PartitionData] = []
        for p in topic.partitions:
            log = broker.log(topic.topic, p.partition)
            if log is None:
                errors = True
                partitions.append(
                    PartitionData(
                        p.partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, -1, -1, records=NO_RECORDS
                    )
                )
                continue
            limit = min(p.partition_max_bytes, budget - total)
            try:
                data = log.read(p.fetch_offset, max(limit, 0), isolation, min_one_message=total == 0)
            except KafkaError as e:
                errors = True
                partitions.append(
                    PartitionData(
                        p.partition,
                        e.code,
                        log.high_watermark,
                        log.last_stable_offset,
                        log.log_start_offset,
                        records=NO_RECORDS,
                    )
                )
                continue
            total += len(data.records)
            aborted = None
            if data.aborted_transactions is not None:
                aborted = [
                    AbortedTransaction(t.producer_id, t.first_offset) for t in data.aborted_transactions
                ]
            partitions.append(
                PartitionData(
                    partition_index=p.partition,
                    error_code=ErrorCode.NONE,
                    high_watermark=data.high_watermark,
                    last_stable_offset=data.last_stable_offset,
                    log_start_offset=data.log_start_offset,
                    aborted_transactions=aborted,
                    records=data.records,
                )
            )
        responses.append(FetchableTopicResponse(topic.topic, topic.topic_id, partitions))
    return responses, total, errors
