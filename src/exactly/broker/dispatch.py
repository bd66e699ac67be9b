"""Which APIs the broker answers, with which versions, and the handler for each.

`ADVERTISED` is what ApiVersions tells clients (shared/reference/kafka-wire.md §1.3, "verified profile").
Produce is advertised from v0 although v0-2 are rejected (librdkafka 2.0.2 / kcat stops compressing if
Produce's minimum is above 0, KAFKA-18659), the rest from the lowest version we decode.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from exactly.broker.context import RequestContext
from exactly.protocol.api import API_SPECS
from exactly.protocol.messages import ApiKey

Handler = Callable[[RequestContext, Any], Awaitable[Any]]

HANDLERS: dict[ApiKey, Handler] = {}

# Advertised minimums that differ from the codec's lowest version.
_ADVERTISED_MIN = {ApiKey.PRODUCE: 0}


def handler(key: ApiKey) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        HANDLERS[key] = fn
        return fn

    return register


def advertised() -> dict[ApiKey, tuple[int, int]]:
    """(min, max) per API that has a handler."""
    out: dict[ApiKey, tuple[int, int]] = {}
    for key in sorted(HANDLERS):
        spec = API_SPECS[key]
        out[key] = (_ADVERTISED_MIN.get(key, spec.min_version), spec.max_version)
    return out
