"""Every (API, version) the broker advertises: requests and responses survive encode → decode."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from exactly.errors import ProtocolError
from exactly.protocol.api import decode_request, decode_response, encode_request, encode_response
from exactly.protocol.messages import ApiKey
from tests.protocol.strategies import all_versions, message

VERSIONS = all_versions()
IDS = [f"{k.name}-v{v}" for k, v in VERSIONS]
FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize(("key", "version"), VERSIONS, ids=IDS)
@FAST
@given(data=st.data())
def test_request_round_trip(key: ApiKey, version: int, data: st.DataObject) -> None:
    body = data.draw(message(key, version, "request"))
    frame = encode_request(key, version, 7, "client-1", body)
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    header, decoded = decode_request(frame[4:])
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
        key,
        version,
        7,
        "client-1",
    )
    assert decoded == body


@pytest.mark.parametrize(("key", "version"), VERSIONS, ids=IDS)
@FAST
@given(data=st.data())
def test_response_round_trip(key: ApiKey, version: int, data: st.DataObject) -> None:
    body = data.draw(message(key, version, "response"))
    frame = encode_request(key, version, 1, None, data.draw(message(key, version, "request")))
    header, _ = decode_request(frame[4:])
    raw = b"".join(encode_response(header, body))
    assert int.from_bytes(raw[:4], "big") == len(raw) - 4
    correlation_id, decoded = decode_response(key, version, raw[4:])
    assert correlation_id == 1
    assert decoded == body


@pytest.mark.parametrize(("key", "version"), VERSIONS, ids=IDS)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_mutated_request_decodes_or_raises_protocol_error(
    key: ApiKey, version: int, data: st.DataObject
) -> None:
    body = data.draw(message(key, version, "request"))
    frame = bytearray(encode_request(key, version, 3, "c", body)[4:])
    cut = data.draw(st.integers(0, len(frame)))
    mutated: Any = frame[:cut]
    if cut < len(frame) and data.draw(st.booleans()):
        mutated = frame.copy()
        mutated[cut] ^= data.draw(st.integers(1, 255))
    with contextlib.suppress(ProtocolError):
        decode_request(bytes(mutated))


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_decode_or_raise_protocol_error(raw: bytes) -> None:
    with contextlib.suppress(ProtocolError):
        decode_request(raw)


@pytest.mark.parametrize(
    ("key", "version"), VERSIONS[:: max(1, len(VERSIONS) // 20)], ids=IDS[:: max(1, len(VERSIONS) // 20)]
)
def test_truncated_request_always_raises(key: ApiKey, version: int) -> None:
    from hypothesis import find

    body = find(message(key, version, "request"), lambda _: True)
    frame = encode_request(key, version, 3, "c", body)[4:]
    for cut in range(len(frame)):
        with pytest.raises(ProtocolError):
            decode_request(frame[:cut])
