"""Headers and the version-dependent framing rules of kafka-wire.md §1.4."""

from __future__ import annotations

import struct

import pytest

from exactly.errors import ProtocolError
from exactly.protocol.api import (
    API_SPECS,
    UnsupportedVersionError,
    decode_request,
    decode_request_header,
    encode_request,
    encode_response,
)
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.api_versions import ApiVersion, ApiVersionsRequest, ApiVersionsResponse
from exactly.protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse


def test_flexible_request_uses_header_v2_with_classic_client_id() -> None:
    frame = encode_request(ApiKey.INIT_PRODUCER_ID, 4, 9, "me", InitProducerIdRequest("tx", 60000, 5, 1))
    body = frame[4:]
    # api_key, api_version, correlation_id, client_id as int16-length string, then an empty tag section.
    assert body[:12] == struct.pack(">hhih", 22, 4, 9, 2) + b"me"
    assert body[12] == 0
    # Body: compact nullable string "tx" = uvarint(3) + b"tx".
    assert body[13:16] == b"\x03tx"


def test_non_flexible_request_uses_header_v1() -> None:
    frame = encode_request(ApiKey.INIT_PRODUCER_ID, 1, 9, None, InitProducerIdRequest(None, 1000))
    assert frame[4:] == struct.pack(">hhih", 22, 1, 9, -1) + struct.pack(">hi", -1, 1000)


def test_api_versions_response_header_is_v0_even_when_flexible() -> None:
    header, _ = decode_request(
        encode_request(ApiKey.API_VERSIONS, 3, 42, "c", ApiVersionsRequest("x", "1"))[4:]
    )
    raw = b"".join(encode_response(header, ApiVersionsResponse(0, [ApiVersion(0, 0, 9)], 0)))
    # size, correlation id, then directly the body: error_code int16 (no tagged-field byte in between).
    assert raw[4:8] == struct.pack(">i", 42)
    assert raw[8:10] == b"\x00\x00"


def test_other_flexible_responses_use_header_v1() -> None:
    header, _ = decode_request(
        encode_request(ApiKey.INIT_PRODUCER_ID, 4, 42, "c", InitProducerIdRequest())[4:]
    )
    raw = b"".join(encode_response(header, InitProducerIdResponse(0, 0, 1, 2)))
    assert raw[4:9] == struct.pack(">i", 42) + b"\x00"


def test_unknown_api_key_and_version_keep_the_header() -> None:
    frame = struct.pack(">hhih", 999, 0, 5, 1) + b"x" + b"garbage"
    with pytest.raises(UnsupportedVersionError) as info:
        decode_request(frame)
    assert info.value.header.correlation_id == 5
    assert info.value.header.api_key == 999

    max_v = API_SPECS[ApiKey.PRODUCE].max_version
    frame = struct.pack(">hhih", 0, max_v + 1, 6, -1) + b"\x00" * 10
    with pytest.raises(UnsupportedVersionError) as info:
        decode_request(frame)
    assert (info.value.header.api_version, info.value.header.correlation_id) == (max_v + 1, 6)


def test_produce_v0_to_v2_are_not_decoded() -> None:
    for version in (0, 1, 2):
        with pytest.raises(UnsupportedVersionError):
            decode_request(struct.pack(">hhih", 0, version, 1, -1) + b"\x00" * 16)


def test_trailing_bytes_are_ignored_as_kafka_does() -> None:
    # librdkafka 2.16's Metadata v12 request for all topics, captured from confluent-kafka's
    # AdminClient.list_topics(): a 4-byte placeholder where the compact null array (1 byte) belongs.
    frame = bytes.fromhex("0003000c00000003000772646b61666b610000000000010000")
    header, body = decode_request(frame)
    assert (header.api_key, header.api_version) == (ApiKey.METADATA, 12)
    assert body.topics is None


def test_header_too_short() -> None:
    with pytest.raises(ProtocolError):
        decode_request_header(b"\x00\x01")
