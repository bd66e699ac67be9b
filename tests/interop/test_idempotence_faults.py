"""Idempotent producers through a faulty network: no duplicates, no gaps, in order (issue 6.2).

A seeded TCP proxy (`support.FaultProxy`) sits between the producer and the broker; the broker
advertises the proxy's address, so every producer connection goes through it. The proxy drops response
frames after the broker processed the request (then closes the connection: the client must retry a
request that was already appended, and the broker must answer it from its 5-batch dedup cache with the
original offsets) and resets connections while requests are in transit (the broker never sees them).
Afterwards the partitions are read directly from the broker with our own codecs: per partition, the
sequence numbers carried in the values are exactly 0..n-1, in order, each once, and every delivery
report's offset is where that record is.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from exactly.errors import ErrorCode
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.api_versions import ApiVersionsRequest
from exactly.testing.processes import BrokerProcess, free_port
from exactly.verify.proxy import FaultProxy
from tests.interop.client import RawClient
from tests.interop.support import create_topic, fetch_partition

pytestmark = [pytest.mark.interop, pytest.mark.slow]

PARTITIONS = 4


@dataclass
class Rig:
    broker: BrokerProcess
    proxy: FaultProxy


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    broker_port = free_port()
    proxy = FaultProxy(("127.0.0.1", broker_port), seed=0)
    proxy.start()
    broker = BrokerProcess(
        tmp_path / "data", f"advertised.listeners=PLAINTEXT://127.0.0.1:{proxy.port}", port=broker_port
    )
    broker.start()
    try:
        yield Rig(broker, proxy)
    finally:
        proxy.close()
        if broker.proc is not None and broker.proc.poll() is None:
            broker.stop()


def diagnose(rig: Rig) -> str:
    """Is the broker still answering directly? Plus the proxy's last events and the broker log."""
    try:
        client = RawClient(rig.broker.bootstrap, timeout=5)
        response = client.request(ApiKey.API_VERSIONS, 3, ApiVersionsRequest("diagnose", "1"))
        client.close()
        alive = f"broker answers ApiVersions directly: error {response.error_code}"
    except Exception as e:  # noqa: BLE001 - diagnostics only
        alive = f"broker does not answer directly: {e!r}"
    return f"{alive}\n{rig.proxy.describe()}\nbroker log tail:\n{rig.broker.log()[-3000:]}"


def value_of(partition: int, seq: int) -> bytes:
    return b"p%d-%07d" % (partition, seq)


def check_exactly_once(
    bootstrap: str, topic: str, per_partition: int, acked: dict[tuple[int, int], int]
) -> None:
    for partition in range(PARTITIONS):
        dump = fetch_partition(bootstrap, topic, partition)
        assert dump.error_code == ErrorCode.NONE
        values = dump.values
        seqs = []
        for v in values:
            assert v is not None
            p, s = v[1:].split(b"-")
            assert int(p) == partition
            seqs.append(int(s))
        dups = len(seqs) - len(set(seqs))
        assert dups == 0, f"partition {partition}: {dups} duplicates"
        missing = sorted(set(range(per_partition)) - set(seqs))
        assert not missing, f"partition {partition}: {len(missing)} records missing, first {missing[:5]}"
        assert seqs == list(range(per_partition)), f"partition {partition}: out of order"
        assert dump.high_watermark == per_partition
        offsets = [r.offset for r in dump.records]
        assert offsets == list(range(per_partition))
        assert all(b.crc_ok for b in dump.batches)
        wrong = {s: off for (p, s), off in acked.items() if p == partition and off != s}
        assert not wrong, (
            f"partition {partition}: delivery reports with wrong offsets {list(wrong.items())[:5]}"
        )


def paced(total: int, chunk: int, duration: float) -> Iterator[tuple[int, int]]:
    """(start, end) ranges of `chunk` records, released evenly over `duration` seconds."""
    started = time.monotonic()
    chunks = (total + chunk - 1) // chunk
    for i in range(chunks):
        wait = started + i * duration / chunks - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        yield i * chunk, min((i + 1) * chunk, total)


def test_confluent_idempotent_producer_through_faults(rig: Rig) -> None:
    from confluent_kafka import Producer

    topic = "faults-confluent"
    create_topic(rig.broker.bootstrap, topic, PARTITIONS)
    per_partition = 5000  # 20,000 records
    rig.proxy.drop_response = 0.06
    rig.proxy.reset = 0.04
    acked: dict[tuple[int, int], int] = {}
    failed: dict[tuple[int, int], str] = {}

    def report(partition: int, seq: int) -> Any:
        def on_delivery(err: Any, msg: Any) -> None:
            if err is None:
                acked[(partition, seq)] = msg.offset()
            else:
                failed[(partition, seq)] = str(err)

        return on_delivery

    producer = Producer(
        {
            "bootstrap.servers": rig.proxy.bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "max.in.flight.requests.per.connection": 5,
            "linger.ms": 2,
            "batch.num.messages": 100,
            "message.timeout.ms": 45_000,
            "retry.backoff.ms": 20,
            "reconnect.backoff.ms": 20,
            "reconnect.backoff.max.ms": 200,
            "socket.timeout.ms": 10_000,
        }
    )
    for start, end in paced(per_partition, 100, duration=8.0):
        for seq in range(start, end):
            for partition in range(PARTITIONS):
                producer.produce(
                    topic, value_of(partition, seq), partition=partition, on_delivery=report(partition, seq)
                )
        producer.poll(0)
    remaining = producer.flush(60)
    rig.proxy.enabled = False
    assert remaining == 0
    assert not failed, (
        f"{len(failed)} failed deliveries, e.g. {list(failed.items())[:3]}; {len(acked)} acked\n"
        + diagnose(rig)
    )
    assert len(acked) == per_partition * PARTITIONS
    # The faults really happened, often enough to matter.
    assert rig.proxy.dropped >= 5, rig.proxy.describe()
    assert rig.proxy.resets >= 1, rig.proxy.describe()
    print(f"proxy: {rig.proxy.forwarded} forwarded, {rig.proxy.dropped} dropped, {rig.proxy.resets} resets")
    check_exactly_once(rig.broker.bootstrap, topic, per_partition, acked)


def test_kafka_python_idempotent_producer_through_faults(rig: Rig) -> None:
    from kafka import KafkaProducer

    topic = "faults-kafka-python"
    create_topic(rig.broker.bootstrap, topic, PARTITIONS)
    per_partition = 1500  # kafka-python is pure Python: fewer records, same fault rate per request
    rig.proxy.drop_response = 0.08
    rig.proxy.reset = 0.03
    producer = KafkaProducer(
        bootstrap_servers=rig.proxy.bootstrap,
        enable_idempotence=True,
        acks="all",
        max_in_flight_requests_per_connection=5,
        linger_ms=2,
        batch_size=512,
        retries=1_000_000,
        retry_backoff_ms=20,
        reconnect_backoff_ms=20,
        reconnect_backoff_max_ms=200,
        request_timeout_ms=5000,
        delivery_timeout_ms=45_000,
    )
    futures: dict[tuple[int, int], Any] = {}
    try:
        for start, end in paced(per_partition, 50, duration=6.0):
            for seq in range(start, end):
                for partition in range(PARTITIONS):
                    futures[(partition, seq)] = producer.send(
                        topic, value=value_of(partition, seq), partition=partition
                    )
        producer.flush(60)
    finally:
        rig.proxy.enabled = False
        producer.close(30)
    acked: dict[tuple[int, int], int] = {}
    failed: dict[tuple[int, int], str] = {}
    for key, future in futures.items():
        if future.succeeded():
            acked[key] = future.value.offset
        else:
            failed[key] = repr(future.exception)
    assert not failed, (
        f"{len(failed)} failed deliveries, e.g. {list(failed.items())[:3]}; {len(acked)} acked\n"
        + diagnose(rig)
    )
    assert rig.proxy.dropped >= 3, rig.proxy.describe()
    print(f"proxy: {rig.proxy.forwarded} forwarded, {rig.proxy.dropped} dropped, {rig.proxy.resets} resets")
    check_exactly_once(rig.broker.bootstrap, topic, per_partition, acked)
