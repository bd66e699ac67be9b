"""Spliced Metadata responses (exactly.broker.metadata_encoding) are byte for byte the generated encoding."""

from __future__ import annotations

import uuid

import pytest

from exactly.broker.metadata_encoding import SPLICED_FROM_VERSION, MetadataEncodings, encode_topic
from exactly.errors import ErrorCode
from exactly.protocol.api import response_body_chunks
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.metadata import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)

VERSIONS = range(SPLICED_FROM_VERSION, 14)


def _topic(name: str, partitions: int, ops: int = -(1 << 31)) -> MetadataResponseTopic:
    parts = [MetadataResponsePartition(ErrorCode.NONE, i, 1, 0, [1], [1], []) for i in range(partitions)]
    topic = MetadataResponseTopic(ErrorCode.NONE, name, uuid.uuid5(uuid.NAMESPACE_DNS, name), False, parts)
    topic.topic_authorized_operations = ops
    return topic


def _response(topics: list[MetadataResponseTopic]) -> MetadataResponse:
    return MetadataResponse(
        brokers=[MetadataResponseBroker(1, "127.0.0.1", 9092, None)],
        cluster_id="c",
        controller_id=1,
        topics=topics,
        cluster_authorized_operations=-(1 << 31),
    )


@pytest.mark.parametrize("version", VERSIONS)
def test_spliced_response_equals_the_generated_one(version: int) -> None:
    topics = [
        _topic("a", 3),
        _topic("b", 0),
        MetadataResponseTopic(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "missing"),
        _topic("c", 130, ops=1016),
    ]
    expected = b"".join(response_body_chunks(ApiKey.METADATA, version, _response(topics)))
    encodings = MetadataEncodings()
    entries = [((t.name, len(t.partitions)) if t.error_code == 0 else None, lambda t=t: t) for t in topics]
    for _ in range(2):  # the second time from the cache
        spliced = encodings.encode(version, _response([]), list(entries))  # type: ignore[arg-type]
        assert b"".join(spliced.chunks) == expected


def test_a_cached_topic_is_not_rebuilt() -> None:
    built: list[str] = []

    def build() -> MetadataResponseTopic:
        built.append("t")
        return _topic("t", 5)

    encodings = MetadataEncodings()
    first = encodings.encode(12, _response([]), [(("t", 5), build)])
    again = encodings.encode(12, _response([]), [(("t", 5), build)])
    assert built == ["t"]
    assert b"".join(first.chunks) == b"".join(again.chunks)
    assert encode_topic(12, _topic("t", 5)) in b"".join(again.chunks)
