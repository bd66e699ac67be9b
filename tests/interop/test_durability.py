"""Acknowledged writes survive kill -9; a clean SIGTERM restart keeps everything (issue 6.3).

exactly's rule (ARCHITECTURE / storage/config.py): with the default flush settings an `acks=all` append
is fsynced before it is acknowledged. So after SIGKILL + restart on the same data directory and port,
every record whose delivery callback reported success must be in the log at the offset it was reported
at; unacknowledged records may or may not be there; nothing is duplicated (the producer is idempotent and
the broker rebuilds producer state on recovery); offsets are contiguous from 0 to the high watermark;
every batch is whole (CRC valid, record count matches, no torn tail).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from exactly.errors import ErrorCode
from exactly.protocol.api import encode_request
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.api_versions import ApiVersionsRequest
from exactly.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from exactly.testing.processes import BrokerProcess
from tests.interop.client import RawClient
from tests.interop.support import EARLIEST, LATEST, PartitionDump, create_topic, fetch_partition, list_offset

pytestmark = pytest.mark.interop

PARTITIONS = 3


@pytest.fixture
def proc(tmp_path: Path) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(tmp_path / "data")
    broker.start()
    try:
        yield broker
    finally:
        if broker.proc is not None and broker.proc.poll() is None:
            broker.kill()


@dataclass
class Deliveries:
    acked: dict[tuple[int, int], int] = field(default_factory=dict)  # (partition, seq) -> offset
    failed: dict[tuple[int, int], str] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def callback(self, partition: int, seq: int) -> Any:
        def on_delivery(err: Any, msg: Any) -> None:
            with self.lock:
                if err is None:
                    self.acked[(partition, seq)] = msg.offset()
                else:
                    self.failed[(partition, seq)] = str(err)

        return on_delivery


def value_of(partition: int, seq: int) -> bytes:
    return b"p%d-%07d" % (partition, seq)


def parse_value(value: bytes | None) -> tuple[int, int]:
    assert value is not None
    assert value[:1] == b"p", value
    p, s = value[1:].split(b"-")
    return int(p), int(s)


def check_partition_integrity(dump: PartitionDump, partition: int) -> list[int]:
    """Whole batches, contiguous offsets from 0, no duplicates, increasing sequence; returns the seqs."""
    assert dump.error_code == ErrorCode.NONE
    assert dump.log_start_offset == 0
    next_offset = 0
    for batch in dump.batches:
        assert batch.crc_ok, (partition, batch.base_offset)
        assert batch.base_offset == next_offset, (partition, batch.base_offset, next_offset)
        assert batch.last_offset - batch.base_offset + 1 == batch.records_count
        assert [r.offset for r in batch.records] == list(range(batch.base_offset, batch.last_offset + 1))
        next_offset = batch.last_offset + 1
    assert next_offset == dump.high_watermark
    seqs = []
    for record in dump.records:
        p, s = parse_value(record.value)
        assert p == partition
        seqs.append(s)
    assert len(seqs) == len(set(seqs)), f"partition {partition}: duplicated records"
    assert seqs == sorted(seqs), f"partition {partition}: records out of order"
    return seqs


def run_producer_with_kills(
    broker: BrokerProcess, topic: str, total_per_partition: int, duration: float, kill_at: list[float]
) -> tuple[Deliveries, list[int]]:
    """Produce at a steady pace over `duration` seconds while a thread SIGKILLs and restarts the broker
    each time the acknowledged fraction of all records reaches the next of `kill_at`."""
    from confluent_kafka import Producer

    deliveries = Deliveries()
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "max.in.flight.requests.per.connection": 5,
            "linger.ms": 5,
            "batch.num.messages": 200,
            "message.timeout.ms": 60_000,
            "retry.backoff.ms": 50,
            "reconnect.backoff.ms": 50,
            "reconnect.backoff.max.ms": 200,
        }
    )
    kills: list[int] = []
    exit_codes: list[int] = []
    total = total_per_partition * PARTITIONS

    def nemesis() -> None:
        deadline = time.monotonic() + duration + 30
        for fraction in kill_at:
            while len(deliveries.acked) < fraction * total and time.monotonic() < deadline:
                time.sleep(0.01)
            with deliveries.lock:
                kills.append(len(deliveries.acked))
            broker.kill()
            assert broker.proc is not None
            exit_codes.append(broker.proc.returncode)
            time.sleep(0.2)
            broker.start()

    thread = threading.Thread(target=nemesis, daemon=True)
    thread.start()
    chunk = 50
    chunks = (total_per_partition + chunk - 1) // chunk
    interval = duration / chunks
    started = time.monotonic()
    for i, base in enumerate(range(0, total_per_partition, chunk)):
        for seq in range(base, min(base + chunk, total_per_partition)):
            for partition in range(PARTITIONS):
                producer.produce(
                    topic,
                    value_of(partition, seq),
                    partition=partition,
                    on_delivery=deliveries.callback(partition, seq),
                )
        producer.poll(0)
        while (wait := started + (i + 1) * interval - time.monotonic()) > 0:
            producer.poll(wait)
    # Keep serving delivery callbacks while the nemesis waits for its next kill point: acknowledgements
    # only reach `deliveries` inside poll().
    deadline = time.monotonic() + 60
    while thread.is_alive() and time.monotonic() < deadline:
        producer.poll(0.05)
    assert not thread.is_alive()
    assert exit_codes == [-9] * len(kill_at)
    remaining = producer.flush(90)
    assert remaining == 0, f"{remaining} records never completed"
    return deliveries, kills


@pytest.mark.slow
def test_kill_minus_nine_keeps_every_acknowledged_record(proc: BrokerProcess) -> None:
    topic = "durable"
    create_topic(proc.bootstrap, topic, PARTITIONS)
    per_partition = 8000
    deliveries, kills = run_producer_with_kills(proc, topic, per_partition, duration=6.0, kill_at=[0.2, 0.55])
    # The kills happened mid-run: some records were acknowledged before each, and more after the last.
    assert len(kills) == 2
    assert 0 < kills[0] < kills[1] < len(deliveries.acked)
    assert len(deliveries.acked) + len(deliveries.failed) == per_partition * PARTITIONS

    # A last restart before reading, so that what is read is what recovery finds on disk.
    proc.kill()
    proc.start()
    for partition in range(PARTITIONS):
        dump = fetch_partition(proc.bootstrap, topic, partition)
        seqs = check_partition_integrity(dump, partition)
        stored = {s: r.offset for s, r in zip(seqs, dump.records, strict=True)}
        acked = {s: off for (p, s), off in deliveries.acked.items() if p == partition}
        missing = sorted(set(acked) - set(stored))
        assert not missing, (
            f"partition {partition}: {len(missing)} acknowledged records lost, first {missing[:5]}"
        )
        moved = {s: (off, stored[s]) for s, off in acked.items() if stored[s] != off}
        assert not moved, f"partition {partition}: acknowledged offsets changed: {list(moved.items())[:5]}"
    print(f"acked before kills {kills}, acked {len(deliveries.acked)}, failed {len(deliveries.failed)}")


def test_sigterm_restart_keeps_everything(proc: BrokerProcess) -> None:
    from confluent_kafka import Producer

    topic = "clean"
    create_topic(proc.bootstrap, topic, PARTITIONS)
    deliveries = Deliveries()
    producer = Producer(
        {"bootstrap.servers": proc.bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 5}
    )
    for seq in range(3000):
        for partition in range(PARTITIONS):
            producer.produce(
                topic,
                value_of(partition, seq),
                partition=partition,
                on_delivery=deliveries.callback(partition, seq),
            )
        if seq % 100 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0
    assert not deliveries.failed
    assert len(deliveries.acked) == 3000 * PARTITIONS
    before = [fetch_partition(proc.bootstrap, topic, p) for p in range(PARTITIONS)]

    assert proc.stop() == 0
    proc.start()
    for partition in range(PARTITIONS):
        after = fetch_partition(proc.bootstrap, topic, partition)
        assert check_partition_integrity(after, partition) == list(range(3000))
        assert after.high_watermark == before[partition].high_watermark == 3000
        # The very same batches, byte for byte.
        assert [b.raw for b in after.batches] == [b.raw for b in before[partition].batches]
        assert list_offset(proc.bootstrap, topic, partition, EARLIEST)[:2] == (0, 0)
        assert list_offset(proc.bootstrap, topic, partition, LATEST)[:2] == (0, 3000)

    # The same idempotent producer carries on after the restart: no duplicate, no gap.
    for partition in range(PARTITIONS):
        producer.produce(
            topic,
            value_of(partition, 3000),
            partition=partition,
            on_delivery=deliveries.callback(partition, 3000),
        )
    assert producer.flush(30) == 0
    assert not deliveries.failed
    for partition in range(PARTITIONS):
        assert deliveries.acked[(partition, 3000)] == 3000
        after = fetch_partition(proc.bootstrap, topic, partition)
        assert check_partition_integrity(after, partition) == list(range(3001))


def test_sigterm_with_connected_clients_is_a_quiet_clean_exit(proc: BrokerProcess) -> None:
    """Open client connections do not turn a SIGTERM into logged errors."""
    from confluent_kafka import Producer

    create_topic(proc.bootstrap, "quiet", 1)
    producer = Producer({"bootstrap.servers": proc.bootstrap, "acks": "all"})
    producer.produce("quiet", b"x", partition=0)
    assert producer.flush(10) == 0
    idle = RawClient(proc.bootstrap)
    assert idle.request(ApiKey.API_VERSIONS, 3, ApiVersionsRequest("idle", "1")).error_code == 0
    log_start = len(proc.log_path.read_bytes())
    assert proc.stop() == 0
    shutdown_log = proc.log_path.read_bytes()[log_start:].decode(errors="replace")
    assert "stopped" in shutdown_log
    assert "Traceback" not in shutdown_log, shutdown_log
    assert " ERROR " not in shutdown_log, shutdown_log
    idle.close()


def test_sigterm_does_not_wait_for_a_pending_long_poll(proc: BrokerProcess) -> None:
    """A Fetch parked for max_wait_ms (nothing to return yet) does not hold up a clean shutdown."""
    create_topic(proc.bootstrap, "long-poll", 1)
    polling = RawClient(proc.bootstrap)
    request = FetchRequest(
        max_wait_ms=12_000,
        min_bytes=1_000_000,
        topics=[FetchTopic("long-poll", partitions=[FetchPartition(0, -1, 0, -1, -1, 1 << 20)])],
    )
    polling.send_raw(encode_request(ApiKey.FETCH, 12, 1, "long-poll", request))
    time.sleep(0.5)  # parked
    started = time.monotonic()
    assert proc.stop() == 0
    took = time.monotonic() - started
    polling.close()
    assert took < 5, f"SIGTERM took {took:.1f}s with a 12s long poll pending"
