"""Throttling a client that went over a quota, as Kafka does: byte rates, request time, mutations.

The connection is muted (nothing more is read from it) for the throttle time. From the response
versions of KIP-219 on (Produce v6, Fetch v8) the response goes out at once carrying throttle_time_ms
and the client holds back by itself; for older versions the broker holds the response back instead.

Request-time quotas (`request_percentage`, KIP-124): `HandlingTime` runs a handler's coroutine and adds
up the time its steps take on the event loop, which is what a request costs the broker's one thread
(Kafka's request-thread time): the time the handler waits — a long-poll Fetch parked, a replication
wait, a ZooKeeper write — is not counted, as Kafka counts neither purgatory nor the network (handlers are
timed only while some client quota is set: without any the requests run as they are). After the
handler, `throttle_request` records that time for the client (quotas/manager.py RequestQuotaManager);
over the quota, every response that has a throttle_time_ms field (also one its handler encoded itself,
Metadata's: the field is its first four bytes) carries the larger of the handler's
own throttle and this one, and the connection is muted, as Kafka's `sendResponseMaybeThrottle`. Requests
Kafka exempts (cluster actions: a follower's Fetch, WriteTxnMarkers) are not counted. Responses of the
versions before KIP-219 are not held back for a request-time throttle (the muted connection holds the
client's next requests back instead).

Controller mutation quotas (`controller_mutation_rate`, KIP-599): CreateTopics, CreatePartitions and
DeleteTopics take a `mutation_quota(ctx)` and `record` each topic's partitions before they mutate it
(not for validate_only); a strict quota refuses the topic with THROTTLING_QUOTA_EXCEEDED, and
`throttle_mutations` mutes the connection and gives the response's throttle_time_ms.
"""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import Callable, Coroutine, Generator
from typing import Any, Generic, TypeVar

from exactly.broker.context import RequestContext
from exactly.protocol.api import EncodedBody
from exactly.protocol.messages import ApiKey
from exactly.quotas.manager import ControllerMutationQuota

CLIENT_SIDE_THROTTLING_FROM = {ApiKey.PRODUCE: 6, ApiKey.FETCH: 8}
EXEMPT_FROM_REQUEST_QUOTA = frozenset({ApiKey.WRITE_TXN_MARKERS})

T = TypeVar("T")


async def throttle(ctx: RequestContext, throttle_ms: int, *, response: bool = True) -> None:
    """Mute the connection for `throttle_ms`; also wait that long when the client version expects the
    broker to delay its response (`response` False: there is none, acks=0)."""
    if throttle_ms <= 0:
        return
    ctx.mute(throttle_ms)
    if response and ctx.version < CLIENT_SIDE_THROTTLING_FROM.get(ApiKey(ctx.header.api_key), 0):
        await asyncio.sleep(throttle_ms / 1000)


class HandlingTime(Generic[T]):
    """Awaits `coroutine` and adds up, in `seconds`, the `clock` time its steps took (the time between a
    resume and the next suspension), not the time it waited. The coroutine runs in the awaiting task
    (current_task, context variables and cancellation are the task's)."""

    def __init__(
        self, coroutine: Coroutine[Any, Any, T], clock: Callable[[], float] = time.perf_counter
    ) -> None:
        self._coroutine = coroutine
        self._clock = clock
        self.seconds = 0.0

    def __await__(self) -> Generator[Any, Any, T]:
        coroutine, clock = self._coroutine, self._clock
        value: Any = None
        error: BaseException | None = None
        while True:
            start = clock()
            try:
                if error is not None:
                    yielded = coroutine.throw(error)
                else:
                    yielded = coroutine.send(value)
            except StopIteration as done:
                self.seconds += clock() - start
                return done.value  # type: ignore[no-any-return]
            except BaseException:
                self.seconds += clock() - start
                raise
            self.seconds += clock() - start
            try:
                value, error = (yield yielded), None
            except BaseException as e:  # noqa: BLE001 (cancellation and the rest go into the coroutine)
                value, error = None, e


def exempt(ctx: RequestContext, body: Any) -> bool:
    """Kafka's cluster actions, which no request quota counts: a follower's Fetch, WriteTxnMarkers."""
    key = ctx.header.api_key
    if key in EXEMPT_FROM_REQUEST_QUOTA:
        return True
    if key == ApiKey.FETCH:
        state = getattr(body, "replica_state", None)
        replica_id = state.replica_id if state is not None else getattr(body, "replica_id", -1)
        return bool(replica_id >= 0)
    return False


def throttle_request(ctx: RequestContext, body: Any, response: Any, handling_s: float) -> int:
    """Record the request's handling time against the client's request quota; over it, put the throttle
    on the response (the larger of the two when the handler set one) and mute the connection. The
    throttle in ms (0: none). Without any client quota (the usual case) nothing is recorded: this is
    on every request's path, so that is decided first."""
    broker = ctx.broker
    if not broker.request_quotas.active or exempt(ctx, body):
        return 0
    throttle_ms = broker.request_quotas.record_and_get_throttle_ms(
        ctx.principal.name, ctx.header.client_id, handling_s, broker.clock.monotonic_ms()
    )
    if throttle_ms <= 0:
        return 0
    if isinstance(response, EncodedBody):
        _throttle_encoded(ctx, response, throttle_ms)
    elif response is not None and hasattr(response, "throttle_time_ms"):
        response.throttle_time_ms = max(response.throttle_time_ms, throttle_ms)
    ctx.mute(throttle_ms)
    return throttle_ms


# Responses a handler encodes itself (EncodedBody: Metadata's cached topic encodings) whose body starts
# with throttle_time_ms from this version on.
_ENCODED_THROTTLE_FROM = {ApiKey.METADATA: 3}
_INT32 = struct.Struct(">i")


def _throttle_encoded(ctx: RequestContext, body: EncodedBody, throttle_ms: int) -> None:
    index = body.throttle_chunk
    if index is None:
        since = _ENCODED_THROTTLE_FROM.get(ApiKey(ctx.header.api_key))
        if since is None or ctx.version < since:
            return
        index = 0
    if index >= len(body.chunks):
        return
    first = bytes(body.chunks[index])
    if len(first) >= _INT32.size:
        (current,) = _INT32.unpack_from(first)
        body.chunks[index] = _INT32.pack(max(current, throttle_ms)) + first[_INT32.size :]


# The versions whose controller mutation quota is strict (KIP-599): a topic that does not fit is refused
# with THROTTLING_QUOTA_EXCEEDED. Older versions are only throttled (throttle_time_ms, a muted connection).
STRICT_MUTATION_QUOTA_FROM = {ApiKey.CREATE_TOPICS: 6, ApiKey.CREATE_PARTITIONS: 3, ApiKey.DELETE_TOPICS: 5}


def mutation_quota(ctx: RequestContext) -> ControllerMutationQuota:
    """The request's controller mutation quota (`controller_mutation_rate`), strict from the versions of
    KIP-599 on (CreateTopics v6, CreatePartitions v3, DeleteTopics v5)."""
    broker = ctx.broker
    strict = ctx.version >= STRICT_MUTATION_QUOTA_FROM[ApiKey(ctx.header.api_key)]
    return broker.mutation_quotas.new_quota(
        ctx.principal.name, ctx.header.client_id, strict=strict, now_ms=broker.clock.monotonic_ms
    )


def throttle_mutations(ctx: RequestContext, quota: ControllerMutationQuota) -> int:
    """After the request: mute the connection for the quota's throttle; the response's throttle_time_ms."""
    if quota.throttle_time_ms > 0:
        ctx.mute(quota.throttle_time_ms)
    return quota.throttle_time_ms
