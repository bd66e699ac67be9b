"""File descriptors are a budget (issue 14, first step): an index holds no descriptor at rest, so a
partition costs one (its log segment), not four. 800 partitions fit under an open-file limit of 1,024
(they needed 3,200 before), are written, survive kill -9 and a clean restart, and read back."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from exactly.verify.processes import BrokerProcess

pytestmark = [pytest.mark.interop, pytest.mark.slow]

TOPICS, PARTITIONS, NOFILE = 8, 100, 1024


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
            messages = consumer.consume(500, timeout=30)
            assert messages, f"read {len(got)} of {len(wanted)}"
            for m in messages:
                assert m.error() is None, m.error()
                got[(m.topic(), m.partition())] = m.value()
        return got
    finally:
        consumer.close()


def test_eight_hundred_partitions_under_an_open_file_limit_of_1024(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", nofile=NOFILE).start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        futures = admin.create_topics([NewTopic(f"t{t}", PARTITIONS, 1) for t in range(TOPICS)])
        for future in futures.values():
            future.result(timeout=120)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 50})
        for t in range(TOPICS):
            for p in range(PARTITIONS):
                producer.produce(f"t{t}", f"t{t}-{p}".encode(), partition=p)
        assert producer.flush(120) == 0
        expected = {(f"t{t}", p): f"t{t}-{p}".encode() for t in range(TOPICS) for p in range(PARTITIONS)}
        assert read_back(broker.bootstrap) == expected
        held = open_descriptors(broker)
        assert held < TOPICS * PARTITIONS + 150, held  # one per partition and a few for the rest
        broker.kill()
        broker.start(timeout=120)
        assert read_back(broker.bootstrap) == expected
        broker.restart()
        assert read_back(broker.bootstrap) == expected
        assert "open-file limit 1024" in broker.log()
    finally:
        broker.stop()
