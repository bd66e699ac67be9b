"""`exactly.log.drop.behind.bytes` on a real broker: what a confluent-kafka producer wrote with acks=all
leaves the page cache behind the window, and a consumer from the start still reads every record back,
in order, from the disk."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

from exactly.storage.drop_behind import ALIGN
from tests.interop.support import create_topic, running_broker
from tests.storage.helpers import resident

pytestmark = pytest.mark.interop

MIB = 1 << 20
RECORDS = 2_000  # ~8 MiB of 4 KiB values


def test_produced_bytes_behind_the_window_leave_the_page_cache_and_read_back(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with running_broker(data, f"exactly.log.drop.behind.bytes={MIB}") as broker:
        create_topic(broker.bootstrap, "dropped")
        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 5})
        values = [os.urandom(4096) for _ in range(RECORDS)]
        acked: list[int] = []
        for i, value in enumerate(values):
            producer.produce(
                "dropped", value, key=str(i).encode(), on_delivery=lambda e, m: acked.append(m.offset())
            )
            producer.poll(0)
        assert producer.flush(30) == 0
        assert sorted(acked) == list(range(RECORDS))

        segment = data / "dropped-0" / "00000000000000000000.log"
        size = segment.stat().st_size
        assert size > 7 * MIB
        # the window and at most one 2 MiB step stay; everything further behind was dropped after its fsync
        assert resident(segment, 0, size - MIB - ALIGN) == 0.0
        assert resident(segment, size - MIB // 2, size) > 0.9

        consumer = Consumer(
            {"bootstrap.servers": broker.bootstrap, "group.id": "g", "auto.offset.reset": "earliest"}
        )
        try:
            consumer.subscribe(["dropped"])
            got: list[tuple[int, bytes]] = []
            while len(got) < RECORDS:
                message = consumer.poll(10)
                assert message is not None, f"{len(got)} of {RECORDS} records read"
                assert message.error() is None, message.error()
                got.append((message.offset(), message.value()))
        finally:
            consumer.close()
        assert [offset for offset, _ in got] == list(range(RECORDS))
        assert [value for _, value in got] == values
