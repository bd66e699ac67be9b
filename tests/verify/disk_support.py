"""Helpers of the disk-fault tests: produce with confluent-kafka and remember what was acknowledged, then
check a partition as the broker serves it against that record."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tests.interop.support import fetch_partition


@dataclass
class Produced:
    """(partition, offset) -> value of every record the broker acknowledged, split by acks setting."""

    acked_all: dict[tuple[int, int], bytes] = field(default_factory=dict)
    acked_one: dict[tuple[int, int], bytes] = field(default_factory=dict)
    failed: list[str] = field(default_factory=list)

    @property
    def by_offset(self) -> dict[tuple[int, int], bytes]:
        return {**self.acked_one, **self.acked_all}


def produce(
    bootstrap: str,
    topic: str,
    partitions: int,
    count: int,
    produced: Produced,
    *,
    acks: str = "all",
    tag: str = "r",
    size: int = 100,
    timeout_ms: int = 30_000,
) -> None:
    """Produce `count` records per partition and wait for every delivery report."""
    from confluent_kafka import Producer

    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "acks": acks,
        "enable.idempotence": acks == "all",
        "linger.ms": 5,
        "batch.size": 8192,  # batches well below the tests' small segment.bytes
        "message.timeout.ms": timeout_ms,
        "retry.backoff.ms": 50,
    }
    producer = Producer(config)
    target = produced.acked_all if acks == "all" else produced.acked_one

    def on_delivery(err: Any, msg: Any) -> None:
        if err is None:
            target[(msg.partition(), msg.offset())] = msg.value()
        else:
            produced.failed.append(str(err))

    for i in range(count):
        for p in range(partitions):
            value = f"{tag}-{p}-{i:06d}-".encode().ljust(size, b"x")
            producer.produce(topic, value, partition=p, on_delivery=on_delivery)
        producer.poll(0)
    assert producer.flush(timeout_ms / 1000 + 30) == 0
    assert not produced.failed, produced.failed[:3]


def check_served(bootstrap: str, topic: str, partition: int, produced: Produced) -> int:
    """Every acks=all record is served at its offset; everything served is whole (CRC), contiguous from 0,
    and a record that was produced at that offset (nothing invented, no garbage). Returns the HWM."""
    dump = fetch_partition(bootstrap, topic, partition)
    expected = produced.by_offset
    next_offset = 0
    for batch in dump.batches:
        assert batch.crc_ok, (partition, batch.base_offset)
        assert batch.base_offset == next_offset, (partition, batch.base_offset, next_offset)
        next_offset = batch.last_offset + 1
    assert next_offset == dump.high_watermark
    for record in dump.records:
        assert expected.get((partition, record.offset)) == record.value, (partition, record.offset)
    served = {r.offset for r in dump.records}
    lost = sorted(o for (p, o) in produced.acked_all if p == partition and o not in served)
    assert not lost, f"partition {partition}: {len(lost)} acknowledged records lost, first {lost[:5]}"
    return dump.high_watermark
