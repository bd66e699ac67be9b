"""File descriptors are a budget (issue 14): an index holds no descriptor at rest and segment files are an
LRU of a quarter of the open-file limit, so 20,000 partitions live under a limit of 1,024 (they needed 80,000
before): created, written, through kill -9 and a clean restart, and read back, while the descriptors the
broker holds stay under the limit."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from exactly.testing.processes import BrokerProcess

pytestmark = [pytest.mark.interop, pytest.mark.slow]

TOPICS, PARTITIONS, NOFILE = 200, 100, 1024


def open_descriptors(broker: BrokerProcess) -> int:
    assert broker.proc is not None
    return len(os.listdir(f"/proc/{broker.proc.pid}/fd"))


def read_back(bootstrap: str) -> dict[tuple[str, int], bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "fds", "enable.auto.commit": False})
    try:
        wanted = [TopicPartition(f"t{t}", p, 0) for t in range(TOPICS) for p in range(PARTITIONS)]
        consumer.assign(wanted)
        got: dict[tuple[str, int], bytes] = {}
        while len(got) < len(wanted):
            messages = consumer.consume(5000, timeout=120)  # 20,000 partitions on a loaded machine
            assert messages, f"read {len(got)} of {len(wanted)}"
            for m in messages:
                assert m.error() is None, m.error()
                got[(m.topic(), m.partition())] = m.value()
        return got
    finally:
        consumer.close()


def test_twenty_thousand_partitions_under_an_open_file_limit_of_1024(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", nofile=NOFILE).start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for first in range(0, TOPICS, 50):
            batch = [NewTopic(f"t{t}", PARTITIONS, 1) for t in range(first, min(first + 50, TOPICS))]
            for future in admin.create_topics(batch, operation_timeout=120, request_timeout=300).values():
                future.result(timeout=300)
        producer = Producer(
            {"bootstrap.servers": broker.bootstrap, "linger.ms": 50, "queue.buffering.max.messages": 100_000}
        )
        for t in range(TOPICS):
            for p in range(PARTITIONS):
                producer.produce(f"t{t}", f"t{t}-{p}".encode(), partition=p)
            producer.poll(0)
        assert producer.flush(300) == 0
        expected = {(f"t{t}", p): f"t{t}-{p}".encode() for t in range(TOPICS) for p in range(PARTITIONS)}
        assert read_back(broker.bootstrap) == expected
        assert open_descriptors(broker) < NOFILE // 4 + 100  # the segment budget and a few for the rest
        broker.kill()
        broker.start(timeout=300)
        assert read_back(broker.bootstrap) == expected
        broker.stop(timeout=300)
        broker.start(timeout=300)
        assert read_back(broker.bootstrap) == expected
        assert "open-file limit 1024" in broker.log()
    finally:
        broker.stop()
