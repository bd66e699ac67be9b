"""The demo's topics, through confluent-kafka: creating them, their last stable offsets and high
watermarks, and reading every committed record of one (the output, for the proofs)."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from exactly.demo import DemoError

REQUEST_TIMEOUT = 30.0

# librdkafka's log lines (connection refused while the broker restarts) are expected; keep them quiet
LIBRDKAFKA_LOG = logging.getLogger("exactly.demo.librdkafka")
LIBRDKAFKA_LOG.propagate = False
LIBRDKAFKA_LOG.addHandler(logging.NullHandler())


class TopicError(DemoError):
    """A topic could not be created or read (one-line message)."""


def _admin(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient

    config: dict[str, Any] = {"bootstrap.servers": bootstrap, "logger": LIBRDKAFKA_LOG}
    return AdminClient(config)


def create_topic(
    bootstrap: str, topic: str, partitions: int, replication_factor: int = 1, min_insync_replicas: int = 1
) -> None:
    from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

    admin = _admin(bootstrap)  # kept alive until the future is done
    config = {"min.insync.replicas": str(min_insync_replicas)} if min_insync_replicas > 1 else {}
    new = NewTopic(topic, num_partitions=partitions, replication_factor=replication_factor, config=config)
    futures = admin.create_topics([new], request_timeout=REQUEST_TIMEOUT)
    try:
        futures[topic].result(timeout=REQUEST_TIMEOUT)
    except Exception as e:  # noqa: BLE001 - KafkaException or a timeout: one line either way
        raise TopicError(f"cannot create topic {topic}: {e}") from None


def partitions_of(admin: Any, topic: str) -> Sequence[int]:
    metadata = admin.list_topics(topic, timeout=REQUEST_TIMEOUT)
    info = metadata.topics.get(topic)
    if info is None or info.error is not None:
        raise TopicError(f"topic {topic}: {info.error if info is not None else 'unknown'}")
    return sorted(info.partitions)


def last_stable_and_high(bootstrap: str, topic: str) -> tuple[dict[int, int], dict[int, int]]:
    """Per partition of `topic`: the last stable offset and the high watermark."""
    from confluent_kafka import IsolationLevel
    from confluent_kafka import TopicPartition as KafkaTopicPartition
    from confluent_kafka.admin import OffsetSpec  # type: ignore[attr-defined]

    admin = _admin(bootstrap)
    partitions = partitions_of(admin, topic)
    result: list[dict[int, int]] = []
    for isolation in (IsolationLevel.READ_COMMITTED, IsolationLevel.READ_UNCOMMITTED):
        futures = admin.list_offsets(
            {KafkaTopicPartition(topic, p): OffsetSpec.latest() for p in partitions},  # type: ignore[no-untyped-call]
            isolation_level=isolation,
            request_timeout=REQUEST_TIMEOUT,
        )
        result.append({tp.partition: f.result().offset for tp, f in futures.items()})
    return result[0], result[1]


def wait_until_decided(bootstrap: str, topic: str, timeout: float) -> dict[int, int]:
    """Wait until no transaction is open on any partition of `topic` (LSO = high watermark); the LSOs."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            stable, high = last_stable_and_high(bootstrap, topic)
            if stable == high:
                return stable
        except Exception as e:  # noqa: BLE001 - a restarting broker: ask again until the deadline
            LIBRDKAFKA_LOG.info("offsets of %s: %s", topic, e)
        if time.monotonic() > deadline:
            raise TopicError(f"transactions still open on {topic} after {timeout:g} s")
        time.sleep(0.2)


def read_committed(bootstrap: str, topic: str, timeout: float = 120.0) -> list[bytes]:
    """The value of every committed record of `topic` (read_committed, every partition from its start up
    to its last stable offset, which is first waited for to equal the high watermark)."""
    from confluent_kafka import Consumer, KafkaError
    from confluent_kafka import TopicPartition as KafkaTopicPartition

    ends = wait_until_decided(bootstrap, topic, timeout)
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": "exactly-demo-proof",
        "isolation.level": "read_committed",
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "logger": LIBRDKAFKA_LOG,
    }
    consumer: Any = Consumer(config)
    values: list[bytes] = []
    try:
        pending = {p for p, end in ends.items() if end > 0}
        consumer.assign([KafkaTopicPartition(topic, p, 0) for p in sorted(pending)])
        position = dict.fromkeys(pending, 0)
        deadline = time.monotonic() + timeout
        while pending:
            if time.monotonic() > deadline:
                raise TopicError(
                    f"read {len(values)} records of {topic}; partitions {sorted(pending)} unfinished"
                )
            message: Any
            for message in consumer.consume(num_messages=10_000, timeout=0.5):
                partition: int = message.partition()
                error = message.error()
                if error is not None:
                    if error.code() != KafkaError._PARTITION_EOF:
                        raise TopicError(f"reading {topic}: {error.str()}")
                    position[partition] = max(position[partition], message.offset())
                elif message.offset() < ends[partition]:
                    values.append(message.value())
                    position[partition] = message.offset() + 1
                if position[partition] >= ends[partition]:
                    pending.discard(partition)
    finally:
        consumer.close()
    return values
