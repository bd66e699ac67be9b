"""Fetch v13-17 (topic ids) and incremental fetch sessions (KIP-227) against the real broker.

* Real clients through a recording proxy that decodes their requests with our codecs: librdkafka
  (confluent-kafka 2.16) fetches with Fetch v16 and topic ids (it has no fetch sessions); kafka-python
  (Fetch v12) opens a session and then sends incremental requests (session id, epoch >= 1, mostly no
  partitions). Their consumers, read_committed and read_uncommitted, see exactly the records they should.
* kafka-python infers a Kafka 4.x broker from our ApiVersions.
* Raw Fetch requests with our codecs: UNKNOWN_TOPIC_ID, session errors, forgotten topics, responses with
  only the partitions that changed, closing a session.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from exactly.errors import ErrorCode
from exactly.protocol.api import decode_request
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.fetch import (
    FetchPartition,
    FetchRequest,
    FetchResponse,
    FetchTopic,
    ForgottenTopic,
)
from exactly.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from exactly.records.batch import iter_batches
from exactly.testing.processes import BrokerProcess, free_port
from exactly.verify.proxy import FaultProxy
from tests.interop.client import RawClient
from tests.interop.support import create_topic, running_broker

pytestmark = pytest.mark.interop

DEADLINE = 60.0
ZERO = uuid.UUID(int=0)


# --- the fault proxy, with no rules, keeping the clients' Fetch requests -------------------------------


def seen_fetches(proxy: FaultProxy) -> list[tuple[int, FetchRequest]]:
    """The Fetch requests the clients sent through `proxy` so far, decoded: (version, body)."""
    out = []
    for frame in list(proxy.requests_seen):
        header, body = decode_request(frame)
        out.append((header.api_version, body))
    return out


@pytest.fixture
def proxied(tmp_path: Path) -> Iterator[tuple[BrokerProcess, FaultProxy]]:
    """A broker that advertises the proxy, so that clients send everything through it."""
    port = free_port()
    with FaultProxy(("127.0.0.1", port), seed=0) as proxy:
        proxy.keep_requests(frozenset({ApiKey.FETCH}))
        with running_broker(
            tmp_path / "data", f"advertised.listeners=127.0.0.1:{proxy.port}", port=port
        ) as broker:
            yield broker, proxy


def wait_until(condition: Callable[[], bool], what: str, timeout: float = DEADLINE) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


# --- librdkafka -------------------------------------------------------------------------------------


def _produce(bootstrap: str, topic: str) -> tuple[list[bytes], list[bytes]]:
    """Plain records, a committed and an aborted transaction: (committed values, aborted values)."""
    from confluent_kafka import Producer

    plain = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    committed = []
    for i in range(30):
        value = f"plain-{i}".encode()
        plain.produce(topic, value, partition=i % 3)
        committed.append(value)
    assert plain.flush(DEADLINE) == 0
    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": "fetch-versions"})
    txn.init_transactions(DEADLINE)
    txn.begin_transaction()
    for i in range(9):
        value = f"committed-{i}".encode()
        txn.produce(topic, value, partition=i % 3)
        committed.append(value)
    txn.commit_transaction(DEADLINE)
    txn.begin_transaction()
    aborted = []
    for i in range(6):
        value = f"aborted-{i}".encode()
        txn.produce(topic, value, partition=i % 3)
        aborted.append(value)
    txn.flush(DEADLINE)
    txn.abort_transaction(DEADLINE)
    return committed, aborted


def _consume_confluent(bootstrap: str, topic: str, isolation: str, expected: int) -> list[bytes]:
    from confluent_kafka import Consumer

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"confluent-{isolation}",
            "auto.offset.reset": "earliest",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        }
    )
    got: list[bytes] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + DEADLINE
        while len(got) < expected and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                got.append(message.value())
        end = time.monotonic() + 1.5  # nothing more may arrive: nothing aborted, nothing twice
        while time.monotonic() < end:
            message = consumer.poll(0.2)
            if message is not None and not message.error():
                got.append(message.value())
    finally:
        consumer.close()
    return got


def _consume_kafka_python(bootstrap: str, topic: str, isolation: str, expected: int) -> list[bytes]:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=f"kafka-python-{isolation}",
        auto_offset_reset="earliest",
        isolation_level=isolation,
        enable_auto_commit=False,
        fetch_max_wait_ms=100,
    )
    got: list[bytes] = []
    try:
        deadline = time.monotonic() + DEADLINE
        while len(got) < expected and time.monotonic() < deadline:
            for records in consumer.poll(500).values():
                got += [r.value for r in records]
        end = time.monotonic() + 1.5
        while time.monotonic() < end:
            for records in consumer.poll(200).values():
                got += [r.value for r in records]
    finally:
        consumer.close()
    return got


def test_librdkafka_fetches_v16_by_topic_id(proxied: tuple[BrokerProcess, FaultProxy]) -> None:
    """librdkafka 2.16 uses Fetch v16 with topic ids (it does not implement fetch sessions: every
    request is a sessionless full fetch, epoch -1)."""
    broker, proxy = proxied
    topic = "by-id"
    create_topic(broker.bootstrap, topic, partitions=3)
    topic_id = _topic_id(broker.bootstrap, topic)
    committed, aborted = _produce(f"127.0.0.1:{proxy.port}", topic)

    via = f"127.0.0.1:{proxy.port}"
    assert sorted(_consume_confluent(via, topic, "read_committed", len(committed))) == sorted(committed)
    everything = committed + aborted
    assert sorted(_consume_confluent(via, topic, "read_uncommitted", len(everything))) == sorted(everything)

    fetches = seen_fetches(proxy)
    assert fetches, "no Fetch request went through the proxy"
    assert {version for version, _ in fetches} == {16}
    assert {t.topic_id for _, r in fetches for t in r.topics} == {topic_id}
    assert {t.topic for _, r in fetches for t in r.topics} == {""}
    assert {(r.session_id, r.session_epoch) for _, r in fetches} == {(0, -1)}


def test_kafka_python_uses_incremental_fetch_sessions(proxied: tuple[BrokerProcess, FaultProxy]) -> None:
    """kafka-python 3.0 (Fetch v12) opens a session and then sends incremental requests."""
    broker, proxy = proxied
    topic = "incremental"
    create_topic(broker.bootstrap, topic, partitions=3)
    committed, aborted = _produce(broker.bootstrap, topic)

    via = f"127.0.0.1:{proxy.port}"
    assert sorted(_consume_kafka_python(via, topic, "read_committed", len(committed))) == sorted(committed)
    everything = committed + aborted
    got = _consume_kafka_python(via, topic, "read_uncommitted", len(everything))
    assert sorted(got) == sorted(everything)

    fetches = seen_fetches(proxy)
    assert {version for version, _ in fetches} == {12}
    opened = [r for _, r in fetches if r.session_epoch == 0]
    incremental = [r for _, r in fetches if r.session_id != 0 and r.session_epoch >= 1]
    assert opened, "kafka-python never asked for a fetch session"
    assert len(incremental) > len(opened), (len(opened), len(incremental))
    # Most incremental requests list no partition at all: the session remembers them.
    assert sum(1 for r in incremental if not r.topics) > len(incremental) // 2
    # The broker never refused a session: no sessionless fetch.
    assert not [r for _, r in fetches if r.session_epoch == -1]


def test_kafka_python_infers_a_kafka_4_broker(broker: BrokerProcess) -> None:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, api_version=None)
    try:
        assert consumer.config["api_version"] >= (4, 0)
    finally:
        consumer.close()


# --- raw requests ------------------------------------------------------------------------------------


def _topic_id(bootstrap: str, topic: str) -> uuid.UUID:
    client = RawClient(bootstrap)
    try:
        response = client.request(
            ApiKey.METADATA, 12, MetadataRequest([MetadataRequestTopic(name=topic)], False)
        )
        topic_id: uuid.UUID = response.topics[0].topic_id
        assert topic_id != ZERO
        return topic_id
    finally:
        client.close()


def _produce_values(bootstrap: str, topic: str, partition: int, values: list[bytes]) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap})
    for value in values:
        producer.produce(topic, value, partition=partition)
    assert producer.flush(DEADLINE) == 0


def _fetch(
    client: RawClient,
    topics: list[FetchTopic],
    session_id: int = 0,
    epoch: int = -1,
    forgotten: list[ForgottenTopic] | None = None,
    version: int = 17,
    max_wait_ms: int = 0,
) -> FetchResponse:
    request = FetchRequest(
        max_wait_ms=max_wait_ms,
        min_bytes=1,
        max_bytes=1 << 20,
        session_id=session_id,
        session_epoch=epoch,
        topics=topics,
        forgotten_topics_data=forgotten or [],
    )
    response: FetchResponse = client.request(ApiKey.FETCH, version, request)
    return response


def _values(records: Any) -> list[bytes]:
    out = []
    for batch in iter_batches(bytes(records or b"")):
        out += [r.value for r in batch.records() if r.value is not None]
    return out


def _partitions(response: FetchResponse) -> dict[tuple[uuid.UUID, int], Any]:
    return {(t.topic_id, p.partition_index): p for t in response.responses for p in t.partitions}


def test_unknown_topic_id_gets_unknown_topic_id(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "known")
    known = _topic_id(broker.bootstrap, "known")
    _produce_values(broker.bootstrap, "known", 0, [b"a", b"b"])
    unknown = uuid.uuid4()
    client = RawClient(broker.bootstrap)
    try:
        response = _fetch(
            client,
            [
                FetchTopic(topic_id=unknown, partitions=[FetchPartition(0, -1, 0, -1, -1, 1 << 20)]),
                FetchTopic(topic_id=known, partitions=[FetchPartition(0, -1, 0, -1, -1, 1 << 20)]),
            ],
            max_wait_ms=5000,
        )
        assert response.error_code == ErrorCode.NONE
        parts = _partitions(response)
        assert parts[(unknown, 0)].error_code == ErrorCode.UNKNOWN_TOPIC_ID
        assert parts[(known, 0)].error_code == ErrorCode.NONE
        assert _values(parts[(known, 0)].records) == [b"a", b"b"]
        assert parts[(known, 0)].high_watermark == 2
    finally:
        client.close()


def test_incremental_session_answers_only_changes(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "inc", partitions=2)
    tid = _topic_id(broker.bootstrap, "inc")
    _produce_values(broker.bootstrap, "inc", 0, [b"p0-a"])
    _produce_values(broker.bootstrap, "inc", 1, [b"p1-a"])
    client = RawClient(broker.bootstrap)
    try:
        full = _fetch(
            client,
            [
                FetchTopic(
                    topic_id=tid, partitions=[FetchPartition(p, -1, 0, -1, -1, 1 << 20) for p in (0, 1)]
                )
            ],
            epoch=0,
        )
        assert full.error_code == ErrorCode.NONE
        session = full.session_id
        assert session != 0
        assert {k: _values(p.records) for k, p in _partitions(full).items()} == {
            (tid, 0): [b"p0-a"],
            (tid, 1): [b"p1-a"],
        }
        # Move both positions past the data: nothing new, so nothing in the response (after max_wait).
        moved = [
            FetchTopic(topic_id=tid, partitions=[FetchPartition(p, -1, 1, -1, -1, 1 << 20) for p in (0, 1)])
        ]
        empty = _fetch(client, moved, session_id=session, epoch=1, max_wait_ms=50)
        assert (empty.error_code, empty.session_id, empty.responses) == (ErrorCode.NONE, session, [])
        # New data on partition 1 only; the request lists nothing (the session remembers positions).
        _produce_values(broker.bootstrap, "inc", 1, [b"p1-b"])
        news = _fetch(client, [], session_id=session, epoch=2, max_wait_ms=5000)
        assert news.session_id == session
        parts = _partitions(news)
        assert list(parts) == [(tid, 1)]
        assert _values(parts[(tid, 1)].records) == [b"p1-b"]
        assert parts[(tid, 1)].high_watermark == 2
        # Forget partition 1; new data there is no longer reported.
        _produce_values(broker.bootstrap, "inc", 1, [b"p1-c"])
        forgot = _fetch(
            client,
            [],
            session_id=session,
            epoch=3,
            forgotten=[ForgottenTopic(topic_id=tid, partitions=[1])],
            max_wait_ms=50,
        )
        assert forgot.responses == []
        # Session errors: wrong epoch, unknown id, names instead of ids (v12) on an id session.
        assert (
            _fetch(client, [], session_id=session, epoch=9).error_code
            == ErrorCode.INVALID_FETCH_SESSION_EPOCH
        )
        assert (
            _fetch(client, [], session_id=session + 1, epoch=4).error_code
            == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        )
        wrong = _fetch(client, [], session_id=session, epoch=4, version=12)
        assert wrong.error_code == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
        assert wrong.responses == []
        # The refused requests did not move the epoch; epoch -1 closes the session.
        assert _fetch(client, [], session_id=session, epoch=4, max_wait_ms=0).error_code == ErrorCode.NONE
        closed = _fetch(client, [], session_id=session, epoch=-1)
        assert (closed.error_code, closed.session_id) == (ErrorCode.NONE, 0)
        assert (
            _fetch(client, [], session_id=session, epoch=5).error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        )
    finally:
        client.close()


def test_sessionless_and_name_based_fetches_still_work(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "names")
    _produce_values(broker.bootstrap, "names", 0, [b"x"])
    client = RawClient(broker.bootstrap)
    try:
        response = _fetch(
            client, [FetchTopic("names", partitions=[FetchPartition(0, -1, 0, -1, -1, 1 << 20)])], version=12
        )
        assert response.session_id == 0
        assert response.responses[0].topic == "names"
        assert _values(response.responses[0].partitions[0].records) == [b"x"]
    finally:
        client.close()
