"""Request and response framing on top of the generated codecs: headers, version checks, entry points.

Request header (`RequestHeader.json`):

    v1: api_key int16, api_version int16, correlation_id int32, client_id nullable string (int16 length)
    v2: v1 + tagged fields                  (used when the API's request version is flexible)

`client_id` keeps the classic int16 length even in v2, so v1 fields can be read for any API key and
version: that is what lets a broker answer UNSUPPORTED_VERSION to requests it cannot decode.

Response header (`ResponseHeader.json`):

    v0: correlation_id int32
    v1: v0 + tagged fields                  (flexible response versions, EXCEPT ApiVersions: always v0)

Every public function here raises `ProtocolError` and nothing else on malformed input.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, NamedTuple

from exactly.errors import ProtocolError
from exactly.protocol import primitives as p
from exactly.protocol.messages import MODULES, ApiKey

_HEADER = struct.Struct(">hhi")
_RESPONSE_HEADER = struct.Struct(">i")
_DECODE_ERRORS = (struct.error, IndexError, UnicodeDecodeError, ValueError, OverflowError, MemoryError)


@dataclass(frozen=True, slots=True)
class ApiSpec:
    """What the generated codecs cover for one API."""

    key: ApiKey
    min_version: int
    max_version: int
    request_flexible_from: int
    response_flexible_from: int
    request_decoders: dict[int, Any]
    request_encoders: dict[int, Any]
    response_decoders: dict[int, Any]
    response_encoders: dict[int, Any]

    def request_is_flexible(self, version: int) -> bool:
        return 0 <= self.request_flexible_from <= version

    def response_header_version(self, version: int) -> int:
        if self.key == ApiKey.API_VERSIONS:
            return 0
        return 1 if 0 <= self.response_flexible_from <= version else 0

    def response_is_flexible(self, version: int) -> bool:
        return 0 <= self.response_flexible_from <= version


API_SPECS: dict[int, ApiSpec] = {
    int(key): ApiSpec(
        key=key,
        min_version=mod.MIN_VERSION,
        max_version=mod.MAX_VERSION,
        request_flexible_from=mod.REQUEST_FLEXIBLE_FROM,
        response_flexible_from=mod.RESPONSE_FLEXIBLE_FROM,
        request_decoders=mod.REQUEST_DECODERS,
        request_encoders=mod.REQUEST_ENCODERS,
        response_decoders=mod.RESPONSE_DECODERS,
        response_encoders=mod.RESPONSE_ENCODERS,
    )
    for key, mod in MODULES.items()
}


# Per (api key, version), looked up once per request instead of through ApiSpec's methods:
# the request's body decoder and whether its header has tagged fields (flexible versions) ...
_REQUESTS: dict[tuple[int, int], tuple[Any, bool]] = {
    (key, version): (spec.request_decoders[version], spec.request_is_flexible(version))
    for key, spec in API_SPECS.items()
    for version in range(spec.min_version, spec.max_version + 1)
}
# ... and the response's body encoder and whether its header has tagged fields (header v1)
_RESPONSES: dict[tuple[int, int], tuple[Any, bool]] = {
    (key, version): (spec.response_encoders[version], spec.response_header_version(version) == 1)
    for key, spec in API_SPECS.items()
    for version in range(spec.min_version, spec.max_version + 1)
}


class RequestHeader(NamedTuple):
    """Request header fields. A NamedTuple, not a frozen dataclass: it is built for every request and
    constructing a frozen dataclass costs three times as much."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None

    @property
    def spec(self) -> ApiSpec | None:
        """The codecs for this request, or None when the key or version is not supported."""
        spec = API_SPECS.get(self.api_key)
        if spec is None or not spec.min_version <= self.api_version <= spec.max_version:
            return None
        return spec


class UnsupportedVersionError(ProtocolError):
    """A well-formed header for an API key or version we have no codec for."""

    def __init__(self, header: RequestHeader) -> None:
        super().__init__(f"unsupported api_key={header.api_key} api_version={header.api_version}")
        self.header = header


def decode_request_header(frame: bytes | bytearray | memoryview) -> tuple[RequestHeader, int]:
    """Header v1 fields of any request, and the position right after them (before v2's tagged fields)."""
    buf = frame if isinstance(frame, memoryview) else memoryview(frame)
    try:
        api_key, api_version, correlation_id = _HEADER.unpack_from(buf, 0)
        client_id, pos = p.read_nullable_string(buf, 8)
    except _DECODE_ERRORS as e:
        raise ProtocolError(f"malformed request header: {e}") from None
    return RequestHeader(api_key, api_version, correlation_id, client_id), pos


def decode_request(frame: bytes | bytearray | memoryview) -> tuple[RequestHeader, Any]:
    """Decode a whole request frame (without its 4-byte size prefix) into (header, body).

    Raises `UnsupportedVersionError` (carrying the header) for unknown keys/versions, `ProtocolError` for
    anything malformed. Bytes after the body are ignored, as Kafka does. Record fields in the body are
    memoryview slices of `frame` (zero copy).
    """
    buf = memoryview(frame)
    header, pos = decode_request_header(buf)
    found = _REQUESTS.get((header.api_key, header.api_version))
    if found is None:
        raise UnsupportedVersionError(header)
    decoder, flexible = found
    try:
        if flexible:
            pos = p.skip_tagged_fields(buf, pos) if buf[pos] else pos + 1
        body, pos = decoder(buf, pos)
    except _DECODE_ERRORS as e:
        name = API_SPECS[header.api_key].key.name
        raise ProtocolError(f"malformed {name} v{header.api_version} request: {e!r}") from None
    # Trailing bytes are ignored, as Kafka's own parser does: librdkafka 2.16 sends Metadata v12 "all
    # topics" requests with a 4-byte placeholder where the 1-byte compact null array goes.
    return header, body


@dataclass(frozen=True, slots=True)
class EncodedBody:
    """A response body its handler encoded itself (the chunks after the response header), e.g. Metadata's
    cached topic encodings (built with the generated encoders: see handlers/metadata.py) or ApiVersions'
    cached answer. `throttle_chunk`: the chunk that starts with the body's throttle_time_ms (int32), for
    a request-quota throttle to patch (None: the API's usual place, broker/throttling.py); `error_codes`:
    the codes the metrics count for it (those of the response it stands for)."""

    chunks: list[p.Chunk]
    throttle_chunk: int | None = None
    error_codes: tuple[int, ...] = ()


def response_body_chunks(api_key: int, api_version: int, body: Any) -> list[p.Chunk]:
    """The encoded body alone (no size prefix, no header), as chunks."""
    out: list[p.Chunk] = []
    API_SPECS[api_key].response_encoders[api_version](body, out)
    return out


def encode_response(header: RequestHeader, body: Any) -> list[p.Chunk]:
    """Size prefix + response header + body for the request `header`, as chunks to join or write."""
    encoder, tagged = _RESPONSES[(header.api_key, header.api_version)]
    head = _RESPONSE_HEADER.pack(header.correlation_id)
    chunks: list[p.Chunk] = [b"", head + b"\x00" if tagged else head]
    if type(body) is EncodedBody:
        chunks.extend(body.chunks)
    else:
        encoder(body, chunks)
    chunks[0] = _RESPONSE_HEADER.pack(sum(map(len, chunks)))
    return chunks


def encode_request(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None, body: Any
) -> bytes:
    """A complete request frame (with size prefix), as a client sends it."""
    spec = API_SPECS[api_key]
    head = _HEADER.pack(api_key, api_version, correlation_id) + p.nullable_string(client_id)
    if spec.request_is_flexible(api_version):
        head += b"\x00"
    return b"".join(_frame(spec.request_encoders[api_version], body, head))


def decode_response(api_key: int, api_version: int, frame: bytes | memoryview) -> tuple[int, Any]:
    """Decode a response frame (without size prefix) into (correlation_id, body)."""
    spec = API_SPECS[api_key]
    buf = memoryview(frame)
    try:
        (correlation_id,) = _RESPONSE_HEADER.unpack_from(buf, 0)
        pos = 4
        if spec.response_header_version(api_version):
            pos = p.skip_tagged_fields(buf, pos)
        body, pos = spec.response_decoders[api_version](buf, pos)
    except _DECODE_ERRORS as e:
        raise ProtocolError(f"malformed {spec.key.name} v{api_version} response: {e!r}") from None
    if pos != len(buf):
        raise ProtocolError(f"{len(buf) - pos} trailing bytes after {spec.key.name} v{api_version} response")
    return correlation_id, body


def _frame(encoder: Any, body: Any, head: bytes) -> list[p.Chunk]:
    chunks: list[p.Chunk] = [b"", head]
    encoder(body, chunks)
    chunks[0] = _RESPONSE_HEADER.pack(sum(map(len, chunks)))
    return chunks
