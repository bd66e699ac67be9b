"""Connection limits and request / mutation quotas enforced by the real broker process:
`max.connections.per.ip` (and its overrides, set at run time with IncrementalAlterConfigs), a
`request_percentage` quota (KIP-124) seen as throttle_time_ms by raw requests and by confluent-kafka's
throttle callback, and a `controller_mutation_rate` quota (KIP-599) turning the excess of a CreateTopics
into THROTTLING_QUOTA_EXCEEDED for kafka-python's admin client (CreateTopics v7), and into a throttle for
confluent-kafka's (librdkafka sends v4, older than KIP-599's strict versions, as Kafka treats it).

One broker for the module, quota windows of 1 s (`quota.window.num=2`): a client may burst one second's
worth of its quota, which keeps these tests short. Each test uses its own client id, and the per-IP
test puts the broker's configs back.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient

from exactly.errors import ErrorCode
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.alter_client_quotas import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    EntityData,
    EntryData,
    OpData,
)
from exactly.protocol.messages.api_versions import ApiVersionsRequest
from exactly.protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest, CreateTopicsResponse
from exactly.protocol.messages.describe_configs import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
    DescribeConfigsResponse,
)
from exactly.protocol.messages.incremental_alter_configs import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from exactly.protocol.messages.metadata import MetadataRequest
from exactly.testing.processes import BrokerProcess
from tests.interop.client import RawClient
from tests.interop.support import running_broker

pytestmark = pytest.mark.interop

TIMEOUT = 20.0
SETTINGS = ("quota.window.num=2", "quota.window.size.seconds=1")
BROKER_RESOURCE, SET, DELETE = 4, 0, 1


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path_factory.mktemp("quota-enforcement") / "data", *SETTINGS) as proc:
        yield proc


def wait_for(condition: Callable[[], bool], what: str, timeout: float = TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def alter_broker_configs(client: RawClient, **ops: str | None) -> tuple[int, str | None]:
    """IncrementalAlterConfigs on the cluster default: SET a value, DELETE for None."""
    configs = [
        AlterableConfig(name.replace("_", "."), DELETE if value is None else SET, value)
        for name, value in ops.items()
    ]
    request = IncrementalAlterConfigsRequest([AlterConfigsResource(BROKER_RESOURCE, "", configs)], False)
    response: IncrementalAlterConfigsResponse = client.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, request)
    return response.responses[0].error_code, response.responses[0].error_message


def set_client_quota(bootstrap: str, client_id: str, key: str, value: float) -> None:
    admin = RawClient(bootstrap, client_id="quota-admin")
    try:
        entry = EntryData([EntityData("client-id", client_id)], [OpData(key, value, False)])
        response: AlterClientQuotasResponse = admin.request(
            ApiKey.ALTER_CLIENT_QUOTAS, 1, AlterClientQuotasRequest([entry], False)
        )
        assert [(e.error_code, e.error_message) for e in response.entries] == [(ErrorCode.NONE, None)]
    finally:
        admin.close()


def answers(client: RawClient) -> bool:
    try:
        client.request(ApiKey.API_VERSIONS, 3, ApiVersionsRequest("t", "1"))
    except (ConnectionError, OSError):
        return False
    return True


def test_a_connection_over_max_connections_per_ip_is_closed_and_an_override_lifts_it(
    broker: BrokerProcess,
) -> None:
    first = RawClient(broker.bootstrap, client_id="per-ip-first")
    try:
        bad = alter_broker_configs(first, max_connections_per_ip="1", max_connections_per_ip_overrides="x")
        assert bad[0] == ErrorCode.INVALID_CONFIG
        assert "max.connections.per.ip.overrides" in (bad[1] or "")
        assert alter_broker_configs(first, max_connections_per_ip="-1")[0] == ErrorCode.INVALID_CONFIG
        assert alter_broker_configs(first, max_connections_per_ip="1") == (ErrorCode.NONE, None)
        second = RawClient(broker.bootstrap, client_id="per-ip-second")
        try:
            assert not answers(second)  # closed at once after accept
        finally:
            second.close()
        assert answers(first)  # the first keeps working
        wait_for(lambda: "rejected connection from 127.0.0.1" in broker.log(), "the INFO line")
        # An override for 127.0.0.1 lifts the limit for that address.
        assert alter_broker_configs(first, max_connections_per_ip_overrides="127.0.0.1:2") == (
            ErrorCode.NONE,
            None,
        )
        second = RawClient(broker.bootstrap, client_id="per-ip-second")
        third = RawClient(broker.bootstrap, client_id="per-ip-third")
        try:
            assert answers(second)
            assert not answers(third)  # the override's own limit holds
        finally:
            second.close()
            third.close()
    finally:
        try:
            assert alter_broker_configs(
                first, max_connections_per_ip=None, max_connections_per_ip_overrides=None
            ) == (ErrorCode.NONE, None)
        finally:
            first.close()
    again = RawClient(broker.bootstrap)
    try:
        assert answers(again)
    finally:
        again.close()


def test_a_request_percentage_quota_throttles_raw_requests(broker: BrokerProcess) -> None:
    set_client_quota(broker.bootstrap, "busy-raw", "request_percentage", 0.001)  # 10 µs of handling a second
    client = RawClient(broker.bootstrap, client_id="busy-raw")
    try:
        throttles = [0]
        deadline = time.monotonic() + TIMEOUT
        while throttles[-1] == 0 and time.monotonic() < deadline:
            throttles.append(
                client.request(ApiKey.METADATA, 9, MetadataRequest(topics=None)).throttle_time_ms
            )
        assert 0 < throttles[-1] <= 1000, throttles  # at most one quota window (Kafka's bound)
    finally:
        client.close()
    other = RawClient(broker.bootstrap, client_id="not-busy")
    try:
        assert other.request(ApiKey.METADATA, 9, MetadataRequest(topics=None)).throttle_time_ms == 0
    finally:
        other.close()


def test_a_request_percentage_quota_reaches_confluent_kafkas_throttle_callback(broker: BrokerProcess) -> None:
    set_client_quota(broker.bootstrap, "busy-producer", "request_percentage", 0.01)
    throttled: list[Any] = []
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "client.id": "busy-producer",
            "linger.ms": 0,
            "throttle_cb": throttled.append,
        }
    )
    deadline = time.monotonic() + TIMEOUT
    while not throttled and time.monotonic() < deadline:
        producer.produce("busy-topic", b"x")
        producer.poll(0.05)
    producer.flush(TIMEOUT)
    assert throttled, "no throttle event"
    assert throttled[0].throttle_time > 0


def test_a_controller_mutation_rate_quota_refuses_the_excess_of_a_create_topics(
    broker: BrokerProcess,
) -> None:
    # 1 partition per second, 2 windows of 1 s: a burst of 1. The first topic takes the bucket to -4;
    # the others do not fit. kafka-python sends CreateTopics v7: the strict quota of KIP-599.
    set_client_quota(broker.bootstrap, "mutator", "controller_mutation_rate", 1.0)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="mutator")
    try:
        result = admin.create_topics(
            {f"mutated-{i}": {"num_partitions": 5, "replication_factor": 1} for i in range(3)},
            raise_errors=False,
        )
    finally:
        admin.close()
    assert [(t["name"], t["error_code"]) for t in result["topics"]] == [
        ("mutated-0", ErrorCode.NONE),
        ("mutated-1", ErrorCode.THROTTLING_QUOTA_EXCEEDED),
        ("mutated-2", ErrorCode.THROTTLING_QUOTA_EXCEEDED),
    ]
    assert result["topics"][1]["error_message"] == "The throttling quota has been exceeded."


def test_confluent_kafkas_admin_client_is_throttled_by_a_controller_mutation_rate_quota(
    broker: BrokerProcess,
) -> None:
    # librdkafka sends CreateTopics v4, before KIP-599's strict versions: as with Kafka, every topic is
    # created and the client is throttled (throttle_time_ms, its throttle callback) instead.
    set_client_quota(broker.bootstrap, "confluent-mutator", "controller_mutation_rate", 1.0)
    throttled: list[Any] = []
    admin = AdminClient(
        {
            "bootstrap.servers": broker.bootstrap,
            "client.id": "confluent-mutator",
            "throttle_cb": throttled.append,
        }
    )
    futures = admin.create_topics(
        [NewTopic(f"confluent-mutated-{i}", num_partitions=5, replication_factor=1) for i in range(2)],
        operation_timeout=TIMEOUT,
    )
    for future in futures.values():
        future.result(timeout=TIMEOUT)
    wait_for(lambda: admin.poll(0.05) is not None and bool(throttled), "a throttle event")
    assert 5.0 <= throttled[0].throttle_time <= 9.0  # s: 10 partitions over a burst of 1, at 1/s


def test_old_create_topics_versions_are_throttled_not_refused(broker: BrokerProcess) -> None:
    set_client_quota(broker.bootstrap, "old-mutator", "controller_mutation_rate", 1.0)
    client = RawClient(broker.bootstrap, client_id="old-mutator")
    try:
        topics = [CreatableTopic(f"old-mutated-{i}", 5, 1) for i in range(2)]
        response: CreateTopicsResponse = client.request(
            ApiKey.CREATE_TOPICS, 5, CreateTopicsRequest(topics, 10_000, False)
        )
        assert [t.error_code for t in response.topics] == [ErrorCode.NONE, ErrorCode.NONE]
        assert 5_000 <= response.throttle_time_ms <= 9_000  # 10 partitions over a burst of 1, at 1/s
    finally:
        client.close()


def test_a_listener_limit_is_a_dynamic_config_described_under_its_own_name(broker: BrokerProcess) -> None:
    client = RawClient(broker.bootstrap, client_id="listener-limit")
    try:
        bad = alter_broker_configs(client, listener_name_plaintext_max_connections="-5")
        assert bad[0] == ErrorCode.INVALID_CONFIG
        assert "listener.name.plaintext.max.connections" in (bad[1] or "")
        ok = alter_broker_configs(client, listener_name_plaintext_max_connections="1000")
        assert ok == (ErrorCode.NONE, None)
        for resource in ("", "0"):
            request = DescribeConfigsRequest([DescribeConfigsResource(BROKER_RESOURCE, resource, None)])
            response: DescribeConfigsResponse = client.request(ApiKey.DESCRIBE_CONFIGS, 1, request)
            values = {c.name: c.value for c in response.results[0].configs}
            assert values["listener.name.plaintext.max.connections"] == "1000", resource
        other = RawClient(broker.bootstrap)
        try:
            assert answers(other)  # a limit above what is open: still accepting
        finally:
            other.close()
        assert alter_broker_configs(client, listener_name_plaintext_max_connections=None) == (
            ErrorCode.NONE,
            None,
        )
    finally:
        client.close()
