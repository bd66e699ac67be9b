"""Fetch errors reach the clients (issue 10, item 1).

An error partition of a Fetch response carries an empty record set, as Kafka's does, never a null one:
librdkafka cannot parse a null one ("invalid MessageSetSize -1"), so it never saw OFFSET_OUT_OF_RANGE or
UNKNOWN_TOPIC_OR_PARTITION, never applied `auto.offset.reset`, and re-sent the Fetch at once (tens of
thousands of requests a second). Here a confluent-kafka consumer assigned past the end resets per
`auto.offset.reset` (earliest, latest, error), and a consumer of a deleted topic is told; each test also
reads librdkafka's own count of the Fetch requests it sent (statistics `brokers.*.req.Fetch`) to show that
it does not busy-loop.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from exactly.errors import ErrorCode
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from exactly.testing.processes import BrokerProcess
from tests.interop.client import RawClient
from tests.interop.support import create_topic, running_broker

pytestmark = pytest.mark.interop

DEADLINE = 60.0
# librdkafka waits up to fetch.wait.max.ms (500 ms) per Fetch; a healthy consumer sends a few per second,
# the busy loop sent more than 10,000 a second.
MAX_FETCHES_PER_SECOND = 50


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(
        tmp_path_factory.mktemp("fetch-errors") / "data", "auto.create.topics.enable=false"
    ) as proc:
        yield proc


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for value in values:
        producer.produce(topic, key=b"k", value=value)
    assert producer.flush(DEADLINE) == 0


class _Consumer:
    """A confluent-kafka consumer that records librdkafka's statistics and the errors it reports."""

    def __init__(self, bootstrap: str, group: str, **config: Any) -> None:
        from confluent_kafka import Consumer

        self.lock = threading.Lock()
        self.stats: list[dict[str, Any]] = []
        self.errors: list[Any] = []
        self.started = time.monotonic()
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "enable.auto.commit": False,
                "statistics.interval.ms": 500,
                "stats_cb": self._on_stats,
                "error_cb": self._on_error,
                **config,
            }
        )

    def _on_stats(self, raw: str) -> None:
        with self.lock:
            self.stats.append(json.loads(raw))

    def _on_error(self, error: Any) -> None:
        with self.lock:
            self.errors.append(error)

    def fetch_requests(self) -> int:
        """Fetch requests sent so far (the newest statistics), summed over the broker connections."""
        with self.lock:
            if not self.stats:
                return 0
            brokers = self.stats[-1]["brokers"].values()
        return sum(int(b.get("req", {}).get("Fetch", 0)) for b in brokers)

    def partition_stats(self, topic: str, partition: int) -> dict[str, Any] | None:
        with self.lock:
            if not self.stats:
                return None
            topics = self.stats[-1].get("topics", {})
        stats: dict[str, Any] | None = topics.get(topic, {}).get("partitions", {}).get(str(partition))
        return stats

    def poll_until(self, done: Callable[[], bool], on_message: Callable[[Any], None]) -> None:
        deadline = time.monotonic() + DEADLINE
        while not done():
            assert time.monotonic() < deadline, "condition not reached before the deadline"
            message = self.consumer.poll(0.2)
            if message is not None:
                on_message(message)

    def assert_no_busy_loop(self) -> None:
        # Wait for statistics that cover the whole test so far, then compare with the elapsed time.
        deadline = time.monotonic() + DEADLINE
        while True:
            with self.lock:
                count = len(self.stats)
            if count >= 2:
                break
            assert time.monotonic() < deadline
            self.consumer.poll(0.2)
        elapsed = time.monotonic() - self.started
        fetches = self.fetch_requests()
        assert fetches <= MAX_FETCHES_PER_SECOND * max(elapsed, 1.0), (fetches, elapsed)

    def close(self) -> None:
        self.consumer.close()


@pytest.fixture
def consumers() -> Iterator[list[_Consumer]]:
    made: list[_Consumer] = []
    yield made
    for c in made:
        c.close()


def test_error_partitions_carry_an_empty_record_set(broker: BrokerProcess) -> None:
    """Raw Fetch, every decoded version: OFFSET_OUT_OF_RANGE and UNKNOWN_TOPIC_OR_PARTITION come with
    records = b"" (length 0 on the wire), not null (length -1, or 0 in the compact encoding)."""
    create_topic(broker.bootstrap, "raw-errors")
    _produce(broker.bootstrap, "raw-errors", [b"a", b"b"])
    create_topic(broker.bootstrap, "raw-good")
    _produce(broker.bootstrap, "raw-good", [b"c"])
    client = RawClient(broker.bootstrap)
    try:
        for version in range(4, 13):
            request = FetchRequest(
                replica_id=-1,
                max_wait_ms=0,
                min_bytes=0,
                max_bytes=1 << 20,
                isolation_level=0,
                session_id=0,
                session_epoch=-1,
                topics=[
                    FetchTopic("raw-errors", partitions=[FetchPartition(0, -1, 100, -1, -1, 1 << 20)]),
                    FetchTopic("raw-missing", partitions=[FetchPartition(0, -1, 0, -1, -1, 1 << 20)]),
                    FetchTopic("raw-good", partitions=[FetchPartition(0, -1, 0, -1, -1, 1 << 20)]),
                ],
            )
            response = client.request(ApiKey.FETCH, version, request)
            out_of_range, missing, good = (t.partitions[0] for t in response.responses)
            assert out_of_range.error_code == ErrorCode.OFFSET_OUT_OF_RANGE, version
            assert out_of_range.records is not None, version
            assert bytes(out_of_range.records) == b"", version
            assert missing.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, version
            assert missing.records is not None, version
            assert bytes(missing.records) == b"", version
            # the partition after the errors is still served
            assert good.error_code == ErrorCode.NONE, version
            assert good.records is not None, version
            assert len(good.records) > 0, version
    finally:
        client.close()


def test_out_of_range_resets_to_earliest(broker: BrokerProcess, consumers: list[_Consumer]) -> None:
    from confluent_kafka import TopicPartition

    create_topic(broker.bootstrap, "reset-earliest")
    values = [f"e{i}".encode() for i in range(5)]
    _produce(broker.bootstrap, "reset-earliest", values)
    consumer = _Consumer(broker.bootstrap, "g-earliest", **{"auto.offset.reset": "earliest"})
    consumers.append(consumer)
    consumer.consumer.assign([TopicPartition("reset-earliest", 0, 100)])
    got: list[tuple[int, bytes]] = []

    def on_message(m: Any) -> None:
        assert m.error() is None, m.error()
        got.append((m.offset(), m.value()))

    consumer.poll_until(lambda: len(got) >= len(values), on_message)
    assert got == list(enumerate(values))
    consumer.assert_no_busy_loop()


def test_out_of_range_resets_to_latest(broker: BrokerProcess, consumers: list[_Consumer]) -> None:
    from confluent_kafka import TopicPartition

    create_topic(broker.bootstrap, "reset-latest")
    _produce(broker.bootstrap, "reset-latest", [f"old{i}".encode() for i in range(5)])
    consumer = _Consumer(broker.bootstrap, "g-latest", **{"auto.offset.reset": "latest"})
    consumers.append(consumer)
    consumer.consumer.assign([TopicPartition("reset-latest", 0, 100)])
    got: list[tuple[int, bytes]] = []

    def on_message(m: Any) -> None:
        assert m.error() is None, m.error()
        got.append((m.offset(), m.value()))

    def reset_to_end() -> bool:
        stats = consumer.partition_stats("reset-latest", 0)
        return stats is not None and stats.get("fetch_state") == "active" and stats.get("next_offset") == 5

    # the reset happened once the consumer fetches from the end (5), not from 100
    consumer.poll_until(reset_to_end, on_message)
    new = [f"new{i}".encode() for i in range(3)]
    _produce(broker.bootstrap, "reset-latest", new)
    consumer.poll_until(lambda: len(got) >= len(new), on_message)
    assert got == [(5 + i, v) for i, v in enumerate(new)]
    consumer.assert_no_busy_loop()


def test_out_of_range_with_reset_error_reaches_the_application(
    broker: BrokerProcess, consumers: list[_Consumer]
) -> None:
    from confluent_kafka import KafkaError, TopicPartition

    create_topic(broker.bootstrap, "reset-error")
    _produce(broker.bootstrap, "reset-error", [b"x", b"y"])
    consumer = _Consumer(broker.bootstrap, "g-error", **{"auto.offset.reset": "error"})
    consumers.append(consumer)
    consumer.consumer.assign([TopicPartition("reset-error", 0, 100)])
    errors: list[Any] = []

    def on_message(m: Any) -> None:
        assert m.error() is not None, (m.offset(), m.value())  # no record may be delivered
        errors.append(m.error())

    consumer.poll_until(lambda: bool(errors), on_message)
    error = errors[0]
    assert error.code() == KafkaError._AUTO_OFFSET_RESET, error
    assert "Offset out of range" in error.str(), error
    consumer.assert_no_busy_loop()


def test_consumer_of_a_deleted_topic_is_told(broker: BrokerProcess, consumers: list[_Consumer]) -> None:
    """After the topic is deleted, Fetch answers UNKNOWN_TOPIC_OR_PARTITION; librdkafka refreshes the
    metadata and reports "topic does not exist" with that code through error_cb (an assigned partition),
    and stops fetching."""
    from confluent_kafka import KafkaError, TopicPartition
    from confluent_kafka.admin import AdminClient

    create_topic(broker.bootstrap, "deleted")
    values = [f"d{i}".encode() for i in range(3)]
    _produce(broker.bootstrap, "deleted", values)
    # librdkafka waits topic.metadata.propagation.max.ms (30 s) before it believes a topic is gone
    consumer = _Consumer(
        broker.bootstrap,
        "g-deleted",
        **{"auto.offset.reset": "earliest", "topic.metadata.propagation.max.ms": 1000},
    )
    consumers.append(consumer)
    consumer.consumer.assign([TopicPartition("deleted", 0, 0)])
    got: list[bytes] = []

    def on_message(m: Any) -> None:
        if m.error() is None:
            got.append(m.value())

    consumer.poll_until(lambda: len(got) >= len(values), on_message)
    assert got == values
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.delete_topics(["deleted"])["deleted"].result(DEADLINE)

    def told() -> bool:
        with consumer.lock:
            return any(
                e.code() == KafkaError.UNKNOWN_TOPIC_OR_PART and "deleted" in e.str() for e in consumer.errors
            )

    consumer.poll_until(told, on_message)
    assert got == values
    consumer.assert_no_busy_loop()
