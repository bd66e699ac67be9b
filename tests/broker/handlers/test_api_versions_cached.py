"""ApiVersions answered from a cached encoding (handlers/api_versions.py) is byte for byte the generated
encoding of the response object, for every version and config, and a request-quota throttle still lands
in its throttle_time_ms."""

from __future__ import annotations

import itertools
from types import SimpleNamespace
from typing import Any

import pytest

import exactly.broker.handlers  # noqa: F401  (registers the handlers)
from exactly.broker.handlers import api_versions
from exactly.broker.throttling import _throttle_encoded
from exactly.protocol.api import EncodedBody, RequestHeader, decode_response, response_body_chunks
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.api_versions import ApiVersionsResponse

VERSIONS = range(0, 5)
CONFIGS = list(itertools.product([True, False], [True, False], [0, 1, 2], [False, True]))


def _context(version: int, two_phase: bool, share: bool, txn_version: int, share_acks: bool = False) -> Any:
    config = SimpleNamespace(
        transaction_two_phase_commit_enable=two_phase,
        group_share_enable=share,
        transaction_version=txn_version,
        share_transactional_ack_enable=share_acks,
    )
    return SimpleNamespace(
        broker=SimpleNamespace(config=config),
        version=version,
        header=RequestHeader(ApiKey.API_VERSIONS, version, 7, "c"),
    )


def _answer(ctx: Any) -> EncodedBody:
    coroutine = api_versions.handle(ctx, None)  # type: ignore[arg-type]
    with pytest.raises(StopIteration) as done:
        coroutine.send(None)
    body = done.value.value
    assert isinstance(body, EncodedBody)
    return body


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(("two_phase", "share", "txn_version", "share_acks"), CONFIGS)
def test_the_cached_answer_is_the_generated_encoding(
    version: int, two_phase: bool, share: bool, txn_version: int, share_acks: bool
) -> None:
    expected = api_versions.response(version, two_phase, share, txn_version, share_acks)
    wire = b"".join(response_body_chunks(ApiKey.API_VERSIONS, version, expected))
    for _ in range(2):  # the second from the cache
        body = _answer(_context(version, two_phase, share, txn_version, share_acks))
        assert b"".join(body.chunks) == wire
        assert body.error_codes == (0,)


@pytest.mark.parametrize("version", VERSIONS)
def test_a_throttle_patches_the_throttle_field(version: int) -> None:
    ctx = _context(version, True, False, 2)
    body = _answer(ctx)
    _throttle_encoded(ctx, body, 1234)
    frame = b"\x00\x00\x00\x07" + b"".join(body.chunks)  # correlation id, then the body (header v0)
    _, decoded = decode_response(ApiKey.API_VERSIONS, version, frame)
    assert isinstance(decoded, ApiVersionsResponse)
    assert decoded.throttle_time_ms == (1234 if version >= 1 else 0)
    assert decoded.api_keys == api_versions.response(version, True, False, 2).api_keys
    assert b"".join(_answer(ctx).chunks) != b"".join(body.chunks) or version == 0  # the cache is untouched
