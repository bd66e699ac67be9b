"""The broker process answers the real clients' handshake and survives bad input (issue 4)."""

from __future__ import annotations

import struct
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from exactly import __version__
from exactly.compiled import COMPILED_MODULES, compiled_modules, describe_build
from exactly.errors import ErrorCode
from exactly.protocol.api import decode_response
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.api_versions import ApiVersionsRequest
from exactly.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from exactly.testing.processes import BrokerProcess
from tests.interop.client import RawClient

pytestmark = pytest.mark.interop


def test_api_versions_advertises_produce_from_v0(broker: BrokerProcess) -> None:
    client = RawClient(broker.bootstrap)
    response = client.request(ApiKey.API_VERSIONS, 3, ApiVersionsRequest("test", "1"))
    assert response.error_code == ErrorCode.NONE
    ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert ranges[ApiKey.API_VERSIONS] == (0, 4)
    assert ranges[ApiKey.METADATA] == (0, 13)
    assert ranges[ApiKey.PRODUCE] == (0, 13)


def test_unknown_api_versions_version_gets_v0_error_body(broker: BrokerProcess) -> None:
    client = RawClient(broker.bootstrap)
    client.send_frame(struct.pack(">hhih", ApiKey.API_VERSIONS, 99, 5, 1) + b"x" + b"\x00\x00")
    correlation_id, body = decode_response(ApiKey.API_VERSIONS, 0, client.read_frame())
    assert correlation_id == 5
    assert body.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert any(k.api_key == ApiKey.API_VERSIONS and k.max_version == 4 for k in body.api_keys)


def test_metadata_auto_creates_and_rejects_bad_names(broker: BrokerProcess) -> None:
    client = RawClient(broker.bootstrap)
    response = client.request(
        ApiKey.METADATA,
        12,
        MetadataRequest([MetadataRequestTopic(name="fresh"), MetadataRequestTopic(name="bad name!")], True),
    )
    by_name = {t.name: t for t in response.topics}
    assert by_name["fresh"].error_code == ErrorCode.NONE
    assert len(by_name["fresh"].partitions) == 1
    assert by_name["fresh"].topic_id.int != 0
    assert by_name["bad name!"].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert response.brokers[0].port == broker.port
    # The topic id is stable across a restart.
    broker.restart()
    again = RawClient(broker.bootstrap).request(
        ApiKey.METADATA, 12, MetadataRequest([MetadataRequestTopic(name="fresh")], False)
    )
    assert again.topics[0].topic_id == by_name["fresh"].topic_id


def test_metadata_auto_creates_the_internal_topics_as_their_coordinators_do(broker: BrokerProcess) -> None:
    """Asked first by Metadata (kcat -L -t __consumer_offsets on a fresh broker), the internal topics get
    their coordinators' partition counts, not num.partitions, and the coordinators then work."""
    client = RawClient(broker.bootstrap)
    internal = ("__consumer_offsets", "__transaction_state")
    response = client.request(
        ApiKey.METADATA, 12, MetadataRequest([MetadataRequestTopic(name=n) for n in internal], True)
    )
    by_name = {t.name: t for t in response.topics}
    for name in internal:
        assert by_name[name].error_code == ErrorCode.NONE
        assert by_name[name].is_internal
        assert len(by_name[name].partitions) == 50
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "after-metadata"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce("after-metadata", b"v")
    producer.commit_transaction(30)
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "after-metadata", "auto.offset.reset": "earliest"}
    )
    try:
        consumer.subscribe(["after-metadata"])
        message = None
        deadline = time.monotonic() + 30
        while message is None and time.monotonic() < deadline:
            message = consumer.poll(0.5)
        assert message is not None
        assert message.error() is None
        assert message.value() == b"v"
        consumer.commit(message, asynchronous=False)
        committed = consumer.committed([TopicPartition("after-metadata", 0)], timeout=30)
        assert committed[0].offset == 1
    finally:
        consumer.close()


@pytest.mark.parametrize(
    "garbage",
    [
        struct.pack(">i", 200_000_000),  # over socket.request.max.bytes
        struct.pack(">i", -1),
        struct.pack(">i", 3) + b"\x00\x03\x00",  # header cut short
        struct.pack(">i", 10) + struct.pack(">hhih", ApiKey.METADATA, 12, 1, 50),  # client_id past the end
        struct.pack(">i", 10) + struct.pack(">hhih", 999, 0, 1, -1),  # unknown API key
    ],
    ids=["oversized", "negative-size", "short-header", "truncated-string", "unknown-api"],
)
def test_bad_frames_close_only_that_connection(broker: BrokerProcess, garbage: bytes) -> None:
    good = RawClient(broker.bootstrap)
    good.request(ApiKey.API_VERSIONS, 3, ApiVersionsRequest("t", "1"))
    bad = RawClient(broker.bootstrap)
    bad.send_raw(garbage)
    assert bad.is_closed_by_peer()
    response = good.request(ApiKey.METADATA, 12, MetadataRequest(None, False))
    assert response.error_code == ErrorCode.NONE
    assert "closing connection" in broker.log()


def test_clean_shutdown_on_sigterm(broker: BrokerProcess) -> None:
    assert broker.stop() == 0
    assert "stopped" in broker.log()


def test_confluent_kafka_sees_the_broker_and_auto_created_topic(broker: BrokerProcess) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    md = admin.list_topics("auto-topic", timeout=10)
    assert list(md.brokers) == [0]
    assert md.topics["auto-topic"].error is None
    assert list(md.topics["auto-topic"].partitions) == [0]


def test_kafka_python_and_aiokafka_bootstrap(broker: BrokerProcess) -> None:
    import asyncio

    from aiokafka import AIOKafkaClient
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, request_timeout_ms=5000)
    try:
        assert producer.partitions_for("kafka-python-topic") == {0}
    finally:
        producer.close()

    async def aio() -> set[str]:
        aio_client = AIOKafkaClient(bootstrap_servers=broker.bootstrap)
        await aio_client.bootstrap()
        try:
            await aio_client.force_metadata_update()
            return {b.nodeId for b in aio_client.cluster.brokers()}  # type: ignore[misc]
        finally:
            await aio_client.close()

    assert asyncio.run(aio()) == {0}


def test_the_broker_logs_its_version_and_whether_it_runs_compiled(broker: BrokerProcess) -> None:
    """The broker runs the build these tests import: pure Python from `src`, or the compiled build under
    `make pytest-compiled` (which first checks that this process loaded every compiled module)."""
    count = len(COMPILED_MODULES)
    build = f"compiled with mypyc ({count} of {count} modules)" if compiled_modules() else "pure Python"
    assert describe_build() == build
    assert f"exactly {__version__}, {build}" in broker.full_log()
