"""ApiVersions' feature fields (v3+): `transaction.version` supported 0-2 and finalized at the configured
level, encoded as the generated codec writes them for each version."""

from __future__ import annotations

import pytest

from exactly.broker.handlers.api_versions import add_features
from exactly.protocol.api import RequestHeader, decode_response, encode_response
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.api_versions import (
    ApiVersionsResponse,
    FinalizedFeatureKey,
    SupportedFeatureKey,
)


def _round_trip(response: ApiVersionsResponse, version: int) -> ApiVersionsResponse:
    header = RequestHeader(ApiKey.API_VERSIONS, version, 7, "t")
    frame = b"".join(bytes(c) for c in encode_response(header, response))
    _, decoded = decode_response(ApiKey.API_VERSIONS, version, frame[4:])
    assert isinstance(decoded, ApiVersionsResponse)
    return decoded


@pytest.mark.parametrize(
    ("level", "finalized"),
    [(2, [("transaction.version", 2, 2)]), (1, [("transaction.version", 1, 1)]), (0, [])],
)
def test_finalized_level(level: int, finalized: list[tuple[str, int, int]]) -> None:
    response = ApiVersionsResponse()
    add_features(response, level, 4)
    decoded = _round_trip(response, 4)
    assert decoded.supported_features == [SupportedFeatureKey("transaction.version", 0, 2)]
    assert decoded.finalized_features_epoch == 0
    assert decoded.finalized_features == [FinalizedFeatureKey(n, hi, lo) for n, lo, hi in finalized]


def test_v3_cannot_say_a_minimum_of_zero() -> None:
    response = ApiVersionsResponse()
    add_features(response, 2, 3)
    assert _round_trip(response, 3).supported_features == [SupportedFeatureKey("transaction.version", 1, 2)]


def test_v2_carries_no_features() -> None:
    response = ApiVersionsResponse()
    add_features(response, 2, 2)
    decoded = _round_trip(response, 2)
    assert (decoded.supported_features, decoded.finalized_features_epoch, decoded.finalized_features) == (
        [],
        -1,
        [],
    )
