"""Differential test against kafka-python 3.0.12's own protocol classes.

kafka-python 3.0 builds one `ApiMessage` class per request/response from the Kafka JSON it bundles
(`kafka/protocol/schemas/resources`) and compiles a decoder/encoder per version at runtime
(`kafka.protocol.schemas.fields.codegen`): an implementation independent of our generator, although it
reads the same JSON. For every (API, version) we generate and kafka-python's class accepts, a random
message drawn with our strategy is

1. encoded with ours into a complete frame (size prefix, header, body),
2. decoded by kafka-python, header included (`Cls.decode(frame, version=v, header=True, framed=True)`),
3. re-encoded by kafka-python (`obj.encode(header=True, framed=True)`): the whole frame must be identical,
   so the header rules (request header v1/v2, response header v0/v1, ApiVersions' v0 exception) are
   compared too,
4. decoded by ours: the result must equal the drawn message.

kafka-python's codec accepts every value of every wire type (no enums or datetimes), so nothing is
narrowed. Two kafka-python quirks shape the calls:

* `ApiVersionsResponse.decode` reads the body as **v0** whenever `error_code != 0` (what brokers send
  for an unsupported ApiVersions version); the generic `ApiMessage.decode` is used for the codec
  comparison, and the quirk itself is pinned in `test_api_versions_error_response_is_read_as_v0`.
* `obj.encode(version=v)` on a decoded *response* raises AttributeError (the `API_VERSION` setter writes
  `request_api_version` into a `ResponseHeader`), so the version is checked on the decoded object and
  `encode()` is called without it.
"""

from __future__ import annotations

from typing import Any

import kafka.protocol.admin
import kafka.protocol.consumer
import kafka.protocol.metadata
import kafka.protocol.producer  # noqa: F401 - importing the packages defines their ApiMessage classes
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.api_message import ApiMessage

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
from exactly.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from tests.protocol.strategies import all_versions, long_values, message

KINDS = ("request", "response")
SETTINGS = settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# The broker's hot path and every transaction API: each must be compared in every version we generate.
REQUIRED = {
    ApiKey.PRODUCE,
    ApiKey.FETCH,
    ApiKey.LIST_OFFSETS,
    ApiKey.METADATA,
    ApiKey.FIND_COORDINATOR,
    ApiKey.JOIN_GROUP,
    ApiKey.SYNC_GROUP,
    ApiKey.HEARTBEAT,
    ApiKey.OFFSET_COMMIT,
    ApiKey.OFFSET_FETCH,
    ApiKey.INIT_PRODUCER_ID,
    ApiKey.ADD_PARTITIONS_TO_TXN,
    ApiKey.ADD_OFFSETS_TO_TXN,
    ApiKey.END_TXN,
    ApiKey.TXN_OFFSET_COMMIT,
    ApiKey.API_VERSIONS,
}


def _subclasses(cls: type[Any]) -> list[type[Any]]:
    return [s for sub in cls.__subclasses__() for s in (sub, *_subclasses(sub))]


# (api_key, "request"|"response") -> kafka-python's primary (unversioned) message class.
KP_CLASSES: dict[tuple[int, str], type[Any]] = {
    (cls.API_KEY, cls.type): cls
    for cls in _subclasses(ApiMessage)
    if cls._class_version is None and getattr(cls, "_json", None) is not None
}


def kp_has(key: int, version: int, kind: str) -> bool:
    cls = KP_CLASSES.get((key, kind))
    return cls is not None and cls.valid_versions[0] <= version <= cls.valid_versions[1]


PAIRS = [(key, v, kind) for key, v in all_versions() for kind in KINDS if kp_has(key, v, kind)]


def test_required_apis_are_compared_in_every_version() -> None:
    compared = set(PAIRS)
    for key in REQUIRED:
        spec = API_SPECS[key]
        for version in range(spec.min_version, spec.max_version + 1):
            for kind in KINDS:
                assert (key, version, kind) in compared, (key.name, version, kind)


def ours_encode(key: ApiKey, version: int, kind: str, msg: Any) -> bytes:
    if kind == "request":
        return encode_request(key, version, 7, "kafka-python-diff", msg)
    return b"".join(encode_response(RequestHeader(key, version, 7, "c"), msg))


def ours_decode(key: ApiKey, version: int, kind: str, frame: bytes) -> Any:
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    if kind == "request":
        header, decoded = decode_request(frame[4:])
        assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
            key,
            version,
            7,
            "kafka-python-diff",
        )
        return decoded
    correlation_id, decoded = decode_response(key, version, frame[4:])
    assert correlation_id == 7
    return decoded


def check_against_kafka_python(key: ApiKey, version: int, kind: str, msg: Any) -> None:
    frame = ours_encode(key, version, kind, msg)

    cls = KP_CLASSES[(key, kind)]
    # The generic decoder, also for ApiVersionsResponse (see the module docstring).
    obj = ApiMessage.decode.__func__(cls, frame, version=version, header=True, framed=True)
    assert version == obj.API_VERSION
    assert obj.header.correlation_id == 7
    kp_frame = bytes(obj.encode(header=True, framed=True))

    assert kp_frame == frame
    assert ours_decode(key, version, kind, kp_frame) == msg


@pytest.mark.parametrize(
    ("key", "version", "kind"), PAIRS, ids=[f"{k.name}-v{v}-{kind}" for k, v, kind in PAIRS]
)
@SETTINGS
@given(data=st.data())
def test_ours_and_kafka_python_agree(key: ApiKey, version: int, kind: str, data: st.DataObject) -> None:
    check_against_kafka_python(key, version, kind, data.draw(message(key, version, kind)))


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
def test_long_compact_lengths_agree_with_kafka_python(
    key: ApiKey, version: int, kind: str, data: st.DataObject
) -> None:
    # Strings/bytes/records of 100-400 bytes: compact lengths (and tagged-field sizes) as 2-byte uvarints.
    check_against_kafka_python(key, version, kind, data.draw(message(key, version, kind, long_values)))


@pytest.mark.parametrize("version", [8, 9])
def test_wide_produce_request_agrees_with_kafka_python(version: int) -> None:
    # More than 127 topics/partitions and a 20 KB records blob: multi-byte array counts and lengths.
    topics = [
        TopicProduceData(f"topic-{t}", partition_data=[PartitionProduceData(p, bytes(p)) for p in range(130)])
        for t in range(3)
    ]
    topics.append(TopicProduceData("big", partition_data=[PartitionProduceData(0, bytes(range(256)) * 80)]))
    request = ProduceRequest(transactional_id="tx" * 100, acks=-1, timeout_ms=30000, topic_data=topics)
    check_against_kafka_python(ApiKey.PRODUCE, version, "request", request)


@pytest.mark.parametrize("request_version", [0, 3, 4])
def test_api_versions_error_response_is_read_as_v0(request_version: int) -> None:
    # A broker answers an ApiVersions request version it does not support with a v0 body carrying
    # UNSUPPORTED_VERSION (35) and its ranges; kafka-python parses such a body as v0 whatever version it
    # asked for, then retries with the advertised maximum.
    body = ApiVersionsResponse(error_code=35, api_keys=[ApiVersion(18, 0, 4), ApiVersion(0, 0, 9)])
    frame = b"".join(encode_response(RequestHeader(ApiKey.API_VERSIONS, 0, 7, "c"), body))
    cls = KP_CLASSES[(ApiKey.API_VERSIONS, "response")]
    obj = cls.decode(frame, version=request_version, header=True, framed=True)
    assert obj.API_VERSION == 0
    assert obj.error_code == 35
    assert [(k.api_key, k.min_version, k.max_version) for k in obj.api_keys] == [(18, 0, 4), (0, 0, 9)]
    assert bytes(obj.encode(header=True, framed=True)) == frame
