"""ReplicaManager moving a partition between log dirs: the Partition keeps serving and takes the new log."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.broker.parts import build_parts
from tests.storage.helpers import data_batch, read_all


def test_a_moved_partition_keeps_its_partition_object_and_serves_from_the_new_dir(tmp_path: Path) -> None:
    async def run() -> None:
        d0, d1 = tmp_path / "d0", tmp_path / "d1"
        parts = build_parts(d0, log_dirs=str(d1))
        assert parts.logs.log_dirs == (d0, d1)
        await parts.topics.create_topic("t", 1, {})
        replicas = parts.replicas
        partition = replicas.online_partition("t", 0)
        assert partition.log.directory.parent == d0
        for _ in range(50):
            replicas.append_records(partition, data_batch(3, value=b"x" * 300))
        old = partition.log
        replicas.alter_log_dir("t", 0, str(d1))
        assert replicas.moves_wanted.is_set()
        futures = [info for info in parts.logs.describe() if any(r.is_future for r in info.replicas)]
        assert [(info.path, [r.offset_lag for r in info.replicas]) for info in futures] == [(str(d1), [150])]
        steps = 0
        while replicas.move_replicas():
            steps += 1
            replicas.append_records(partition, data_batch(1, value=b"during"))  # served throughout
        assert replicas.online_partition("t", 0) is partition
        assert partition.log is not old
        assert old.closed
        assert partition.log.directory == d1 / "t-0"
        result = replicas.append_records(partition, data_batch(1, value=b"after"), required_acks=-1)
        assert result.durable_offset is not None
        await replicas.wait_durable([(partition, result.durable_offset)])
        values = [r.value for batch in read_all(partition.log) for r in batch.records()]
        assert values == [b"x" * 300] * 150 + [b"during"] * steps + [b"after"]
        assert partition.high_watermark == 150 + steps + 1
        assert not (d0 / "t-0").exists()
        await parts.close()

    asyncio.run(run())
