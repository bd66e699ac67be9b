"""Consume-transform-produce exactly once (issue 6): a copier moves INPUT to OUTPUT in transactions that
also carry the consumed offsets, aborting ~20% of them on purpose (and rewinding), while the test kills
-9 the copier twice and the broker once. Afterwards the committed OUTPUT is the transformed INPUT exactly
once, and the group's committed offsets are INPUT's end offsets. The same with kafka-python and aiokafka
copiers (no kills)."""

from __future__ import annotations

import asyncio
import random
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.interop.broker import BrokerProcess
from tests.interop.support import create_topic, running_broker
from tests.interop.txn_support import consume_values

pytestmark = [pytest.mark.interop, pytest.mark.slow]

INPUT_PARTITIONS = 3
OUTPUT_PARTITIONS = 2


def fill_input(bootstrap: str, count: int) -> list[bytes]:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    values = [f"record-{i}".encode() for i in range(count)]
    for i, value in enumerate(values):
        producer.produce("input", key=str(i).encode(), value=value, partition=i % INPUT_PARTITIONS)
    assert producer.flush(30) == 0
    return values


def committed_offsets(bootstrap: str, group: str) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        tps = consumer.committed([TopicPartition("input", p) for p in range(INPUT_PARTITIONS)], 20)
        return {tp.partition: tp.offset for tp in tps}
    finally:
        consumer.close()


def end_offsets(bootstrap: str) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe"})
    try:
        return {
            p: consumer.get_watermark_offsets(TopicPartition("input", p), 10)[1]
            for p in range(INPUT_PARTITIONS)
        }
    finally:
        consumer.close()


def start_copier(bootstrap: str, seed: int, idle_exit: float = 6.0) -> subprocess.Popen[bytes]:
    args = [bootstrap, "input", "output", "copiers", "copier-tx", "0.2", str(seed), str(idle_exit)]
    return subprocess.Popen(
        [sys.executable, "-m", "tests.interop.txn_copier", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


def output_partitions() -> list[tuple[str, int]]:
    return [("output", p) for p in range(OUTPUT_PARTITIONS)]


def test_exactly_once_across_copier_and_broker_kills(tmp_path: Path) -> None:
    rng = random.Random(2026)
    proc = BrokerProcess(tmp_path / "data", "group.initial.rebalance.delay.ms=0")
    proc.start()
    copier: subprocess.Popen[bytes] | None = None
    try:
        bootstrap = proc.bootstrap
        create_topic(bootstrap, "input", INPUT_PARTITIONS)
        create_topic(bootstrap, "output", OUTPUT_PARTITIONS)
        values = fill_input(bootstrap, 3000)
        expected = Counter(v.upper() for v in values)
        ends = end_offsets(bootstrap)

        outputs: list[bytes] = []
        for kill in ("copier", "copier", "broker", None):
            copier = start_copier(bootstrap, rng.randrange(1 << 30))
            if kill is None:
                break
            time.sleep(rng.uniform(1.5, 3.0))
            if kill == "copier":
                copier.kill()
                copier.wait(10)
            else:
                proc.kill()
                proc.start()
                # the copier survives a broker restart, or dies of a fatal error and is restarted
                time.sleep(2)
                if copier.poll() is None:
                    copier.kill()
                copier.wait(10)
        assert copier is not None
        out, _ = copier.communicate(timeout=240)
        assert copier.returncode == 0, out.decode(errors="replace")

        outputs = consume_values(bootstrap, output_partitions(), "read_committed", len(values), settle=2.0)
        got = Counter(outputs)
        assert got == expected, (
            f"missing {sum((expected - got).values())}, duplicated {sum((got - expected).values())}"
        )
        assert committed_offsets(bootstrap, "copiers") == ends
        # aborted transactions really happened: the log holds more than the committed output
        everything = consume_values(
            bootstrap, output_partitions(), "read_uncommitted", len(values), settle=2.0
        )
        assert len(everything) > len(values)
    finally:
        if copier is not None and copier.poll() is None:
            copier.kill()
        proc.kill()


def test_exactly_once_with_kafka_python_copier(tmp_path: Path) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.structs import OffsetAndMetadata

    with running_broker(tmp_path / "data", "group.initial.rebalance.delay.ms=0") as proc:
        bootstrap = proc.bootstrap
        create_topic(bootstrap, "input", INPUT_PARTITIONS)
        create_topic(bootstrap, "output", OUTPUT_PARTITIONS)
        values = fill_input(bootstrap, 300)
        rng = random.Random(7)
        consumer = KafkaConsumer(
            "input",
            bootstrap_servers=bootstrap,
            group_id="kp-copiers",
            isolation_level="read_committed",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="kp-copier")
        producer.init_transactions()
        aborted = 0
        deadline = time.monotonic() + 60
        idle_since = time.monotonic()
        while time.monotonic() - idle_since < 4 and time.monotonic() < deadline:
            batches = consumer.poll(timeout_ms=500, max_records=25)
            if not batches:
                continue
            idle_since = time.monotonic()
            producer.begin_transaction()
            offsets = {}
            for tp, messages in batches.items():
                for m in messages:
                    producer.send("output", key=m.key, value=m.value.upper())
                offsets[tp] = OffsetAndMetadata(messages[-1].offset + 1, "", -1)
            producer.send_offsets_to_transaction(offsets, consumer.group_metadata())
            if rng.random() < 0.2:
                producer.abort_transaction()
                aborted += 1
                for tp in batches:
                    committed = consumer.committed(tp)  # kafka-python 3 returns the offset
                    consumer.seek(tp, committed if committed is not None else 0)
            else:
                producer.commit_transaction()
        producer.close()
        consumer.close()
        assert aborted > 0
        outputs = consume_values(bootstrap, output_partitions(), "read_committed", len(values))
        assert Counter(outputs) == Counter(v.upper() for v in values)
        assert committed_offsets(bootstrap, "kp-copiers") == end_offsets(bootstrap)


def test_exactly_once_with_aiokafka_copier(tmp_path: Path) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    async def copy(bootstrap: str) -> int:
        rng = random.Random(11)
        consumer = AIOKafkaConsumer(
            "input",
            bootstrap_servers=bootstrap,
            group_id="aio-copiers",
            isolation_level="read_committed",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id="aio-copier")
        await consumer.start()
        await producer.start()
        aborted = 0
        try:
            idle_since = time.monotonic()
            while time.monotonic() - idle_since < 4:
                batches = await consumer.getmany(timeout_ms=500, max_records=25)
                if not batches:
                    continue
                idle_since = time.monotonic()
                await producer.begin_transaction()
                offsets = {}
                for tp, messages in batches.items():
                    for m in messages:
                        await producer.send("output", key=m.key, value=(m.value or b"").upper())
                    offsets[tp] = messages[-1].offset + 1
                await producer.send_offsets_to_transaction(offsets, "aio-copiers")
                if rng.random() < 0.2:
                    await producer.abort_transaction()
                    aborted += 1
                    for tp in batches:
                        committed = await consumer.committed(tp)
                        consumer.seek(tp, committed if committed is not None else 0)
                else:
                    await producer.commit_transaction()
        finally:
            await producer.stop()
            await consumer.stop()
        return aborted

    with running_broker(tmp_path / "data", "group.initial.rebalance.delay.ms=0") as proc:
        bootstrap = proc.bootstrap
        create_topic(bootstrap, "input", INPUT_PARTITIONS)
        create_topic(bootstrap, "output", OUTPUT_PARTITIONS)
        values = fill_input(bootstrap, 300)
        assert asyncio.run(copy(bootstrap)) > 0
        outputs = consume_values(bootstrap, output_partitions(), "read_committed", len(values))
        assert Counter(outputs) == Counter(v.upper() for v in values)
        assert committed_offsets(bootstrap, "aio-copiers") == end_offsets(bootstrap)
