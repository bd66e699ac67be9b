"""ApiVersions (key 18): the API ranges this broker serves, and from v3 its feature flags.

Features (tagged fields of v3+, as Kafka 4 sends them): `SupportedFeatures` lists `transaction.version`
0-2, and `FinalizedFeatures` the level the broker runs (`transaction.version` config, 2 by default, with
min = max = the level; a level of 0 is not listed, as Kafka leaves out disabled features), with
`FinalizedFeaturesEpoch` 0 (one broker or a cluster configured alike: the level never changes while it
runs). A client turns transaction version 2 on when the finalized level is 2 or more (the Java
producer's `maybeUpdateTransactionV2Enabled`); the broker itself decides per request version (EndTxn v5,
Produce v12, TxnOffsetCommit v5), as Kafka does. v3 cannot carry a supported minimum of 0 (KAFKA-17011):
it is sent as 1, and a feature whose maximum is 0 is left out, as in Kafka's
`ApiVersionsResponse.createApiVersionsResponse`.

The answer depends only on the request version and four read-only configs, and is ~60 API ranges: it is
encoded once per such key (`_encoded`, with the generated encoder) and answered as an `EncodedBody`
whose throttle_time_ms chunk a request-quota throttle can still patch (every client sends ApiVersions
first, on every connection).
"""

from __future__ import annotations

import struct

from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.errors import ErrorCode
from exactly.protocol.api import EncodedBody, response_body_chunks
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.api_versions import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    FinalizedFeatureKey,
    SupportedFeatureKey,
)

TRANSACTION_VERSION = "transaction.version"
SHARE_VERSION = "share.version"  # KIP-932: 1 while group.share.enable is true
SUPPORTED_TRANSACTION_VERSIONS = (0, 2)
_FEATURES_EPOCH = 0
_MIN_VERSION_ZERO_VERSION = 4  # KAFKA-17011: v3 cannot say min 0


def add_features(
    response: ApiVersionsResponse, transaction_version: int, request_version: int, share_version: int = 0
) -> None:
    """Set the feature fields of a v3+ response (older versions do not encode them)."""
    low, high = SUPPORTED_TRANSACTION_VERSIONS
    if request_version < _MIN_VERSION_ZERO_VERSION and low == 0:
        low = 1
    response.supported_features = [SupportedFeatureKey(TRANSACTION_VERSION, low, high)] if high > 0 else []
    response.finalized_features_epoch = _FEATURES_EPOCH
    response.finalized_features = (
        [FinalizedFeatureKey(TRANSACTION_VERSION, transaction_version, transaction_version)]
        if transaction_version > 0
        else []
    )
    if share_version > 0:
        response.supported_features.append(SupportedFeatureKey(SHARE_VERSION, 1 if low > 0 else 0, 1))
        response.finalized_features.append(FinalizedFeatureKey(SHARE_VERSION, share_version, share_version))


@handler(ApiKey.API_VERSIONS)
async def handle(ctx: RequestContext, request: ApiVersionsRequest) -> EncodedBody:
    config = ctx.broker.config
    key = (
        ctx.version,
        config.transaction_two_phase_commit_enable,
        config.group_share_enable,
        config.transaction_version,
        config.share_transactional_ack_enable,
    )
    found = _ENCODED.get(key)
    if found is None:
        found = _ENCODED[key] = _encode(*key)
    pieces, throttle_chunk = found
    return EncodedBody(list(pieces), throttle_chunk, (ErrorCode.NONE,))


# (version, two-phase commit, share groups, transaction.version, transactional share acks) -> the body's
# pieces, and which of them starts with throttle_time_ms (None: v0, which has none)
_ENCODED: dict[tuple[int, bool, bool, int, bool], tuple[tuple[bytes, ...], int | None]] = {}
_SENTINEL = 0x7F7F7F7F  # a throttle_time_ms none of whose bytes is 0's


def response(
    version: int,
    two_phase_commit: bool,
    share_groups: bool,
    transaction_version: int,
    share_txn_acks: bool = False,
) -> ApiVersionsResponse:
    """The response, as an object (what `handle` answers, encoded)."""
    from exactly.broker.connection import api_versions_body

    body = api_versions_body(
        two_phase_commit=two_phase_commit, share_groups=share_groups, share_txn_acks=share_txn_acks
    )
    add_features(body, transaction_version, version, 1 if share_groups else 0)
    return body


def _encode(
    version: int, two_phase_commit: bool, share_groups: bool, transaction_version: int, share_txn_acks: bool
) -> tuple[tuple[bytes, ...], int | None]:
    """The encoded body, cut around its throttle_time_ms: found as the 4 bytes that change when the field
    does (encoded twice, with 0 and with a sentinel), so the pieces are the generated encoder's bytes."""
    body = response(version, two_phase_commit, share_groups, transaction_version, share_txn_acks)
    plain = b"".join(response_body_chunks(ApiKey.API_VERSIONS, version, body))
    body.throttle_time_ms = _SENTINEL
    marked = b"".join(response_body_chunks(ApiKey.API_VERSIONS, version, body))
    if plain == marked:
        return (plain,), None
    at = next(i for i, (a, b) in enumerate(zip(plain, marked, strict=True)) if a != b)
    end = at + 4
    if (
        plain[at:end] != bytes(4)
        or marked[at:end] != struct.pack(">i", _SENTINEL)
        or plain[end:] != marked[end:]
    ):
        raise AssertionError(f"ApiVersions v{version}: throttle_time_ms is not one int32 field")
    return (plain[:at], plain[at:end], plain[end:]), 1
