"""Consume-transform-produce exactly once, with real clients in real processes.

`tests/interop/txn_copier.py` moves INPUT (3 partitions, N distinct records, key=i) to OUTPUT
(2 partitions) in transactions that carry the consumed offsets (send_offsets_to_transaction), aborting
~20% of them on purpose and rewinding to the group's committed offsets. The confluent-kafka copier is
killed -9 twice at random moments (restarted with the same transactional.id, which fences and aborts its
predecessor's transaction) and the broker is killed -9 once mid-run (the copier carries on, or is
restarted if the broker's restart cost it a fatal error). Afterwards the committed OUTPUT is the
transformed INPUT exactly once (as multisets of (key, value)), the group's committed offsets are INPUT's
end offsets, and no transaction is left open. The kafka-python and aiokafka copiers do the same without
kills.

The kill moments come from a seed, printed on failure; `TXN_PIPELINE_SEED=<seed>` replays a run.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from exactly.testing.processes import BrokerProcess
from tests.interop.support import create_topic
from tests.interop.txn_copier import FATAL_EXIT, transform

pytestmark = [pytest.mark.interop, pytest.mark.slow]

INPUT, OUTPUT = "input", "output"
INPUT_PARTITIONS, OUTPUT_PARTITIONS = 3, 2
SETTINGS = ("group.initial.rebalance.delay.ms=0",)


class Copier:
    """One `txn_copier` process; its JSON events are collected by a reader thread."""

    def __init__(
        self, workdir: Path, name: str, client: str, bootstrap: str, seed: int, group: str, txn_id: str
    ) -> None:
        self.name = name
        self.events: list[dict[str, Any]] = []
        self.stderr_path = workdir / f"{name}.stderr"
        args = ["--client", client, "--bootstrap", bootstrap, "--input", INPUT, "--output", OUTPUT]
        args += ["--group", group, "--txn-id", txn_id, "--seed", str(seed), "--abort-probability", "0.2"]
        with open(self.stderr_path, "wb") as stderr:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tests.interop.txn_copier", *args],
                stdout=subprocess.PIPE,
                stderr=stderr,
            )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                self.events.append(json.loads(line))
            except ValueError:
                self.events.append({"event": "noise", "line": line.decode(errors="replace")})

    def count(self, event: str) -> int:
        return sum(1 for e in list(self.events) if e["event"] == event)

    def records(self, event: str) -> int:
        return sum(e.get("records", 0) for e in list(self.events) if e["event"] == event)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        self._reader.join(5)

    def wait(self, timeout: float) -> int:
        code = self.proc.wait(timeout)
        self._reader.join(5)
        return code

    def describe(self) -> str:
        if self.proc.poll() is None:  # still running: its Python stacks, to see where it is stuck
            self.proc.send_signal(signal.SIGUSR1)
            time.sleep(0.5)
        tail = [e for e in self.events if e["event"] not in ("committed", "aborted")][-10:]
        stderr = self.stderr_path.read_text(errors="replace")[-3000:]
        return (
            f"{self.name}: exit {self.proc.poll()}, {self.count('committed')} commits, "
            f"{self.count('aborted')} aborts, other events {tail}\nstderr:\n{stderr}"
        )


def fill_input(bootstrap: str, count: int) -> Counter[tuple[bytes, bytes]]:
    """INPUT gets records key=i, value=record-i round-robin; returns the expected OUTPUT."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    expected: Counter[tuple[bytes, bytes]] = Counter()
    for i in range(count):
        key, value = str(i).encode(), f"record-{i}".encode()
        producer.produce(INPUT, key=key, value=value, partition=i % INPUT_PARTITIONS)
        expected[(key, transform(value))] += 1
    assert producer.flush(30) == 0
    return expected


def read_output(
    bootstrap: str, isolation: str, expected: int, timeout: float = 30.0
) -> list[tuple[Any, Any]]:
    """Every (key, value) of OUTPUT for `isolation`: at least `expected`, and up to the end of each
    partition (read_committed: the last stable offset)."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{time.monotonic_ns()}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "fetch.wait.max.ms": 50,
        }
    )
    try:
        consumer.assign([TopicPartition(OUTPUT, p, 0) for p in range(OUTPUT_PARTITIONS)])
        records: list[tuple[Any, Any]] = []
        at_end: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(at_end) < OUTPUT_PARTITIONS or len(records) < expected:
            assert time.monotonic() < deadline, f"{isolation}: {len(records)} records, at the end of {at_end}"
            message = consumer.poll(0.1)
            if message is None:
                continue
            if message.error() is not None:
                assert message.error().code() == KafkaError._PARTITION_EOF, message.error()
                at_end.add(message.partition())
                continue
            at_end.discard(message.partition())
            records.append((message.key(), message.value()))
        return records
    finally:
        consumer.close()


def committed_offsets(bootstrap: str, group: str) -> dict[int, int]:
    """The group's committed INPUT offsets: OffsetFetch through confluent-kafka's `committed`."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    try:
        tps = consumer.committed([TopicPartition(INPUT, p) for p in range(INPUT_PARTITIONS)], 20)
        return {tp.partition: tp.offset for tp in tps}
    finally:
        consumer.close()


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe"})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), 10)[1] for p in range(partitions)}
    finally:
        consumer.close()


def assert_no_open_transactions(bootstrap: str) -> None:
    """`exactly txn list` / `find-hanging` through kafka-python's admin client."""
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        deadline = time.monotonic() + 5
        while True:
            listed = [t for listings in admin.list_transactions().values() for t in listings]
            active = [
                (t.transactional_id, t.state.value)
                for t in listed
                if not t.state.value.startswith("Complete")
            ]
            if not active:
                break
            assert time.monotonic() < deadline, f"transactions still active: {active}"
            time.sleep(0.1)
        producers = admin.describe_producers([TopicPartition(OUTPUT, p) for p in range(OUTPUT_PARTITIONS)])
        hanging = [
            (tp, p.producer_id, p.current_transaction_start_offset)
            for tp, state in producers.items()
            for p in state.active_producers
            if p.current_transaction_start_offset >= 0
        ]
        assert hanging == []
    finally:
        admin.close()


def check_exactly_once(
    bootstrap: str, group: str, expected: Counter[tuple[bytes, bytes]], context: str
) -> None:
    total = sum(expected.values())
    got = Counter(read_output(bootstrap, "read_committed", total))
    missing, duplicated = expected - got, got - expected
    assert not missing, f"{len(missing)} missing (e.g. {sorted(missing)[:5]})\n{context}"
    assert not duplicated, f"{sum(duplicated.values())} duplicated (e.g. {sorted(duplicated)[:5]})\n{context}"
    ends = end_offsets(bootstrap, INPUT, INPUT_PARTITIONS)
    assert sum(ends.values()) == total
    assert committed_offsets(bootstrap, group) == ends, context
    # aborted transactions really happened: their records are in OUTPUT's log, invisible when committed
    assert len(read_output(bootstrap, "read_uncommitted", total)) > total, context
    assert_no_open_transactions(bootstrap)


def test_exactly_once_across_copier_and_broker_kills(tmp_path: Path) -> None:
    seed = int(os.environ.get("TXN_PIPELINE_SEED") or random.randrange(1 << 30))
    rng = random.Random(seed)
    total = 3000
    proc = BrokerProcess(tmp_path / "data", *SETTINGS)
    proc.start()
    copiers: list[Copier] = []
    history: list[str] = [f"seed {seed}"]

    def new_copier() -> Copier:
        copier = Copier(
            tmp_path,
            f"copier-{len(copiers)}",
            "confluent",
            proc.bootstrap,
            rng.randrange(1 << 30),
            "copiers",
            "copier-tx",
        )
        copiers.append(copier)
        return copier

    def progress() -> int:
        return sum(c.records("committed") for c in copiers)

    def context() -> str:
        return "\n".join(history + [c.describe() for c in copiers] + ["broker log:", proc.log()[-3000:]])

    def supervise(until: Any, timeout: float, what: str) -> None:
        """Wait for `until()`, restarting a copier that exited with a fatal error."""
        deadline = time.monotonic() + timeout
        while not until():
            code = copiers[-1].proc.poll()
            if code == FATAL_EXIT:
                history.append(f"{copiers[-1].name} exited with a fatal error at {progress()}: restarted")
                new_copier()
            elif code is not None and code != 0:
                pytest.fail(f"{copiers[-1].name} crashed with exit code {code}\n{context()}")
            assert time.monotonic() < deadline, f"timed out waiting for {what}\n{context()}"
            time.sleep(0.02)

    try:
        create_topic(proc.bootstrap, INPUT, INPUT_PARTITIONS)
        create_topic(proc.bootstrap, OUTPUT, OUTPUT_PARTITIONS)
        expected = fill_input(proc.bootstrap, total)
        new_copier()
        plan = [
            ("copier", rng.uniform(0.08, 0.2)),
            ("copier", rng.uniform(0.3, 0.45)),
            ("broker", rng.uniform(0.55, 0.7)),
        ]
        for victim, fraction in plan:
            supervise(lambda f=fraction: progress() >= f * total, 60, f"{fraction:.0%} progress")
            time.sleep(rng.uniform(0, 0.1))  # a random moment of the transaction cycle
            at = progress()
            assert at < total, f"the copier finished before the kill of the {victim}\n{context()}"
            if victim == "copier":
                copiers[-1].kill()
                history.append(f"killed {copiers[-1].name} at {at}")
                new_copier()
            else:
                proc.kill()
                history.append(f"killed the broker at {at}")
                proc.start()
        supervise(lambda: copiers[-1].proc.poll() == 0, 90, "the copier to finish")
        history.append(f"{copiers[-1].name} finished")
        survivors = [c.name for c in copiers if c.proc.returncode == 0]
        print("\n".join(history), f"\ncopiers that finished: {survivors}")

        context_text = context()
        assert sum(c.count("aborted") for c in copiers) > 0, context_text
        check_exactly_once(proc.bootstrap, "copiers", expected, context_text)
        assert "Traceback" not in proc.log_path.read_text(errors="replace"), context_text
    finally:
        for copier in copiers:
            copier.kill()
        proc.kill()


@pytest.mark.parametrize("client", ["kafka-python", "aiokafka"])
def test_exactly_once_with_other_clients(tmp_path: Path, client: str) -> None:
    total = 300
    proc = BrokerProcess(tmp_path / "data", *SETTINGS)
    proc.start()
    copier: Copier | None = None
    try:
        create_topic(proc.bootstrap, INPUT, INPUT_PARTITIONS)
        create_topic(proc.bootstrap, OUTPUT, OUTPUT_PARTITIONS)
        expected = fill_input(proc.bootstrap, total)
        group = f"{client}-copiers"
        copier = Copier(tmp_path, client, client, proc.bootstrap, 7, group, f"{client}-tx")
        assert copier.wait(90) == 0, copier.describe()
        assert copier.count("aborted") > 0, copier.describe()
        assert copier.records("committed") == total, copier.describe()
        check_exactly_once(proc.bootstrap, group, expected, copier.describe())
    finally:
        if copier is not None:
            copier.kill()
        proc.kill()
