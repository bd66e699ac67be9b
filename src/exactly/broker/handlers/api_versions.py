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
"""

from __future__ import annotations

from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
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
async def handle(ctx: RequestContext, request: ApiVersionsRequest) -> ApiVersionsResponse:
    from exactly.broker.connection import api_versions_body

    config = ctx.broker.config
    share_groups = config.group_share_enable
    response = api_versions_body(
        two_phase_commit=config.transaction_two_phase_commit_enable,
        share_groups=share_groups,
        share_txn_acks=config.share_transactional_ack_enable,
    )
    add_features(response, config.transaction_version, ctx.version, 1 if share_groups else 0)
    return response
