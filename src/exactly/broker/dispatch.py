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

# Advertised maximums below the codec's highest version: the codecs are generated up to Kafka 4.x's
# newest versions, and a version is advertised only once its semantics are implemented.
_ADVERTISED_MAX = {
    ApiKey.PRODUCE: 9,
    ApiKey.FETCH: 12,
    ApiKey.LIST_OFFSETS: 7,
    ApiKey.METADATA: 12,
    ApiKey.OFFSET_COMMIT: 8,
    ApiKey.OFFSET_FETCH: 8,
    ApiKey.FIND_COORDINATOR: 4,
    ApiKey.JOIN_GROUP: 7,
    ApiKey.DESCRIBE_GROUPS: 5,
    ApiKey.INIT_PRODUCER_ID: 4,
    ApiKey.ADD_PARTITIONS_TO_TXN: 3,
    ApiKey.ADD_OFFSETS_TO_TXN: 3,
    ApiKey.END_TXN: 3,
    ApiKey.WRITE_TXN_MARKERS: 1,
    ApiKey.TXN_OFFSET_COMMIT: 3,
    ApiKey.DESCRIBE_CLUSTER: 1,
    ApiKey.LIST_TRANSACTIONS: 1,
}


def handler(key: ApiKey) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        HANDLERS[key] = fn
        return fn

    return register


def advertised_max(key: ApiKey) -> int:
    """The highest version of `key` the broker answers; a higher one closes the connection, as in Kafka."""
    return _ADVERTISED_MAX.get(key, API_SPECS[key].max_version)


# exactly's two-phase commit extension (docs/two-phase-commit.md): advertised only while
# transaction.two.phase.commit.enable is true.
TWO_PHASE_COMMIT_KEYS = frozenset(
    {ApiKey.PREPARE_TXN, ApiKey.COMMIT_BATCH, ApiKey.ABORT_BATCH, ApiKey.LIST_PREPARED_TXNS}
)


def advertised(two_phase_commit: bool = True) -> dict[ApiKey, tuple[int, int]]:
    """(min, max) per API that has a handler."""
    out: dict[ApiKey, tuple[int, int]] = {}
    for key in sorted(HANDLERS):
        if key in TWO_PHASE_COMMIT_KEYS and not two_phase_commit:
            continue
        spec = API_SPECS[key]
        out[key] = (_ADVERTISED_MIN.get(key, spec.min_version), advertised_max(key))
    return out


DISABLED_MESSAGE = "the two-phase commit extension is off (transaction.two.phase.commit.enable=false)"
