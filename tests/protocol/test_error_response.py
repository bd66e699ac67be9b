"""The error response to any request: encodable at the request's version, the error in every error field,
the request's entities mirrored."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from exactly.errors import ErrorCode
from exactly.protocol.api import API_SPECS, RequestHeader, encode_response
from exactly.protocol.error_response import error_response
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from exactly.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from exactly.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from exactly.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from tests.protocol.strategies import all_versions, message

CODE = ErrorCode.UNKNOWN_SERVER_ERROR


def error_codes(value: Any) -> list[int]:
    """Every error_code in `value`, depth first."""
    out = []
    if dataclasses.is_dataclass(value):
        for f in dataclasses.fields(value):
            inner = getattr(value, f.name)
            if f.name == "error_code":
                out.append(inner)
            else:
                out += error_codes(inner)
    elif isinstance(value, list):
        for item in value:
            out += error_codes(item)
    return out


@pytest.mark.parametrize(("key", "version"), all_versions())
@settings(max_examples=15, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(data=st.data())
def test_every_api_and_version_has_an_encodable_error_response(key: ApiKey, version: int, data: Any) -> None:
    request = data.draw(message(key, version, "request"))
    response = error_response(key, request, CODE, "boom")
    codes = error_codes(response)
    assert set(codes) <= {int(CODE)}
    if hasattr(response, "error_code"):
        assert response.error_code == CODE
    header = RequestHeader(int(key), version, 7, "c")
    frame = b"".join(bytes(c) for c in encode_response(header, response))
    assert len(frame) > 8
    assert API_SPECS[int(key)].key == key


def test_produce_gets_the_error_for_every_partition_it_wrote() -> None:
    request = ProduceRequest(
        acks=-1,
        topic_data=[
            TopicProduceData(
                name="a", partition_data=[PartitionProduceData(index=0), PartitionProduceData(index=3)]
            ),
            TopicProduceData(name="b", partition_data=[PartitionProduceData(index=1)]),
        ],
    )
    response = error_response(ApiKey.PRODUCE, request, CODE, "boom")
    got = [(t.name, p.index, p.error_code) for t in response.responses for p in t.partition_responses]
    assert got == [("a", 0, -1), ("a", 3, -1), ("b", 1, -1)]
    assert response.node_endpoints == []


def test_fetch_metadata_and_create_topics_mirror_their_entities() -> None:
    fetch = FetchRequest(topics=[FetchTopic(topic="t", partitions=[FetchPartition(partition=2)])])
    response = error_response(ApiKey.FETCH, fetch, CODE, None)
    assert response.error_code == -1
    assert [
        (r.topic, [(p.partition_index, p.error_code) for p in r.partitions]) for r in response.responses
    ] == [("t", [(2, -1)])]
    metadata = MetadataRequest(topics=[MetadataRequestTopic(name="x"), MetadataRequestTopic(name="y")])
    response = error_response(ApiKey.METADATA, metadata, CODE, None)
    assert [(t.name, t.error_code) for t in response.topics] == [("x", -1), ("y", -1)]
    create = CreateTopicsRequest(topics=[CreatableTopic(name="n", num_partitions=3)])
    response = error_response(ApiKey.CREATE_TOPICS, create, CODE, "boom")
    assert [(t.name, t.error_code, t.error_message) for t in response.topics] == [("n", -1, "boom")]
