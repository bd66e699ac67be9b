"""Smaller validations and answers Kafka makes (issue 10, item 1b), through the real clients.

* A compacted topic refuses records without a key: INVALID_RECORD for the whole batch (with Kafka's
  per-record message, which kafka-python shows), nothing stored, keyed records still accepted; an
  idempotent producer goes on after the refusal.
* With no authorizer, Describe requests that ask for authorized operations get every operation the
  resource supports (Metadata/DescribeTopics, DescribeCluster, DescribeGroups); not asked, INT32_MIN.
* A CreateTopics error carries an empty configs array, never null.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest

from exactly.errors import ErrorCode
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from exactly.protocol.messages.describe_cluster import DescribeClusterRequest
from exactly.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from exactly.security.operations import OMITTED
from exactly.testing.processes import BrokerProcess
from tests.interop.client import RawClient
from tests.interop.support import create_topic, fetch_partition, running_broker

pytestmark = pytest.mark.interop

TIMEOUT = 30.0
KEYLESS_MESSAGE = "Compacted topic cannot accept message without key in topic partition {}-0"
TOPIC_OPERATIONS = {
    "READ",
    "WRITE",
    "CREATE",
    "DELETE",
    "ALTER",
    "DESCRIBE",
    "DESCRIBE_CONFIGS",
    "ALTER_CONFIGS",
}
CLUSTER_OPERATIONS = {
    "CREATE",
    "ALTER",
    "DESCRIBE",
    "CLUSTER_ACTION",
    "DESCRIBE_CONFIGS",
    "ALTER_CONFIGS",
    "IDEMPOTENT_WRITE",
}
GROUP_OPERATIONS = {"READ", "DELETE", "DESCRIBE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path_factory.mktemp("parity") / "data") as proc:
        yield proc


def _stored(broker: BrokerProcess, topic: str) -> list[tuple[bytes | None, bytes | None]]:
    dump = fetch_partition(broker.bootstrap, topic, 0)
    assert dump.error_code == ErrorCode.NONE
    return [(r.key, r.value) for r in dump.records]


# --- keyless records on a compacted topic -------------------------------------------------------------


@pytest.mark.parametrize("idempotent", [False, True])
def test_confluent_keyless_record_refused_on_compacted_topic(broker: BrokerProcess, idempotent: bool) -> None:
    from confluent_kafka import KafkaError, Producer

    topic = f"compacted-confluent-{idempotent}"
    create_topic(broker.bootstrap, topic, configs={"cleanup.policy": "compact"})
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "enable.idempotence": idempotent, "linger.ms": 100}
    )
    reports: list[tuple[Any, bytes]] = []

    def on_delivery(error: Any, message: Any) -> None:
        reports.append((error, message.value()))

    # one batch: a keyed record and a keyless one; Kafka refuses the whole batch
    producer.produce(topic, key=b"a", value=b"keyed", on_delivery=on_delivery)
    producer.produce(topic, value=b"keyless", on_delivery=on_delivery)
    assert producer.flush(TIMEOUT) == 0
    assert sorted(v for _, v in reports) == [b"keyed", b"keyless"]
    assert all(e is not None and e.code() == KafkaError.INVALID_RECORD for e, _ in reports), reports
    assert _stored(broker, topic) == []

    reports.clear()
    producer.produce(topic, key=b"b", value=b"after", on_delivery=on_delivery)
    assert producer.flush(TIMEOUT) == 0
    assert reports == [(None, b"after")]
    assert _stored(broker, topic) == [(b"b", b"after")]


def test_kafka_python_keyless_record_refused_with_kafkas_message(broker: BrokerProcess) -> None:
    from kafka import KafkaProducer
    from kafka.errors import InvalidRecordError

    topic = "compacted-kafka-python"
    create_topic(broker.bootstrap, topic, configs={"cleanup.policy": "compact,delete"})
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, retries=0)
    try:
        with pytest.raises(InvalidRecordError) as e:
            producer.send(topic, value=b"keyless").get(TIMEOUT)
        # kafka-python reports the record error Kafka lists for the batch (Produce v8+ record_errors)
        assert KEYLESS_MESSAGE.format(topic) in str(e.value)
        assert producer.send(topic, key=b"k", value=b"keyed").get(TIMEOUT).offset == 0
    finally:
        producer.close()
    assert _stored(broker, topic) == [(b"k", b"keyed")]


def test_aiokafka_keyless_record_refused(broker: BrokerProcess) -> None:
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaError

    topic = "compacted-aiokafka"
    create_topic(broker.bootstrap, topic, configs={"cleanup.policy": "compact"})

    async def run() -> int:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap)
        await producer.start()
        try:
            # aiokafka (Produce v7) does not know code 87 by name: it raises its UnknownError
            with pytest.raises(KafkaError):
                await producer.send_and_wait(topic, value=b"keyless")
            metadata = await producer.send_and_wait(topic, key=b"k", value=b"keyed")
            offset: int = metadata.offset
            return offset
        finally:
            await producer.stop()

    assert asyncio.run(run()) == 0
    assert _stored(broker, topic) == [(b"k", b"keyed")]


def test_keyless_records_accepted_when_not_compacted(broker: BrokerProcess) -> None:
    from confluent_kafka import Producer

    create_topic(broker.bootstrap, "not-compacted", configs={"cleanup.policy": "delete"})
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    errors: list[Any] = []
    producer.produce("not-compacted", value=b"v", on_delivery=lambda e, _m: errors.append(e))
    assert producer.flush(TIMEOUT) == 0
    assert errors == [None]
    assert _stored(broker, "not-compacted") == [(None, b"v")]


# --- authorized operations ----------------------------------------------------------------------------


def test_confluent_admin_gets_every_supported_operation(broker: BrokerProcess) -> None:
    from confluent_kafka import Consumer, TopicCollection
    from confluent_kafka.admin import AdminClient

    create_topic(broker.bootstrap, "ops-topic")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    described = admin.describe_topics(TopicCollection(["ops-topic"]), include_authorized_operations=True)
    topic = described["ops-topic"].result(TIMEOUT)
    assert {op.name for op in topic.authorized_operations} == TOPIC_OPERATIONS

    cluster = admin.describe_cluster(include_authorized_operations=True).result(TIMEOUT)
    assert {op.name for op in cluster.authorized_operations} == CLUSTER_OPERATIONS
    assert admin.describe_cluster().result(TIMEOUT).authorized_operations is None  # not asked

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "ops-group"})
    try:
        consumer.subscribe(["ops-topic"])
        deadline = time.monotonic() + TIMEOUT
        while not consumer.assignment():
            assert time.monotonic() < deadline, "consumer never got an assignment"
            consumer.poll(0.2)
        groups = admin.describe_consumer_groups(["ops-group"], include_authorized_operations=True)
        group = groups["ops-group"].result(TIMEOUT)
        assert {op.name for op in group.authorized_operations} == GROUP_OPERATIONS
        plain = admin.describe_consumer_groups(["ops-group"])["ops-group"].result(TIMEOUT)
        assert plain.authorized_operations is None
    finally:
        consumer.close()


def test_kafka_python_admin_gets_every_supported_operation(broker: BrokerProcess) -> None:
    from kafka.admin import KafkaAdminClient

    create_topic(broker.bootstrap, "ops-kafka-python")
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=int(TIMEOUT * 1000))
    try:
        (topic,) = admin.describe_topics(["ops-kafka-python"])
        assert topic["error_code"] == 0
        assert set(topic["authorized_operations"]) == TOPIC_OPERATIONS
        assert set(admin.describe_cluster()["authorized_operations"]) == CLUSTER_OPERATIONS
    finally:
        admin.close()


def test_operations_are_int32_min_unless_asked(broker: BrokerProcess) -> None:
    """Raw requests, so that "not asked" is really not asked; also the Metadata v8-10 cluster field and
    a topic with an error (Kafka fills every topic's field when asked)."""
    create_topic(broker.bootstrap, "ops-raw")
    client = RawClient(broker.bootstrap)
    try:
        for version in (8, 10, 12):
            for asked in (False, True):
                request = MetadataRequest(
                    topics=[MetadataRequestTopic(name="ops-raw"), MetadataRequestTopic(name="ops-missing")],
                    allow_auto_topic_creation=False,
                    include_cluster_authorized_operations=asked,
                    include_topic_authorized_operations=asked,
                )
                response = client.request(ApiKey.METADATA, version, request)
                found, missing = response.topics
                assert found.error_code == ErrorCode.NONE
                assert missing.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                topic_ops = 0b1101_1111_1000 if asked else OMITTED  # bits 3-8, 10, 11
                assert found.topic_authorized_operations == topic_ops, (version, asked)
                assert missing.topic_authorized_operations == topic_ops, (version, asked)
                if version <= 10:  # the cluster field exists in v8-10 only
                    cluster_ops = 0b1_1111_1010_0000 if asked else OMITTED  # bits 5, 7-12
                    assert response.cluster_authorized_operations == cluster_ops, (version, asked)
        for asked in (False, True):
            describe = DescribeClusterRequest(include_cluster_authorized_operations=asked)
            cluster = client.request(ApiKey.DESCRIBE_CLUSTER, 0, describe)
            assert cluster.cluster_authorized_operations == (0b1_1111_1010_0000 if asked else OMITTED)
    finally:
        client.close()


# --- CreateTopics error results -----------------------------------------------------------------------


def test_create_topics_error_has_empty_configs(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "exists-already")
    client = RawClient(broker.bootstrap)
    try:
        request = CreateTopicsRequest([CreatableTopic("exists-already", 1, 1, [], [])], 10_000, False)
        for version in (5, 7):
            (result,) = client.request(ApiKey.CREATE_TOPICS, version, request).topics
            assert result.error_code == ErrorCode.TOPIC_ALREADY_EXISTS
            assert result.configs == []
            assert (result.num_partitions, result.replication_factor) == (-1, -1)
    finally:
        client.close()
