"""A handler that raises (a bug) costs its request an error answer, not the connection: UNKNOWN_SERVER_ERROR
in every error field of the response, one log line with the cause, the same connection serves the next
request, and other clients never notice (issue 14). The fault is injected with the test-only
`exactly.debug.raise.in.api`."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.admin import KafkaAdminClient
from kafka.admin import NewTopic as KpNewTopic

from exactly.errors import ErrorCode
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from exactly.protocol.messages.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from exactly.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from tests.interop.client import RawClient
from tests.interop.support import running_broker

pytestmark = pytest.mark.interop


def test_a_raising_handler_answers_unknown_server_error_and_keeps_the_connection(tmp_path: Path) -> None:
    settings = ("exactly.debug.raise.in.api=CreateTopics,ListOffsets", "num.partitions=2")
    with running_broker(tmp_path / "data", *settings) as broker:
        client = RawClient(broker.bootstrap)
        try:
            auto = MetadataRequest(
                topics=[MetadataRequestTopic(name="existing")], allow_auto_topic_creation=True
            )
            assert client.request(ApiKey.METADATA, 12, auto).topics[0].error_code in (
                0,
                ErrorCode.LEADER_NOT_AVAILABLE,
            )
            created = client.request(
                ApiKey.CREATE_TOPICS,
                7,
                CreateTopicsRequest(topics=[CreatableTopic("a", 1, 1), CreatableTopic("b", 3, 1)]),
            )
            assert [(t.name, t.error_code, t.error_message) for t in created.topics] == [
                ("a", ErrorCode.UNKNOWN_SERVER_ERROR, "unexpected broker error"),
                ("b", ErrorCode.UNKNOWN_SERVER_ERROR, "unexpected broker error"),
            ]
            offsets = client.request(
                ApiKey.LIST_OFFSETS,
                7,
                ListOffsetsRequest(
                    replica_id=-1,
                    topics=[
                        ListOffsetsTopic(
                            "existing",
                            [ListOffsetsPartition(0, timestamp=-1), ListOffsetsPartition(1, timestamp=-1)],
                        )
                    ],
                ),
            )
            assert [
                (t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in offsets.topics
            ] == [("existing", [(0, ErrorCode.UNKNOWN_SERVER_ERROR), (1, ErrorCode.UNKNOWN_SERVER_ERROR)])]
            # the same connection goes on: Metadata answers, and shows that nothing was half-created
            metadata = client.request(
                ApiKey.METADATA,
                12,
                MetadataRequest(
                    topics=[MetadataRequestTopic(name=n) for n in ("existing", "a")],
                    allow_auto_topic_creation=False,
                ),
            )
            assert [(t.name, t.error_code, len(t.partitions)) for t in metadata.topics] == [
                ("existing", 0, 2),
                ("a", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, 0),
            ]
        finally:
            client.close()
        # a real client sees the error code, not a dropped connection
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        futures = admin.create_topics([NewTopic("c", 1, 1)], operation_timeout=10)
        with pytest.raises(KafkaException) as info:
            futures["c"].result(timeout=30)
        assert info.value.args[0].code() == ErrorCode.UNKNOWN_SERVER_ERROR
        assert "existing" in admin.list_topics(timeout=20).topics
        # kafka-python too: the error code in the result, and the same client goes on
        kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=20000)
        try:
            result = kp.create_topics([KpNewTopic("d", 1, 1)], raise_errors=False)
            assert [(t["name"], t["error_code"]) for t in result["topics"]] == [
                ("d", ErrorCode.UNKNOWN_SERVER_ERROR)
            ]
            topics = kp.list_topics()
            assert "existing" in topics
            assert "d" not in topics
        finally:
            kp.close()
        lines = [line for line in broker.log().splitlines() if "answering UNKNOWN_SERVER_ERROR" in line]
        assert len(lines) == 4
        assert "CREATE_TOPICS v7" in lines[0]
        assert "RuntimeError: exactly.debug.raise.in.api" in lines[0]
        assert "traceback logged before" in lines[2]
        assert "closing it" not in broker.log()  # the old answer to a failing handler: a dropped connection


def test_a_response_that_cannot_be_encoded_is_answered_unknown_server_error(tmp_path: Path) -> None:
    """A handler's answer that fails to encode (a bug in the handler) is a handler failure as well: the
    request gets UNKNOWN_SERVER_ERROR, not a dropped connection."""
    settings = ("exactly.debug.unencodable.response.in.api=ListOffsets", "num.partitions=1")
    with running_broker(tmp_path / "data", *settings) as broker:
        client = RawClient(broker.bootstrap)
        try:
            auto = MetadataRequest(topics=[MetadataRequestTopic(name="t")], allow_auto_topic_creation=True)
            client.request(ApiKey.METADATA, 12, auto)
            request = ListOffsetsRequest(
                replica_id=-1, topics=[ListOffsetsTopic("t", [ListOffsetsPartition(0, timestamp=-1)])]
            )
            for _ in range(2):  # twice on the same connection: it stays open and usable
                offsets = client.request(ApiKey.LIST_OFFSETS, 7, request)
                assert [
                    (t.name, [(p.partition_index, p.error_code) for p in t.partitions])
                    for t in offsets.topics
                ] == [("t", [(0, ErrorCode.UNKNOWN_SERVER_ERROR)])]
            metadata = client.request(
                ApiKey.METADATA, 12, MetadataRequest(topics=[MetadataRequestTopic(name="t")])
            )
            assert [(t.name, t.error_code, len(t.partitions)) for t in metadata.topics] == [("t", 0, 1)]
        finally:
            client.close()
        lines = [line for line in broker.log().splitlines() if "answering UNKNOWN_SERVER_ERROR" in line]
        assert len(lines) == 2
        assert "AttributeError" in lines[0]
        assert "closing it" not in broker.log()
