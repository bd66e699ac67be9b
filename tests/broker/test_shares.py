"""ShareService's log read for a ShareFetch (issue 24): it reads what the share partition's window can
take, in chunks, not the client's whole MaxBytes, and what it returns is exactly the acquired batches."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from exactly.broker.config import BrokerConfig
from exactly.broker.server import Broker
from exactly.group.share.partition import AckBatch, AckType
from exactly.group.share.records import SharePartitionKey
from exactly.records.batch import iter_batches
from exactly.records.builder import BatchBuilder
from exactly.replication.partition import Partition

BATCHES = 200
PER_BATCH = 10
VALUE = b"v" * 1024
WINDOW = 100
CLIENT_MAX_BYTES = 50 * 1024 * 1024  # what librdkafka asks for


def _batch(i: int) -> bytes:
    builder = BatchBuilder()
    for _ in range(PER_BATCH):
        builder.append(i, None, VALUE)
    return bytes(builder.build())


def test_acquire_reads_what_the_window_can_take_and_returns_only_acquired_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: list[tuple[int, int]] = []
    original = Partition.read

    def spy(self: Partition, fetch_offset: int, max_bytes: int, *args: Any, **kwargs: Any) -> Any:
        if self.topic == "t":
            reads.append((fetch_offset, max_bytes))
        return original(self, fetch_offset, max_bytes, *args, **kwargs)

    monkeypatch.setattr(Partition, "read", spy)

    async def run() -> None:
        props = {
            "log.dirs": str(tmp_path / "data"),
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.num.partitions": "1",
            "share.coordinator.state.topic.num.partitions": "1",
            "group.share.enable": "true",
            "share.auto.offset.reset": "earliest",
            "group.share.partition.max.record.locks": str(WINDOW),
        }
        broker = Broker(BrokerConfig.from_properties(props))
        await broker.start()
        try:
            info = await broker.topics.create_topic("t", 1, {})
            partition = broker.replicas.online_partition("t", 0)
            for i in range(BATCHES):
                broker.replicas.append_records(partition, _batch(i), required_acks=1)
            key = SharePartitionKey("g", info.topic_id, 0)
            shares = broker.shares
            await shares.load(key, "t")  # the state read from the share coordinator (none: earliest)

            # whole batches up to MaxRecords (25 -> 3 batches), read in a chunk, not 50 MiB
            got = shares.acquire(key, "t", "a", 25, CLIENT_MAX_BYTES)
            assert [(r.first_offset, r.last_offset, r.delivery_count) for r in got.ranges] == [(0, 29, 1)]
            assert [(b.base_offset, b.last_offset) for b in iter_batches(got.records)] == [
                (i * PER_BATCH, i * PER_BATCH + PER_BATCH - 1) for i in range(3)
            ]
            # another member: the rest of the window, in as many chunks as it takes, and no further
            got = shares.acquire(key, "t", "b", 500, CLIENT_MAX_BYTES)
            assert [(r.first_offset, r.last_offset) for r in got.ranges] == [(30, WINDOW - 1)]
            assert [b.base_offset for b in iter_batches(got.records)] == list(range(30, WINDOW, PER_BATCH))
            # the window is full: nothing more, and no read
            before = len(reads)
            assert shares.acquire(key, "t", "c", 500, CLIENT_MAX_BYTES).ranges == []
            assert len(reads) == before
            # never more than a window's worth of bytes (plus one chunk) per fetch
            assert all(max_bytes < 4 * WINDOW * len(VALUE) for _, max_bytes in reads)
            # acknowledged: the window moves on and the next fetch starts where it ended
            accept = (int(AckType.ACCEPT),)
            assert int(await shares.acknowledge(key, "t", "a", [AckBatch(0, 29, accept)])) == 0
            got = shares.acquire(key, "t", "c", 500, CLIENT_MAX_BYTES)
            assert [(r.first_offset, r.last_offset) for r in got.ranges] == [(WINDOW, WINDOW + 29)]
            # a record released mid-window is read again from there
            assert (
                int(await shares.acknowledge(key, "t", "b", [AckBatch(40, 49, (int(AckType.RELEASE),))])) == 0
            )
            got = shares.acquire(key, "t", "a", 5, CLIENT_MAX_BYTES)
            assert [(r.first_offset, r.last_offset, r.delivery_count) for r in got.ranges] == [(40, 49, 2)]
        finally:
            broker.request_stop()
            await broker.stop()

    asyncio.run(run())
