"""Which APIs the broker answers, with which versions, and the handler for each.

`ADVERTISED` is what ApiVersions tells clients (shared/reference/kafka-wire.md §1.3, "verified profile").
Produce is advertised from v0 although v0-2 are rejected (librdkafka 2.0.2 / kcat stops compressing if
Produce's minimum is above 0, KAFKA-18659), the rest from the lowest version we decode.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple

from exactly.broker.context import RequestContext
from exactly.protocol.api import API_SPECS
from exactly.protocol.messages import ApiKey

Handler = Callable[[RequestContext, Any], Awaitable[Any]]

HANDLERS: dict[ApiKey, Handler] = {}

# Advertised minimums that differ from the codec's lowest version.
_ADVERTISED_MIN = {ApiKey.PRODUCE: 0}

# Advertised maximums: Kafka 4.x's where the semantics are implemented (a request above its API's maximum
# closes the connection). The codecs go higher in places; each lower cap says what is missing.
_ADVERTISED_MAX = {
    ApiKey.PRODUCE: 13,  # v12: a transactional batch adds its partition (transaction version 2)
    ApiKey.FETCH: 17,  # v18 (KIP-1166) only concerns followers; Kafka 4.0-4.1 stop at 17
    ApiKey.LIST_OFFSETS: 11,
    ApiKey.METADATA: 13,
    ApiKey.OFFSET_COMMIT: 10,
    ApiKey.OFFSET_FETCH: 10,
    ApiKey.FIND_COORDINATOR: 6,  # v6 share-group keys (type 2) get INVALID_REQUEST: no share groups
    ApiKey.JOIN_GROUP: 9,
    ApiKey.DESCRIBE_GROUPS: 6,
    ApiKey.INIT_PRODUCER_ID: 5,  # v6 is KIP-939 two-phase commit (still unstable in Kafka)
    ApiKey.ADD_PARTITIONS_TO_TXN: 3,  # v4+ are broker-to-coordinator batches (_INTER_BROKER_MAX)
    ApiKey.ADD_OFFSETS_TO_TXN: 4,
    ApiKey.END_TXN: 5,  # v5: transaction version 2 (an epoch bump at every commit/abort)
    ApiKey.WRITE_TXN_MARKERS: 1,  # v2 carries each marker's transaction version (KIP-1228): not built
    ApiKey.TXN_OFFSET_COMMIT: 5,  # v5: transaction version 2 (the group's partition added implicitly)
    ApiKey.DESCRIBE_CLUSTER: 2,
    ApiKey.LIST_TRANSACTIONS: 2,
}


class Route(NamedTuple):
    """Where a request of one API key goes: its ApiKey, its handler and the highest version answered.
    Looked up once per request (`route`), so kept as a NamedTuple in a dict, not rebuilt each time."""

    key: ApiKey
    handler: Handler
    max_version: int


_ROUTES: dict[int, Route | None] = {}  # api key -> its route (None: no handler); cleared on registration
_ADVERTISED: dict[
    tuple[bool, bool, bool], dict[ApiKey, tuple[int, int]]
] = {}  # `advertised` per its arguments


def handler(key: ApiKey) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        HANDLERS[key] = fn
        _ROUTES.clear()
        _ADVERTISED.clear()
        return fn

    return register


def route(api_key: int) -> Route | None:
    """The route of a request's api key, None when no handler serves it (the key may be unknown)."""
    try:
        return _ROUTES[api_key]
    except KeyError:
        pass
    found: Route | None = None
    try:
        key = ApiKey(api_key)
    except ValueError:
        key = None
    if key is not None and (fn := HANDLERS.get(key)) is not None:
        found = Route(key, fn, answered_max(key))
    _ROUTES[api_key] = found
    return found


# Versions only brokers send each other, answered but not advertised: clients negotiate from ApiVersions,
# and one that picked AddPartitionsToTxn v4+ would send a broker's batch instead of adding partitions.
_INTER_BROKER_MAX = {
    # v4: VerifyOnly batches (KIP-890 part 1 across brokers); v5 (and v4 without VerifyOnly): the implicit
    # add of a transaction version 2 client's Produce v12 / TxnOffsetCommit v5 (KIP-890 part 2)
    ApiKey.ADD_PARTITIONS_TO_TXN: 5,
}


def advertised_max(key: ApiKey) -> int:
    """The highest version of `key` the broker advertises."""
    return _ADVERTISED_MAX.get(key, API_SPECS[key].max_version)


def answered_max(key: ApiKey) -> int:
    """The highest version of `key` the broker answers; a higher one closes the connection, as in Kafka."""
    return max(advertised_max(key), _INTER_BROKER_MAX.get(key, -1))


# exactly's two-phase commit extension (docs/two-phase-commit.md): advertised only while
# transaction.two.phase.commit.enable is true.
TWO_PHASE_COMMIT_KEYS = frozenset(
    {ApiKey.PREPARE_TXN, ApiKey.COMMIT_BATCH, ApiKey.ABORT_BATCH, ApiKey.LIST_PREPARED_TXNS}
)


# KIP-932 share groups: advertised only while group.share.enable is true (Kafka 4.1: the share.version
# feature at 1).
SHARE_GROUP_KEYS = frozenset(
    {
        ApiKey.SHARE_GROUP_HEARTBEAT,
        ApiKey.SHARE_GROUP_DESCRIBE,
        ApiKey.SHARE_FETCH,
        ApiKey.SHARE_ACKNOWLEDGE,
        ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
        ApiKey.ALTER_SHARE_GROUP_OFFSETS,
        ApiKey.DELETE_SHARE_GROUP_OFFSETS,
        # the share coordinator's inter-broker RPCs
        ApiKey.INITIALIZE_SHARE_GROUP_STATE,
        ApiKey.READ_SHARE_GROUP_STATE,
        ApiKey.WRITE_SHARE_GROUP_STATE,
        ApiKey.DELETE_SHARE_GROUP_STATE,
        ApiKey.READ_SHARE_GROUP_STATE_SUMMARY,
    }
)


# exactly's transactional share-acknowledgement extension (docs/share-transactional-acks.md): advertised
# only while share.transactional.ack.enable and group.share.enable are both true.
SHARE_TXN_ACK_KEYS = frozenset({ApiKey.ADD_SHARE_ACKS_TO_TXN})


def advertised(
    two_phase_commit: bool = True, share_groups: bool = False, share_txn_acks: bool = False
) -> dict[ApiKey, tuple[int, int]]:
    """(min, max) per API that has a handler (computed once per set of arguments: do not modify it)."""
    flags = (two_phase_commit, share_groups, share_txn_acks)
    found = _ADVERTISED.get(flags)
    if found is None:
        found = _ADVERTISED[flags] = _advertised(*flags)
    return found


def _advertised(
    two_phase_commit: bool, share_groups: bool, share_txn_acks: bool
) -> dict[ApiKey, tuple[int, int]]:
    out: dict[ApiKey, tuple[int, int]] = {}
    for key in sorted(HANDLERS):
        if key in TWO_PHASE_COMMIT_KEYS and not two_phase_commit:
            continue
        if key in SHARE_GROUP_KEYS and not share_groups:
            continue
        if key in SHARE_TXN_ACK_KEYS and not (share_txn_acks and share_groups):
            continue
        spec = API_SPECS[key]
        out[key] = (_ADVERTISED_MIN.get(key, spec.min_version), advertised_max(key))
    return out


DISABLED_MESSAGE = "the two-phase commit extension is off (transaction.two.phase.commit.enable=false)"
SHARE_DISABLED_MESSAGE = "share groups are off (group.share.enable=false)"
SHARE_TXN_ACK_DISABLED_MESSAGE = (
    "transactional share acknowledgements are off (share.transactional.ack.enable=false, or "
    "group.share.enable=false)"
)
