"""The replica manager between handlers and logs: partitions found over the log manager, appends that
wake parked fetches (a duplicate does not), the acks wait, and a deleted topic's partitions forgotten."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from exactly.errors import ErrorCode, KafkaError
from exactly.records.control import ControlRecordType, EndTxnMarker
from tests.broker.parts import build_parts
from tests.storage.helpers import data_batch


def test_appends_wake_parked_fetches_and_acks_all_waits_for_the_disk(tmp_path: Path) -> None:
    async def run() -> None:
        parts = build_parts(tmp_path)
        await parts.topics.create_topic("t", 2, {})
        replicas = parts.replicas
        partition = replicas.online_partition("t", 1)
        assert replicas.partition("t", 1) is partition  # one Partition per log
        waiter = replicas.wakeups.waiter()
        result = replicas.append_records(partition, data_batch(2, pid=1, epoch=0, seq=0), required_acks=-1)
        assert waiter.done()
        assert result.durable_offset == 2
        assert partition.log.recovery_point == 0
        await replicas.wait_durable([(partition, result.durable_offset)])
        assert partition.log.recovery_point == 2

        waiter = replicas.wakeups.waiter()
        again = replicas.append_records(partition, data_batch(2, pid=1, epoch=0, seq=0))
        assert again.info.duplicate  # nothing new to read: no wake-up
        assert not waiter.done()
        await replicas.wakeups.wait(waiter, 0.01)
        assert not waiter.done()

        marker = replicas.append_end_txn_marker("t", 0, 5, 0, EndTxnMarker(ControlRecordType.ABORT, 0))
        assert waiter.done()
        assert marker.partition.high_watermark == 1
        await parts.close()

    asyncio.run(run())


def test_unknown_and_deleted_partitions(tmp_path: Path) -> None:
    async def run() -> None:
        parts = build_parts(tmp_path)
        replicas = parts.replicas
        assert replicas.partition("t", 0) is None
        with pytest.raises(KafkaError) as unknown:
            replicas.online_partition("t", 0)
        assert unknown.value.code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        await parts.topics.create_topic("t", 1, {})
        before = replicas.online_partition("t", 0)
        replicas.append_records(before, data_batch(1))
        await parts.topics.delete_topic("t")
        assert replicas.partition("t", 0) is None
        await parts.topics.create_topic("t", 1, {})
        after = replicas.online_partition("t", 0)
        assert after is not before
        assert after.log_end_offset == 0
        await parts.close()

    asyncio.run(run())
