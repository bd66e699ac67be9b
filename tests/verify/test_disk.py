"""Disk faults against the real broker process (exactly.verify.disk): simulated power loss, damage at
restart, a full disk. Clients are confluent-kafka; what the broker serves is read back with our own codecs."""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path

from exactly.testing.processes import BrokerProcess
from exactly.verify.disk import KINDS, DiskLimit, apply_damage, power_loss, read_ledger, surviving_ends
from tests.interop.support import create_topic, running_broker
from tests.verify.disk_support import Produced, check_served, produce

PARTITIONS = 2


def test_power_loss_loses_nothing_acked_and_never_serves_garbage(tmp_path: Path) -> None:
    totals = {"files_cut": 0, "bytes_removed": 0, "garbage_tails": 0, "records_cut": 0}
    for seed in range(4):
        rng = random.Random(seed)
        data = tmp_path / f"data-{seed}"
        ledger = tmp_path / f"ledger-{seed}"
        broker = BrokerProcess(data, f"exactly.debug.fsync.ledger={ledger}", "log.segment.bytes=40000")
        broker.start()
        try:
            create_topic(broker.bootstrap, "pl", PARTITIONS)
            produced = Produced()
            produce(broker.bootstrap, "pl", PARTITIONS, 300 + 50 * seed, produced, tag="all")
            # acks=1 appends are acknowledged before any fsync: an unflushed tail for the power loss.
            produce(broker.bootstrap, "pl", PARTITIONS, 200, produced, acks="1", tag="one")
            ends_before = surviving_ends(data)
            broker.kill()
            loss = power_loss(data, ledger, rng)
            broker.start()
            for p in range(PARTITIONS):
                hwm = check_served(broker.bootstrap, "pl", p, produced)
                # The broker keeps exactly the complete batches that survived: garbage tails and torn
                # batches are truncated at load, never served.
                assert hwm == loss.cut[f"pl:{p}"], (seed, p, hwm, loss)
                acked_end = max(o for (q, o) in produced.acked_all if q == p) + 1
                assert acked_end <= hwm <= ends_before[f"pl:{p}"]
                totals["records_cut"] += ends_before[f"pl:{p}"] - hwm
            # After recovery the broker fsyncs what it kept: a second power loss takes nothing more.
            broker.kill()
            again = power_loss(data, ledger, random.Random(seed + 100))
            assert all(again.cut[f"pl:{p}"] == loss.cut[f"pl:{p}"] for p in range(PARTITIONS)), again
            broker.start()
            for p in range(PARTITIONS):
                assert check_served(broker.bootstrap, "pl", p, produced) == loss.cut[f"pl:{p}"]
        finally:
            broker.kill()
        totals["files_cut"] += loss.files_cut
        totals["bytes_removed"] += loss.bytes_removed
        totals["garbage_tails"] += loss.garbage_tails
    assert totals["bytes_removed"] > 0
    assert totals["garbage_tails"] > 0
    print(f"power loss over 4 seeds: {totals}")


def test_each_damage_kind_is_survived(tmp_path: Path) -> None:
    data = tmp_path / "data"
    ledger = tmp_path / "ledger"
    rng = random.Random(7)
    produced = Produced()
    hit: dict[str, str] = {}
    with running_broker(data, f"exactly.debug.fsync.ledger={ledger}", "log.segment.bytes=20000") as broker:
        create_topic(broker.bootstrap, "dmg", PARTITIONS)
        produce(broker.bootstrap, "dmg", PARTITIONS, 200, produced, tag="first")
        broker.stop()  # a clean shutdown writes snapshots and the clean-shutdown marker
        broker.start()
        for i, kind in enumerate(KINDS):
            produce(broker.bootstrap, "dmg", PARTITIONS, 100, produced, tag=f"all{i}")
            produce(broker.bootstrap, "dmg", PARTITIONS, 30, produced, acks="1", tag=f"one{i}")
            if kind == "delete-clean-shutdown":
                broker.stop()
            else:
                broker.kill()
            before = read_ledger(ledger)
            path = apply_damage(kind, data, rng, ledger)
            assert path is not None, (kind, sorted(p.name for p in data.rglob("*")))
            hit[kind] = str(path.relative_to(data))
            if kind == "flip-unflushed-byte":
                assert path.stat().st_size > before[hit[kind]]
            broker.start()
            for p in range(PARTITIONS):
                check_served(broker.bootstrap, "dmg", p, produced)
        # Everything produced after the damage lands after what was kept.
        produce(broker.bootstrap, "dmg", PARTITIONS, 20, produced, tag="last")
        for p in range(PARTITIONS):
            check_served(broker.bootstrap, "dmg", p, produced)
    assert sorted(hit) == sorted(KINDS)
    print(f"damage: {hit}")


def _wait_for_log(broker: BrokerProcess, text: str, timeout: float, count: int = 1) -> float:
    """Seconds until the broker's log holds `text` `count` times (fails after `timeout`)."""
    started = time.monotonic()
    while broker.full_log().count(text) < count:
        assert time.monotonic() - started < timeout, f"no {text!r} in the broker log:\n{broker.log()}"
        time.sleep(0.05)
    return time.monotonic() - started


def _batches_tile(log: Path) -> bool:
    """True when the `.log` is whole batches end to end (no partial batch left by a failed write)."""
    data = log.read_bytes()
    pos = 0
    while pos + 12 <= len(data):
        pos += 12 + int.from_bytes(data[pos + 8 : pos + 12], "big")
    return pos == len(data)


def test_disk_full_refuses_writes_and_recovers_when_space_returns(tmp_path: Path) -> None:
    # The data directory is the mount point; the broker's own log is written beside it, off the full disk.
    with DiskLimit(tmp_path / "data", 8 << 20) as disk:
        data = disk.directory
        broker = BrokerProcess(data)
        broker.start()
        try:
            create_topic(broker.bootstrap, "full", 1)
            produced = Produced()
            produce(broker.bootstrap, "full", 1, 100, produced, tag="before")
            disk.fill(0)
            errors: list[BaseException] = []

            def writer() -> None:
                try:
                    produce(broker.bootstrap, "full", 1, 1000, produced, tag="during", timeout_ms=90_000)
                except BaseException as e:  # noqa: BLE001 - reported by the test thread
                    errors.append(e)

            thread = threading.Thread(target=writer)
            thread.start()
            refused_s = _wait_for_log(broker, "disk full", 30)
            # Reads keep being served while writes are refused; nothing acknowledged is missing.
            check_served(broker.bootstrap, "full", 0, produced)
            # A restart while the disk is full loads the log without needing free space.
            broker.kill()
            broker.start()
            check_served(broker.bootstrap, "full", 0, produced)
            assert len(produced.acked_all) < 1100
            disk.free()
            freed = time.monotonic()
            thread.join(120)
            recovered_s = time.monotonic() - freed
            assert not thread.is_alive()
            assert not errors, errors
            assert len(produced.acked_all) == 1100
            hwm = check_served(broker.bootstrap, "full", 0, produced)
            assert hwm == 1100  # idempotence: retries after the refusals wrote nothing twice
            log_text = broker.full_log()
            assert "Traceback" not in log_text
            assert log_text.count("disk full") <= 2, log_text  # once per broker incarnation at most
            assert "disk writes succeed again" in log_text
            broker.stop()
            assert _batches_tile(data / "full-0" / "00000000000000000000.log")
        finally:
            broker.kill()
    print(f"disk full: refused {refused_s:.2f} s after the fill, all acked {recovered_s:.2f} s after free()")


def test_transaction_over_a_full_disk_completes_after_free(tmp_path: Path) -> None:
    from confluent_kafka import Consumer, Producer

    with DiskLimit(tmp_path / "data", 8 << 20) as disk:
        # Tiny __transaction_state segments: every transition rolls a new segment, so it needs a fresh
        # block and is refused on the full disk (it could otherwise fit in the last block's slack).
        broker = BrokerProcess(disk.directory, "transaction.state.log.segment.bytes=400")
        broker.start()
        try:
            create_topic(broker.bootstrap, "txfull", 1)
            producer = Producer(
                {
                    "bootstrap.servers": broker.bootstrap,
                    "transactional.id": "disk-full-txn",
                    "transaction.timeout.ms": 120_000,
                    "message.timeout.ms": 90_000,
                    "batch.size": 8192,
                    "linger.ms": 5,
                }
            )
            producer.init_transactions(30)
            producer.begin_transaction()
            for i in range(300):
                producer.produce("txfull", b"t-%06d-" % i + b"x" * 100)
            assert producer.flush(30) == 0
            disk.fill(0)  # EndTxn's PrepareCommit cannot be written now
            outcome: list[BaseException | None] = []

            def commit() -> None:
                try:
                    producer.commit_transaction(110)
                    outcome.append(None)
                except BaseException as e:  # noqa: BLE001 - reported by the test thread
                    outcome.append(e)

            thread = threading.Thread(target=commit)
            thread.start()
            # EndTxn's append is refused (NOT_COORDINATOR, Kafka's code for a storage error there); the
            # client retries. (A retry may succeed before free(): a failed write releases its blocks.)
            _wait_for_log(broker, "disk full: cannot write __transaction_state", 30)
            disk.free()
            thread.join(120)
            assert outcome == [None]
            consumer = Consumer(
                {
                    "bootstrap.servers": broker.bootstrap,
                    "group.id": "txfull-reader",
                    "isolation.level": "read_committed",
                    "auto.offset.reset": "earliest",
                    "enable.auto.commit": False,
                }
            )
            consumer.subscribe(["txfull"])
            values: list[bytes] = []
            deadline = time.monotonic() + 30
            while len(values) < 300 and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is not None and msg.error() is None:
                    values.append(msg.value())
            consumer.close()
            assert values == [b"t-%06d-" % i + b"x" * 100 for i in range(300)]
            log_text = broker.full_log()
            assert "Traceback" not in log_text
            assert " ERROR " not in log_text
        finally:
            broker.kill()
