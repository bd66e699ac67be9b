"""Kafka-side helpers of the Spark writer tests: topics, and reading every committed record back."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


@dataclass(frozen=True, slots=True)
class ReadRecord:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])
    futures[topic].result(timeout=30)


def read_committed(bootstrap: str, topic: str, *, minimum: int, timeout: float = 60.0) -> list[ReadRecord]:
    """Every record a read_committed consumer sees in `topic`, read up to the end (the LSO) of every
    partition once at least `minimum` records arrived; fails after `timeout` seconds."""
    return read_records(bootstrap, topic, minimum=minimum, timeout=timeout, isolation="read_committed")


def read_records(
    bootstrap: str, topic: str, *, minimum: int, timeout: float = 60.0, isolation: str = "read_committed"
) -> list[ReadRecord]:
    """Like `read_committed`, with the given isolation.level."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{time.monotonic_ns()}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    try:
        metadata = consumer.list_topics(topic, timeout=30)
        partitions = sorted(metadata.topics[topic].partitions)
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        records: list[ReadRecord] = []
        at_end: set[int] = set()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msg: Any = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(msg.partition())
                    if len(at_end) == len(partitions) and len(records) >= minimum:
                        return records
                    continue
                raise AssertionError(f"consumer error: {msg.error()}")
            at_end.discard(msg.partition())
            records.append(
                ReadRecord(
                    msg.topic(),
                    msg.partition(),
                    msg.offset(),
                    msg.key(),
                    msg.value(),
                    tuple(msg.headers() or ()),
                )
            )
        raise AssertionError(f"read {len(records)} records of {topic}, expected at least {minimum}")
    finally:
        consumer.close()
