"""Share-group acknowledgements committed inside a transaction (exactly's extension,
docs/share-transactional-acks.md), end to end.

* Off by default: AddShareAcksToTxn is not advertised and answers UNSUPPORTED_VERSION; on, it is.
* A consume → transform → produce pool of 3 worker processes (`share_txn_worker`: exactly's protocol-level
  share consumer, its acks added to its producer's transaction) over N input records, workers killed -9
  at random moments and restarted (same transactional id: the new instance fences its predecessor, whose
  open transaction — output and pending acks — is aborted): every input record's output is read exactly
  once (read_committed), and every input record is acknowledged (the share partition's SPSO reaches the
  end: nothing AVAILABLE or ACQUIRED remains).
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from exactly.client.share import ShareConsumer, ShareRecord, TransactionalShareAck
from exactly.client.txn import TransactionalProducer
from exactly.errors import ErrorCode
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.add_share_acks_to_txn import AddShareAcksToTxnRequest
from exactly.protocol.messages.api_versions import ApiVersionsRequest
from exactly.protocol.messages.describe_share_group_offsets import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequestGroup,
    DescribeShareGroupOffsetsRequestTopic,
)
from tests.interop.client import RawClient
from tests.interop.groups_support import wait_until
from tests.interop.support import create_topic, running_broker

pytestmark = pytest.mark.interop

SETTINGS = (
    "group.share.enable=true",
    "share.transactional.ack.enable=true",
    "share.auto.offset.reset=earliest",
    "group.share.record.lock.duration.ms=3000",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms=500",
)
RECORDS = 1000
WORKERS = 3
KILLS = 6
MIN_KILLS = 3  # kills while there was work left (the pool may finish first on a fast machine)


def _advertised(bootstrap: str) -> set[int]:
    client = RawClient(bootstrap)
    try:
        return {k.api_key for k in client.request(ApiKey.API_VERSIONS, 3, ApiVersionsRequest()).api_keys}
    finally:
        client.close()


def test_off_unless_enabled(tmp_path: Path) -> None:
    with running_broker(tmp_path / "off", "group.share.enable=true") as proc:
        assert ApiKey.ADD_SHARE_ACKS_TO_TXN not in _advertised(proc.bootstrap)
        client = RawClient(proc.bootstrap)
        try:
            response = client.request(
                ApiKey.ADD_SHARE_ACKS_TO_TXN, 0, AddShareAcksToTxnRequest("t", 1, 0, "g", "m")
            )
        finally:
            client.close()
        assert response.error_code == ErrorCode.UNSUPPORTED_VERSION
    with running_broker(tmp_path / "on", *SETTINGS) as proc:
        assert ApiKey.ADD_SHARE_ACKS_TO_TXN in _advertised(proc.bootstrap)


class Worker:
    def __init__(self, index: int, bootstrap: str, seed: int, logs: Path) -> None:
        self.index = index
        self.bootstrap = bootstrap
        self.seed = seed
        self.logs = logs
        self.starts = 0
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.starts += 1
        args = ["--bootstrap", self.bootstrap, "--group", "pool", "--input", "in", "--output", "out"]
        args += ["--txn-id", f"worker-{self.index}", "--seed", str(self.seed * 100 + self.starts)]
        out = open(self.logs / f"worker-{self.index}-{self.starts}.log", "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.interop.share_txn_worker", *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        out.close()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def commits(self) -> int:
        """Transactions the running instance committed so far."""
        path = self.logs / f"worker-{self.index}-{self.starts}.log"
        return path.read_text().count('"committed"') if path.exists() else 0

    def log_text(self) -> str:
        return "\n".join(
            f"--- {p.name}\n{p.read_text()[-3000:]}" for p in sorted(self.logs.glob(f"worker-{self.index}-*"))
        )


def _outputs(bootstrap: str) -> list[bytes]:
    """Every record of `out` a read_committed consumer sees, up to the end of the partition."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "reader",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "log_level": 3,
        }
    )
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition("out", 0), timeout=10)
        consumer.assign([TopicPartition("out", 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                got.append(message.value())
            position = consumer.position([TopicPartition("out", 0)])[0].offset
            if position >= high:
                break
        return got
    finally:
        consumer.close()


def _start_offset(bootstrap: str) -> int:
    client = RawClient(bootstrap)
    try:
        request = DescribeShareGroupOffsetsRequest(
            [
                DescribeShareGroupOffsetsRequestGroup(
                    "pool", [DescribeShareGroupOffsetsRequestTopic("in", [0])]
                )
            ]
        )
        response = client.request(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 0, request)
        partition = response.groups[0].topics[0].partitions[0]
        return partition.start_offset if partition.error_code == 0 else -1
    finally:
        client.close()


def test_worker_pool_processes_every_record_exactly_once_under_kill_9(tmp_path: Path) -> None:
    seed = int(os.environ.get("SHARE_TXN_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    with running_broker(tmp_path / "data", *SETTINGS) as proc:
        bootstrap = proc.bootstrap
        create_topic(bootstrap, "in")
        create_topic(bootstrap, "out")
        # one record per batch, so that a share fetch can hand out a few records at a time
        producer = Producer({"bootstrap.servers": bootstrap, "batch.num.messages": 1, "log_level": 3})
        for i in range(RECORDS):
            producer.produce("in", value=f"r{i:04d}".encode(), partition=0)
        assert producer.flush(20) == 0
        workers = [Worker(i, bootstrap, seed, tmp_path) for i in range(WORKERS)]
        history: list[str] = []

        def context() -> str:
            logs = "\n".join(w.log_text() for w in workers)
            return f"seed {seed} (SHARE_TXN_SEED replays it)\n{history}\n{logs}"

        def finished() -> bool:
            return _start_offset(bootstrap) >= RECORDS

        try:
            for w in workers:
                w.start()
            for _ in range(KILLS):
                victim = rng.choice(workers)
                wanted = rng.randint(1, 4)  # the victim is busy: it committed a few transactions
                wait_until(
                    lambda v=victim, n=wanted: v.commits() >= n or finished(),
                    60,
                    "a busy victim",
                    describe=context,
                )
                if finished():  # the other workers took what was left: no kill mid-work remains possible
                    break
                time.sleep(rng.uniform(0, 0.05))  # a random moment inside its next transactions
                victim.kill()
                history.append(f"killed worker-{victim.index} after {victim.commits()} commits")
                victim.start()
            assert len(history) >= MIN_KILLS, f"the pool finished after {len(history)} kills\n{context()}"

            wait_until(finished, 90, "every input record acknowledged", describe=context)
            outputs = _outputs(bootstrap)
        finally:
            for w in workers:
                w.kill()
        counts = Counter(v.decode() for v in outputs)
        expected = {f"r{i:04d}!" for i in range(RECORDS)}
        missing = sorted(expected - set(counts))
        duplicated = sorted(v for v, n in counts.items() if n > 1)
        assert not missing, f"{len(missing)} inputs without output: {missing[:10]}\n{context()}"
        assert not duplicated, f"{len(duplicated)} outputs twice: {duplicated[:10]}\n{context()}"
        assert set(counts) == expected


def test_pending_acks_survive_a_broker_kill_and_commit_after_it(tmp_path: Path) -> None:
    """Acks pending in an open transaction are durable: after a kill -9 of the broker the records are
    still held (not redelivered), and the producer's commit after the restart acknowledges them together
    with its output."""
    with running_broker(tmp_path / "data", *SETTINGS) as proc:
        bootstrap = proc.bootstrap
        create_topic(bootstrap, "in")
        create_topic(bootstrap, "out")
        producer = Producer({"bootstrap.servers": bootstrap, "batch.num.messages": 1, "log_level": 3})
        for i in range(5):
            producer.produce("in", value=f"r{i}".encode(), partition=0)
        assert producer.flush(20) == 0
        txn = TransactionalProducer(bootstrap, "w", transaction_version=1, transaction_timeout_ms=60_000)
        txn.init()
        consumer = ShareConsumer(bootstrap, "pool", ["in"])
        records: list[ShareRecord] = []
        wait_until(lambda: bool(records.extend(consumer.poll(5)) or len(records) >= 5), 20, "5 records")
        txn.send("out", 0, [b"five"])
        TransactionalShareAck(txn).acknowledge(consumer, records)
        proc.kill()
        proc.start()
        assert _start_offset(bootstrap) == 0
        other = ShareConsumer(bootstrap, "pool", ["in"])
        try:
            for _ in range(3):  # held by the open transaction: nothing to deliver (locks are 3 s)
                assert other.poll(5, max_wait_ms=300) == []
            txn.commit()
            wait_until(lambda: _start_offset(bootstrap) == 5, 10, "the committed acks applied")
            assert other.poll(5, max_wait_ms=300) == []
        finally:
            other.close()
            txn.close()
        assert _outputs(bootstrap) == [b"five"]
