"""Disk faults against the real broker process (exactly.verify.disk): simulated power loss, damage at
restart, a full disk. Clients are confluent-kafka; what the broker serves is read back with our own codecs."""

from __future__ import annotations

import random
from pathlib import Path

from exactly.verify.disk import KINDS, apply_damage, power_loss, read_ledger, surviving_ends
from exactly.verify.processes import BrokerProcess
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
