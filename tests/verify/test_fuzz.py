"""Bad input against the real broker: mutated frames (with a healthy client working meanwhile) and damaged
files at start (the broker serves a prefix of what was written, or refuses in one line)."""

from __future__ import annotations

import random
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from hypothesis import given, settings
from hypothesis import strategies as st

from exactly.testing.processes import BrokerProcess, free_port
from exactly.verify.fuzz import (
    FUZZ_TOPIC,
    HEALTHY_TOPIC,
    MUTATIONS,
    damage_file,
    mutate,
    run_frame_fuzz,
    seed_requests,
)
from tests.interop.support import create_topic, fetch_partition


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(MUTATIONS), st.integers(0, 2**32), st.integers(0, 6))
def test_a_mutated_frame_keeps_a_consistent_size_prefix(mutation: str, seed: int, which: int) -> None:
    _, frame = seed_requests()[which]
    out = mutate(frame, mutation, random.Random(seed))
    (size,) = struct.unpack_from(">i", out)
    if mutation == "length-short":
        assert size < len(out) - 4
    else:
        assert size == len(out) - 4
    assert out != frame or mutation in ("bitflip", "version", "api-key")


@pytest.mark.slow
def test_frame_fuzzing_never_hangs_crashes_or_corrupts(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "data") as broker:
        create_topic(broker.bootstrap, FUZZ_TOPIC, 1)
        create_topic(broker.bootstrap, HEALTHY_TOPIC, 1)
        result = run_frame_fuzz(broker.bootstrap, seconds=40, seed=20261125)
        assert broker.running, broker.log()
        assert len(result.cases) >= 100
        assert not result.mismatches, (result.mismatches[:5], result.outcomes)
        assert len({c.mutation for c in result.cases}) == len(MUTATIONS)
        assert not result.healthy_errors, result.healthy_errors
        assert result.healthy_written >= 100
        assert result.healthy_read == list(range(result.healthy_written))
        stored = fetch_partition(broker.bootstrap, FUZZ_TOPIC, 0)
        assert all(b.crc_ok for b in stored.batches)
        assert "Traceback" not in broker.full_log()


def _write_original(data_dir: Path) -> dict[tuple[str, int], list[bytes]]:
    with BrokerProcess(data_dir) as broker:
        create_topic(broker.bootstrap, "d", 2)
        p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "fz", "linger.ms": 5})
        p.init_transactions(15)
        for n in range(12):
            p.begin_transaction()
            for i in range(25):
                p.produce("d", f"{n}-{i}".encode(), partition=i % 2)
            if n % 4 == 3:
                p.abort_transaction(15)
            else:
                p.commit_transaction(15)
        return {("d", part): read_all(broker.bootstrap, "d", part) for part in (0, 1)}


def read_all(bootstrap: str, topic: str, partition: int, timeout: float = 20.0) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "fz-read",
            "isolation.level": "read_committed",
            "check.crcs": True,
            "enable.auto.commit": False,
        }
    )
    try:
        tp = TopicPartition(topic, partition)
        _, end = consumer.get_watermark_offsets(tp, 10)
        consumer.assign([TopicPartition(topic, partition, 0)])
        out: list[bytes] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and consumer.position([tp])[0].offset < end:
            for msg in consumer.consume(500, 0.3):
                if msg.error() is not None:
                    raise KafkaException(msg.error())
                out.append(msg.value() or b"")
        return out
    finally:
        consumer.close()


@pytest.mark.slow
def test_damaged_files_are_served_as_a_prefix_or_refused_in_one_line(tmp_path: Path) -> None:
    """Each of 20 damaged copies: the broker refuses to start in one line, or serves every partition as a
    prefix of what was written, or takes a partition it cannot load offline in one line."""
    original_dir = tmp_path / "original"
    original = _write_original(original_dir)
    for part in (0, 1):  # transactions 3, 7 and 11 were aborted
        assert original[("d", part)] == [
            f"{n}-{i}".encode() for n in range(12) if n % 4 != 3 for i in range(25) if i % 2 == part
        ]
    # the topic's files, the internal topics' non-empty segments, the checkpoints
    files = sorted(
        p
        for p in original_dir.rglob("*")
        if p.is_file()
        and p.stat().st_size > 0
        and (p.parent.name.startswith("d-") or p.suffix == ".log" or p.parent == original_dir)
    )
    rng = random.Random(7)
    outcomes: list[str] = []
    for case in range(20):
        work = tmp_path / f"case{case}"
        shutil.copytree(original_dir, work)
        target = work / rng.choice(files).relative_to(original_dir)
        what = f"{damage_file(target, rng)} {target.relative_to(work)}"
        broker = BrokerProcess(work, port=free_port())
        try:
            broker.start(timeout=30)
        except RuntimeError:
            lines = [line for line in broker.full_log().splitlines() if line.strip()]
            assert "Traceback" not in broker.full_log(), (what, broker.full_log()[-2000:])
            outcomes.append(f"refused: {what}: {lines[-1] if lines else ''}")
            continue
        try:
            outcome = f"served: {what}"
            for (topic, partition), values in original.items():
                try:
                    served = read_all(broker.bootstrap, topic, partition)
                except KafkaException:
                    # partitions load when first asked for: one that cannot is offline (KAFKA_STORAGE_ERROR,
                    # as a failed Kafka log dir), said in one line, and the others are served
                    offline = [
                        line
                        for line in broker.full_log().splitlines()
                        if f"cannot load partition {topic}-{partition} " in line and "is offline" in line
                    ]
                    assert len(offline) == 1, (what, topic, partition, broker.full_log()[-2000:])
                    assert "Traceback" not in broker.full_log(), (what, broker.full_log()[-2000:])
                    outcome = f"offline: {what}: {offline[0]}"
                    continue
                assert served == values[: len(served)], (what, topic, partition)
            outcomes.append(outcome)
        finally:
            broker.stop()
    assert len(outcomes) == 20


def test_a_corrupt_metadata_log_is_refused_in_one_line(tmp_path: Path) -> None:
    """Found by the disk fuzzer: the broker died with a traceback instead of a readable refusal."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "__cluster_metadata.log").write_bytes(b"\x00garbage\n{}\n")
    args = [
        sys.executable,
        "-m",
        "exactly",
        "serve",
        "--data-dir",
        str(data),
        "--listen",
        f"127.0.0.1:{free_port()}",
    ]
    done = subprocess.run(args, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: the broker stopped: ")
    assert "__cluster_metadata.log: line 1 is corrupt" in lines[0]
