"""Throttling a client that went over its byte-rate quota, as Kafka does.

The connection is muted (nothing more is read from it) for the throttle time. From the response
versions of KIP-219 on (Produce v6, Fetch v8) the response goes out at once carrying throttle_time_ms
and the client holds back by itself; for older versions the broker holds the response back instead.
"""

from __future__ import annotations

import asyncio

from exactly.broker.context import RequestContext
from exactly.protocol.messages import ApiKey

CLIENT_SIDE_THROTTLING_FROM = {ApiKey.PRODUCE: 6, ApiKey.FETCH: 8}


async def throttle(ctx: RequestContext, throttle_ms: int, *, response: bool = True) -> None:
    """Mute the connection for `throttle_ms`; also wait that long when the client version expects the
    broker to delay its response (`response` False: there is none, acks=0)."""
    if throttle_ms <= 0:
        return
    ctx.mute(throttle_ms)
    if response and ctx.version < CLIENT_SIDE_THROTTLING_FROM.get(ApiKey(ctx.header.api_key), 0):
        await asyncio.sleep(throttle_ms / 1000)
