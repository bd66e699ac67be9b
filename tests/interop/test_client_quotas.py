"""Client quotas through the real broker: AlterClientQuotas / DescribeClientQuotas with our codecs (no
Python client has them), stored across a restart, and producer_byte_rate / consumer_byte_rate enforced
on confluent-kafka clients and raw requests: throttle_time_ms, a muted connection, a delayed response
for pre-KIP-219 versions, and an empty throttled fetch.

The module's broker measures rates over 2 windows of 1 s (`quota.window.num=2`), so a client may burst
one second's worth of its quota before it is throttled, which keeps these tests short.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from exactly.errors import ErrorCode
from exactly.protocol.api import encode_request
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.alter_client_quotas import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    EntityData,
    EntryData,
    OpData,
)
from exactly.protocol.messages.api_versions import ApiVersionsRequest
from exactly.protocol.messages.describe_client_quotas import ComponentData, DescribeClientQuotasRequest
from exactly.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from exactly.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from exactly.records.builder import BatchBuilder
from exactly.testing.processes import BrokerProcess
from tests.interop.client import RawClient
from tests.interop.support import create_topic, fetch_partition, running_broker

pytestmark = pytest.mark.interop

TIMEOUT = 30.0
SETTINGS = ("quota.window.num=2", "quota.window.size.seconds=1")
EXACT, DEFAULT, SPECIFIED = 0, 1, 2
PRODUCER = "producer_byte_rate"
CONSUMER = "consumer_byte_rate"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path_factory.mktemp("quotas") / "data", *SETTINGS) as proc:
        yield proc


def alter(bootstrap: str, *entries: EntryData, validate_only: bool = False) -> AlterClientQuotasResponse:
    client = RawClient(bootstrap, client_id="quota-admin")
    try:
        response: AlterClientQuotasResponse = client.request(
            ApiKey.ALTER_CLIENT_QUOTAS, 1, AlterClientQuotasRequest(list(entries), validate_only)
        )
        return response
    finally:
        client.close()


def entry(entity: dict[str, str | None], **ops: float | None) -> EntryData:
    return EntryData(
        [EntityData(t, n) for t, n in entity.items()],
        [OpData(k, v if v is not None else 0.0, v is None) for k, v in ops.items()],
    )


def set_quota(bootstrap: str, client_id: str, key: str, value: float) -> None:
    response = alter(bootstrap, entry({"client-id": client_id}, **{key: value}))
    assert [(e.error_code, e.error_message) for e in response.entries] == [(ErrorCode.NONE, None)]


def described(bootstrap: str, components: list[ComponentData], strict: bool = False, version: int = 1) -> Any:
    client = RawClient(bootstrap, client_id="quota-admin")
    try:
        return client.request(
            ApiKey.DESCRIBE_CLIENT_QUOTAS, version, DescribeClientQuotasRequest(components, strict)
        )
    finally:
        client.close()


def entries_of(response: Any) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
    assert response.error_code == ErrorCode.NONE
    return {
        tuple((e.entity_type, e.entity_name) for e in item.entity): {v.key: v.value for v in item.values}
        for item in response.entries
    }


def batch(size: int) -> bytes:
    builder = BatchBuilder()
    builder.append(int(time.time() * 1000), None, b"q" * size, [])
    return builder.build()


def raw_produce(client: RawClient, topic: str, records: bytes, version: int) -> Any:
    request = ProduceRequest(
        None, -1, 5000, [TopicProduceData(topic, partition_data=[PartitionProduceData(0, records)])]
    )
    return client.request(ApiKey.PRODUCE, version, request)


# --- Alter / Describe ---------------------------------------------------------------------------------------


def test_alter_and_describe(broker: BrokerProcess) -> None:
    b = broker.bootstrap
    response = alter(
        b,
        entry({"user": "alice", "client-id": "app"}, producer_byte_rate=1024.0, consumer_byte_rate=2048.0),
        entry({"user": None}, producer_byte_rate=4096.0),
        entry({"client-id": "bad"}, producer_byte_rate=1.5),
        entry({"group": "g"}, producer_byte_rate=1.0),
        entry({"user": "alice"}, producer_byte_rate=1.0, **{"connection_creation_rate": 3.0}),
        entry({"user": None}, producer_byte_rate=1.0),
    )
    assert [(e.error_code, e.error_message) for e in response.entries] == [
        (ErrorCode.NONE, None),
        (ErrorCode.NONE, None),
        (ErrorCode.INVALID_REQUEST, "Quota producer_byte_rate had a non-integer value 1.5"),
        (ErrorCode.INVALID_REQUEST, "Unhandled client quota entity type: group"),
        (ErrorCode.INVALID_REQUEST, "Invalid configuration key connection_creation_rate"),
        (ErrorCode.INVALID_REQUEST, "Ignoring duplicate entity ClientQuotaEntity(entries={user=null})"),
    ]
    assert [(x.entity_type, x.entity_name) for x in response.entries[0].entity] == [
        ("user", "alice"),
        ("client-id", "app"),
    ]
    # validate_only changes nothing.
    assert (
        alter(b, entry({"user": "bob"}, producer_byte_rate=10.0), validate_only=True).entries[0].error_code
        == 0
    )

    alice = described(b, [ComponentData("user", EXACT, "alice")])
    assert entries_of(alice) == {
        (("client-id", "app"), ("user", "alice")): {CONSUMER: 2048.0, PRODUCER: 1024.0},
    }
    assert entries_of(described(b, [ComponentData("user", EXACT, "alice")], strict=True)) == {}
    assert entries_of(described(b, [ComponentData("user", DEFAULT, None)], version=0)) == {
        (("user", None),): {PRODUCER: 4096.0}
    }
    assert entries_of(described(b, [ComponentData("user", SPECIFIED, None)])) == {
        (("client-id", "app"), ("user", "alice")): {CONSUMER: 2048.0, PRODUCER: 1024.0},
    }
    refused = described(b, [ComponentData("user", EXACT, None)])
    assert (refused.error_code, refused.error_message, refused.entries) == (
        ErrorCode.INVALID_REQUEST,
        "Request specified MATCH_TYPE_EXACT, but set match string to null.",
        None,
    )

    # Removing the last value forgets the entity.
    response = alter(b, entry({"user": None}, producer_byte_rate=None))
    assert response.entries[0].error_code == ErrorCode.NONE
    assert entries_of(described(b, [ComponentData("user", DEFAULT, None)])) == {}
    response = alter(
        b, entry({"user": "alice", "client-id": "app"}, producer_byte_rate=None, consumer_byte_rate=None)
    )
    assert response.entries[0].error_code == ErrorCode.NONE
    assert entries_of(described(b, [ComponentData("user", SPECIFIED, None)])) == {}


def test_quotas_survive_a_restart(tmp_path: Path) -> None:
    with running_broker(tmp_path / "data") as proc:
        response = alter(proc.bootstrap, entry({"client-id": None}, consumer_byte_rate=5_000_000.0))
        assert response.entries[0].error_code == ErrorCode.NONE
        proc.kill()  # no clean shutdown: the quota was fsynced before it was acknowledged
        proc.start()
        assert entries_of(described(proc.bootstrap, [])) == {(("client-id", None),): {CONSUMER: 5_000_000.0}}


# --- enforcement --------------------------------------------------------------------------------------------


def produce_sequentially(
    bootstrap: str, client_id: str, topic: str, count: int, size: int
) -> tuple[float, list[float]]:
    """`count` messages of `size` bytes, one request at a time; (seconds taken, throttle times reported)."""
    from confluent_kafka import Producer

    throttles: list[float] = []
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": client_id,
            "linger.ms": 0,
            "acks": "all",
            "throttle_cb": lambda event: throttles.append(event.throttle_time),
        }
    )
    start = time.monotonic()
    for i in range(count):
        producer.produce(topic, value=bytes([65 + i % 26]) * size, partition=0)
        assert producer.flush(TIMEOUT) == 0
    elapsed = time.monotonic() - start
    producer.poll(0)
    return elapsed, throttles


def test_producer_byte_rate_throttles_a_producer(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "produce-quota")
    set_quota(broker.bootstrap, "slow-producer", PRODUCER, 100_000.0)
    # 300 KB at 100 KB/s after a one-second burst: about two seconds at least.
    elapsed, throttles = produce_sequentially(broker.bootstrap, "slow-producer", "produce-quota", 30, 10_000)
    assert any(t > 0 for t in throttles), throttles
    assert elapsed >= 1.0, elapsed
    # A client without a quota is never throttled.
    _, unthrottled = produce_sequentially(broker.bootstrap, "fast-producer", "produce-quota", 30, 10_000)
    assert unthrottled == []
    stored = fetch_partition(broker.bootstrap, "produce-quota", 0)
    assert len(stored.values) == 60
    assert stored.values[:2] == [b"A" * 10_000, b"B" * 10_000]


def test_consumer_byte_rate_throttles_a_consumer(broker: BrokerProcess) -> None:
    from confluent_kafka import Consumer, TopicPartition

    create_topic(broker.bootstrap, "fetch-quota")
    client = RawClient(broker.bootstrap, client_id="filler")
    try:
        for _ in range(30):
            assert (
                raw_produce(client, "fetch-quota", batch(10_000), 9)
                .responses[0]
                .partition_responses[0]
                .error_code
                == 0
            )
    finally:
        client.close()
    set_quota(broker.bootstrap, "slow-consumer", CONSUMER, 100_000.0)
    throttles: list[float] = []
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "client.id": "slow-consumer",
            "group.id": "quota-group",
            "enable.auto.commit": False,
            "throttle_cb": lambda event: throttles.append(event.throttle_time),
        }
    )
    try:
        consumer.assign([TopicPartition("fetch-quota", 0, 0)])
        values: list[bytes] = []
        start = time.monotonic()
        deadline = start + 60
        while len(values) < 30 and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                values.append(message.value())
        elapsed = time.monotonic() - start
    finally:
        consumer.close()
    assert values == [b"q" * 10_000] * 30
    assert any(t > 0 for t in throttles), throttles
    assert elapsed >= 1.0, elapsed


def test_raw_throttled_fetch_is_empty_and_mutes_the_connection(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "raw-fetch-quota")
    filler = RawClient(broker.bootstrap, client_id="filler")
    try:
        for _ in range(2):
            raw_produce(filler, "raw-fetch-quota", batch(10_000), 9)
    finally:
        filler.close()
    # 12,000 B/s: one window allows 12,000 bytes, so max_bytes is capped there and only the first batch
    # comes back; fetching it again puts the client over its quota.
    set_quota(broker.bootstrap, "raw-fetcher", CONSUMER, 12_000.0)
    client = RawClient(broker.bootstrap, timeout=TIMEOUT, client_id="raw-fetcher")
    try:
        request = FetchRequest(
            replica_id=-1,
            max_wait_ms=0,
            min_bytes=0,
            max_bytes=1 << 20,
            isolation_level=0,
            topics=[FetchTopic("raw-fetch-quota", partitions=[FetchPartition(0, -1, 0, -1, -1, 1 << 20)])],
        )
        first = client.request(ApiKey.FETCH, 12, request)
        assert first.throttle_time_ms == 0
        assert len(bytes(first.responses[0].partitions[0].records)) < 12_000  # one batch, not both
        # Fetching the same batch again goes over the quota (a loaded machine may need a few tries).
        for _ in range(5):
            throttled = client.request(ApiKey.FETCH, 12, request)
            if throttled.throttle_time_ms > 0:
                break
        assert throttled.throttle_time_ms > 0
        assert throttled.responses == []
        # The connection reads nothing until the throttle time is over.
        start = time.monotonic()
        client.request(ApiKey.API_VERSIONS, 3, ApiVersionsRequest("t", "1"))
        waited = time.monotonic() - start
        assert waited >= throttled.throttle_time_ms / 1000 * 0.8, (waited, throttled.throttle_time_ms)
    finally:
        client.close()


def test_raw_produce_before_kip_219_gets_a_delayed_response(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "old-produce-quota")
    set_quota(broker.bootstrap, "old-producer", PRODUCER, 5_000.0)
    client = RawClient(broker.bootstrap, timeout=TIMEOUT, client_id="old-producer")
    try:
        # 10 KB over a 1 s window at 5,000 B/s: (10,000 - 5,000) / 5,000 * 1 s of throttling.
        start = time.monotonic()
        response = raw_produce(client, "old-produce-quota", batch(10_000), 5)
        waited = time.monotonic() - start
    finally:
        client.close()
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.NONE
    assert response.throttle_time_ms >= 500
    assert waited >= response.throttle_time_ms / 1000 * 0.9, (waited, response.throttle_time_ms)


def test_a_muted_connection_does_not_hold_up_shutdown(tmp_path: Path) -> None:
    with running_broker(tmp_path / "data", *SETTINGS) as proc:
        create_topic(proc.bootstrap, "stuck")
        filler = RawClient(proc.bootstrap, client_id="filler")
        try:
            raw_produce(filler, "stuck", batch(10_000), 9)
        finally:
            filler.close()
        # 500 B/s against a 10 KB batch: (10,000 - 500) / 500 * 1 s = about 19 s of throttling.
        set_quota(proc.bootstrap, "stuck-fetcher", CONSUMER, 500.0)
        client = RawClient(proc.bootstrap, timeout=TIMEOUT, client_id="stuck-fetcher")
        try:
            request = FetchRequest(
                replica_id=-1,
                max_wait_ms=0,
                min_bytes=0,
                max_bytes=1 << 20,
                isolation_level=0,
                topics=[FetchTopic("stuck", partitions=[FetchPartition(0, -1, 0, -1, -1, 1 << 20)])],
            )
            response = client.request(ApiKey.FETCH, 12, request)
            assert response.throttle_time_ms > 15_000
            assert response.responses == []
            # A request the muted connection holds back until the broker shuts down.
            client.send_raw(
                encode_request(ApiKey.API_VERSIONS, 3, 99, "stuck-fetcher", ApiVersionsRequest("t", "1"))
            )
            time.sleep(0.2)  # let it arrive (only to make the test meaningful; passing does not depend on it)
            start = time.monotonic()
            assert proc.stop(timeout=TIMEOUT) == 0
            assert time.monotonic() - start < 10, "shutdown waited for the throttle"
        finally:
            client.close()
