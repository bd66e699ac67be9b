"""Differential test against kio (Aiven-Open/kio 0.6.5), an independent implementation of the same specs.

For every (API, version) we generate codecs for and kio has schemas for, a random message drawn with our
strategy is

1. encoded with our codec (`encode_request` / `encode_response`, header stripped),
2. decoded with kio (`entity_reader(cls)(buf, offset) -> (entity, size)`): every byte must be consumed,
3. re-encoded with kio (`entity_writer(cls)(writable, entity)`): the body bytes must be identical,
4. decoded with our codec (our header + kio's body, through `decode_request` / `decode_response`): the
   result must equal the drawn message.

Headers are not part of the comparison: kio models them as separate entities (`RequestHeader` v1/v2,
`ResponseHeader` v0/v1); the header rules are pinned in test_api.py.

Where kio's object model is narrower than the wire, the drawn values are narrowed to kio's domain
(`_kio_domain`), and nothing else is relaxed:

* `error_code` fields are read into kio's `ErrorCode` enum, which rejects codes Kafka does not define:
  we draw defined codes only.
* `*_ms` duration fields (`timedelta_i32` / `timedelta_i64`) become `datetime.timedelta`, re-encoded as
  `round(total_seconds() * 1000)`; int32 durations are exact, int64 ones (`retention_time_ms`) lose
  precision above 2**53 microseconds through the float, so they are drawn below that.
* timestamp fields (`datetime_i64`: `log_append_time_ms`, `transaction_start_time_ms`) become aware
  datetimes (-1 ↔ None where the field is nullable in kio, i.e. `log_append_time_ms`); kio rejects other
  negative values ("Cannot parse negative timestamp") and datetimes end in year 9999: we draw
  0 .. 9999-12-31T23:59:59.999Z, plus -1 for the nullable ones. (kio types DescribeTransactions
  `transaction_start_time_ms` as a non-nullable datetime, so it cannot read the -1 Kafka sends for a
  transactional id with no ongoing transaction - a kio limitation, not ours.)

Tagged fields: kio writes a tagged field only when it differs from its default (the Java generator's
rule too); for tagged *scalars* ours does the same, and the byte comparison checks it. Tagged *structs*
are optional in our object model (None = absent), and ours writes any struct that is present, even one
equal to the default; kio cannot tell "absent" from "default" and omits it. `_absent_if_default` maps the
drawn message to the canonical form (default-valued tagged structs → None) before comparing with kio's
bytes; messages whose tagged structs all differ from the default are compared unchanged.
"""

from __future__ import annotations

import copy
import dataclasses
import io
import types
import typing
import uuid
from functools import cache
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode as KioErrorCode
from kio.schema.index import api_key_map, schema_name_map
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType

from exactly.protocol.api import (
    API_SPECS,
    RequestHeader,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.api_versions import ApiVersion, ApiVersionsResponse
from exactly.protocol.messages.fetch import (
    EpochEndOffset,
    FetchableTopicResponse,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    FetchTopic,
    ForgottenTopic,
    PartitionData,
)
from exactly.protocol.messages.metadata import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from tests.protocol.strategies import (
    FieldOverride,
    all_versions,
    api_name,
    chain,
    is_extension,
    long_values,
    message,
    message_structs,
)
from tools import gen_protocol as gen

KINDS = ("request", "response")
SETTINGS = settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def kio_has(key: int, version: int, kind: str) -> bool:
    """Whether kio 0.6.5 ships a schema for this message (it dropped the versions KIP-896 removed)."""
    name = api_key_map.get(key)
    entity = EntityType.request if kind == "request" else EntityType.response
    return name is not None and entity in schema_name_map.get(name, {}).get(version, {})


def kio_class(key: int, version: int, kind: str) -> type[Any]:
    load = load_request_schema if kind == "request" else load_response_schema
    return load(key, version)


PAIRS = [(key, v, kind) for key, v in all_versions() for kind in KINDS if kio_has(key, v, kind)]
SKIPPED = [(key, v, kind) for key, v in all_versions() for kind in KINDS if not kio_has(key, v, kind)]


# --- narrowing drawn values to kio's domain ---------------------------------------------------------------

_ERROR_CODES = st.sampled_from(sorted(int(code.value) for code in KioErrorCode))
# The epoch .. datetime(9999, 12, 31, 23, 59, 59, 999000) UTC in milliseconds; -1 only where kio's field is
# optional (None).
_DATETIME_MS = st.integers(0, 253_402_300_799_999)
_I64_DURATION_MS = st.integers(-(2**53) // 1000, 2**53 // 1000)
_DOMAINS: dict[str, st.SearchStrategy[int]] = {
    "error_code": _ERROR_CODES,
    "timedelta_i64": _I64_DURATION_MS,
    "datetime_i64": _DATETIME_MS,
    "datetime_i64 | None": st.just(-1) | _DATETIME_MS,
}


def _entity_types(hint: Any) -> list[type[Any]]:
    """The kio entity classes inside a field annotation (`X`, `X | None`, `tuple[X, ...]`)."""
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return [hint]
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) in (typing.Union, tuple):
        return [t for arg in typing.get_args(hint) for t in _entity_types(arg)]
    return []


def _kio_field(kio_cls: type[Any], f: gen.Field) -> dataclasses.Field[Any]:
    by_name = {kf.name: kf for kf in dataclasses.fields(kio_cls)}
    # kio drops the unit suffix of the fields it turns into timedeltas/datetimes.
    for name in (f.py, f.py.removesuffix("_ms")):
        if name in by_name:
            return by_name[name]
    raise AssertionError(f"kio {kio_cls.__qualname__} has no field for {f.py} ({sorted(by_name)})")


@cache
def _kio_kafka_types(key: int, version: int, kind: str) -> dict[tuple[str, str], str]:
    """(our struct name, our field name) → kio's `kafka_type` for every scalar field of the message,
    found by walking our struct tree and kio's entity tree side by side."""
    req, resp = message_structs(api_name(ApiKey(key)))
    found: dict[tuple[str, str], str] = {}

    def walk(struct: gen.Struct, kio_cls: type[Any]) -> None:
        hints = typing.get_type_hints(kio_cls)
        for f in struct.fields:
            if version not in f.versions:
                continue
            kf = _kio_field(kio_cls, f)
            if f.is_struct:
                assert f.struct is not None
                (inner,) = set(_entity_types(hints[kf.name]))
                walk(f.struct, inner)
            else:
                optional = type(None) in typing.get_args(hints[kf.name])
                found[(struct.name, f.py)] = kf.metadata["kafka_type"] + (" | None" if optional else "")

    walk(req if kind == "request" else resp, kio_class(key, version, kind))
    return found


def kio_domain(key: int, version: int, kind: str) -> FieldOverride:
    kafka_types = _kio_kafka_types(key, version, kind)

    def override(struct: gen.Struct, f: gen.Field, _version: int) -> st.SearchStrategy[Any] | None:
        return _DOMAINS.get(kafka_types[(struct.name, f.py)])

    return override


# --- tagged-struct convention -----------------------------------------------------------------------------


def _absent_if_default(msg: Any, struct: gen.Struct, version: int, flexible: bool) -> Any:
    """`msg` with every tagged struct field that equals the struct's default replaced by None (absent)."""
    if not flexible:
        return msg
    for f in struct.fields:
        if version not in f.versions or not f.is_struct:
            continue
        assert f.struct is not None
        value = getattr(msg, f.py)
        if value is None:
            continue
        if f.is_array:
            for item in value:
                _absent_if_default(item, f.struct, version, flexible)
        elif version in f.tagged and value == type(value)():
            setattr(msg, f.py, None)
        else:
            _absent_if_default(value, f.struct, version, flexible)
    return msg


def canonical(key: ApiKey, version: int, kind: str, msg: Any) -> Any:
    spec = API_SPECS[key]
    req, resp = message_structs(api_name(key))
    if kind == "request":
        return _absent_if_default(copy.deepcopy(msg), req, version, spec.request_is_flexible(version))
    return _absent_if_default(copy.deepcopy(msg), resp, version, spec.response_is_flexible(version))


# --- our codec, split into header and body ----------------------------------------------------------------


def ours_encode(key: ApiKey, version: int, kind: str, msg: Any) -> tuple[bytes, bytes]:
    """(size prefix + header, body) as our public encoders write them."""
    spec = API_SPECS[key]
    if kind == "request":
        frame = encode_request(key, version, 7, "c", msg)
        # size, api_key, api_version, correlation_id, client_id "c" (int16 length), v2 tag section
        head_len = 4 + 8 + 2 + 1 + (1 if spec.request_is_flexible(version) else 0)
    else:
        frame = b"".join(encode_response(RequestHeader(key, version, 7, "c"), msg))
        head_len = 4 + 4 + spec.response_header_version(version)
    return frame[:head_len], frame[head_len:]


def ours_decode(key: ApiKey, version: int, kind: str, head: bytes, body: bytes) -> Any:
    size = (len(head) + len(body) - 4).to_bytes(4, "big")
    frame = size + head[4:] + body
    if kind == "request":
        header, decoded = decode_request(frame[4:])
        assert (header.api_key, header.api_version, header.correlation_id) == (key, version, 7)
        return decoded
    correlation_id, decoded = decode_response(key, version, frame[4:])
    assert correlation_id == 7
    return decoded


# --- the tests --------------------------------------------------------------------------------------------


def test_kio_lacks_only_versions_below_its_minimum() -> None:
    # PAIRS skips what kio has no schema for. kio 0.6.5 dropped the versions KIP-896 removed (Produce 0-2,
    # Fetch 0-3, ...); anything else missing would be a surprise worth a look, not a silent skip.
    for key, version, kind in SKIPPED:
        if is_extension(key):
            continue  # exactly's own APIs: only our codec knows them
        name = api_key_map.get(key)
        assert name is not None, f"kio does not know API {key.name} at all"
        assert version < min(schema_name_map[name]), (key.name, version, kind)
    assert len(PAIRS) + len(SKIPPED) == 2 * len(all_versions())


def check_against_kio(key: ApiKey, version: int, kind: str, msg: Any) -> None:
    head, body = ours_encode(key, version, kind, msg)

    kio_cls = kio_class(key, version, kind)
    entity, size = entity_reader(kio_cls)(body, 0)
    assert size == len(body), f"kio consumed {size} of {len(body)} bytes"
    out = io.BytesIO()
    entity_writer(kio_cls)(out, entity)
    kio_body = out.getvalue()

    expected = canonical(key, version, kind, msg)
    if expected == msg:
        assert kio_body == body
    else:
        # The message has a default-valued tagged struct that we write and kio omits (module docstring):
        # kio's bytes must be exactly ours for the canonical message.
        assert kio_body == ours_encode(key, version, kind, expected)[1]
    assert ours_decode(key, version, kind, head, kio_body) == expected


@pytest.mark.parametrize(
    ("key", "version", "kind"), PAIRS, ids=[f"{k.name}-v{v}-{kind}" for k, v, kind in PAIRS]
)
@SETTINGS
@given(data=st.data())
def test_ours_and_kio_agree(key: ApiKey, version: int, kind: str, data: st.DataObject) -> None:
    check_against_kio(
        key, version, kind, data.draw(message(key, version, kind, kio_domain(key, version, kind)))
    )


FLEXIBLE_PAIRS = [
    (key, v, kind)
    for key, v, kind in PAIRS
    if (API_SPECS[key].request_is_flexible if kind == "request" else API_SPECS[key].response_is_flexible)(v)
]


@pytest.mark.parametrize(
    ("key", "version", "kind"),
    FLEXIBLE_PAIRS,
    ids=[f"{k.name}-v{v}-{kind}" for k, v, kind in FLEXIBLE_PAIRS],
)
@settings(SETTINGS, max_examples=4)
@given(data=st.data())
def test_long_compact_lengths_agree_with_kio(
    key: ApiKey, version: int, kind: str, data: st.DataObject
) -> None:
    # Strings/bytes/records of 100-400 bytes: compact lengths (and tagged-field sizes) as 2-byte uvarints.
    override = chain(kio_domain(key, version, kind), long_values)
    check_against_kio(key, version, kind, data.draw(message(key, version, kind, override)))


def test_wide_arrays_agree_with_kio() -> None:
    # More than 127 elements: compact array counts as 2-byte uvarints (the strategies draw at most 4).
    topics = [
        MetadataResponseTopic(
            0,
            f"topic-{i}",
            uuid.UUID(int=i + 1),
            False,
            [MetadataResponsePartition(0, p, 1, 5, list(range(130)), [1], []) for p in range(2)],
        )
        for i in range(130)
    ]
    metadata = MetadataResponse(
        brokers=[MetadataResponseBroker(1, "h", 9092, None)], cluster_id="c", topics=topics
    )
    check_against_kio(ApiKey.METADATA, 12, "response", metadata)
    fetch = FetchRequest(
        max_wait_ms=500,
        topics=[
            FetchTopic("t", partitions=[FetchPartition(p, -1, p * 10, -1, -1, 1 << 20) for p in range(200)])
        ],
        forgotten_topics_data=[ForgottenTopic("old", partitions=list(range(300)))],
    )
    check_against_kio(ApiKey.FETCH, 12, "request", fetch)
    versions = ApiVersionsResponse(api_keys=[ApiVersion(k, 0, k % 7) for k in range(140)])
    check_against_kio(ApiKey.API_VERSIONS, 3, "response", versions)


def test_default_tagged_struct_is_omitted_like_kio() -> None:
    # FetchResponse v12's tagged `diverging_epoch` (tag 0): like kio and Kafka's Java generator, we leave
    # out a tagged struct equal to its default, so both encodings are byte-identical; a set struct is
    # written and survives a kio round trip.
    def response(diverging_epoch: EpochEndOffset | None) -> FetchResponse:
        partition = PartitionData(partition_index=3, diverging_epoch=diverging_epoch)
        return FetchResponse(responses=[FetchableTopicResponse("t", partitions=[partition])])

    kio_cls = kio_class(ApiKey.FETCH, 12, "response")

    def through_kio(body: bytes) -> bytes:
        entity, size = entity_reader(kio_cls)(body, 0)
        assert size == len(body)
        out = io.BytesIO()
        entity_writer(kio_cls)(out, entity)
        return out.getvalue()

    _, with_default = ours_encode(ApiKey.FETCH, 12, "response", response(EpochEndOffset()))
    _, absent = ours_encode(ApiKey.FETCH, 12, "response", response(None))
    assert with_default == absent
    assert through_kio(absent) == absent

    set_epoch = response(EpochEndOffset(epoch=5, end_offset=42))
    _, written = ours_encode(ApiKey.FETCH, 12, "response", set_epoch)
    assert through_kio(written) == written
    assert canonical(ApiKey.FETCH, 12, "response", response(EpochEndOffset())) == response(None)
    assert canonical(ApiKey.FETCH, 12, "response", set_epoch) == set_epoch
