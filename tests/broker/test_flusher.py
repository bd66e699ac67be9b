"""The acks=all group commit (exactly.broker.flusher): one log at a time, and many logs with one syncfs."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from exactly.broker.flusher import GROUP_SYNC_MIN_LOGS, Flusher
from exactly.storage import files
from exactly.storage.log import PartitionLog
from exactly.verify.disk import read_ledger
from tests.storage.helpers import data_batch, leader_append, open_log


def _logs(data: Path, count: int) -> list[PartitionLog]:
    logs = []
    for i in range(count):
        log = open_log(data / f"t-{i}")
        leader_append(log, data_batch(3))
        logs.append(log)
    return logs


def _wait(flusher: Flusher, logs: list[PartitionLog]) -> list[object]:
    async def run() -> list[object]:
        return list(await flusher.wait_durable_each([(log, log.log_end_offset) for log in logs]))

    return asyncio.run(run())


def test_many_logs_are_made_durable_by_one_sync_and_recorded_in_the_ledger(tmp_path: Path) -> None:
    data = tmp_path / "data"
    logs = _logs(data, GROUP_SYNC_MIN_LOGS + 8)
    files.open_fsync_ledger(tmp_path / "ledger", data)
    flusher = Flusher(data)
    try:
        assert [log.recovery_point for log in logs] == [0] * len(logs)
        assert _wait(flusher, logs) == [None] * len(logs)
        assert flusher.group_syncs == 1
    finally:
        flusher.close()
        files.close_fsync_ledger()
    assert [log.recovery_point for log in logs] == [3] * len(logs)
    durable = read_ledger(tmp_path / "ledger")
    for i, log in enumerate(logs):  # every log file at its full length, through the group path's ledger lines
        assert durable[f"t-{i}/00000000000000000000.log"] == log.size_in_bytes
    for log in logs:
        log.close()


def test_few_logs_take_one_flush_each(tmp_path: Path) -> None:
    logs = _logs(tmp_path / "data", 3)
    flusher = Flusher(tmp_path / "data")
    try:
        assert _wait(flusher, logs) == [None, None, None]
        assert flusher.group_syncs == 0
    finally:
        flusher.close()
    assert [log.recovery_point for log in logs] == [3, 3, 3]


def test_synced_together_defers_only_its_own_threads_fsyncs(tmp_path: Path) -> None:
    """Another thread's fsync inside the block is a real fsync (it must not be acknowledged on the strength
    of a sync that has not happened yet)."""
    files.open_fsync_ledger(tmp_path / "ledger", tmp_path)
    other = tmp_path / "other"
    seen: list[bool] = []

    def elsewhere() -> None:
        seen.append(files.deferring())
        files.write_atomically(other, b"x" * 7)

    try:
        with files.synced_together(tmp_path):
            assert files.deferring()
            thread = threading.Thread(target=elsewhere)
            thread.start()
            thread.join()
            assert read_ledger(tmp_path / "ledger")["other"] == 7  # recorded before the block ends
    finally:
        files.close_fsync_ledger()
    assert seen == [False]
    assert not files.deferring()


def test_worker_threads_hand_back_results_and_errors_and_close_joins_them() -> None:
    """The flusher's own threads (`_Workers`): a result and an exception reach the awaiting coroutine, a
    waiter that gave up is skipped, and close() lets submitted work finish before joining."""
    from exactly.broker.flusher import _Workers

    workers = _Workers(2)
    finished: list[int] = []

    def fail() -> None:
        raise ValueError("disk on fire")

    def slow(n: int) -> int:
        finished.append(n)
        return n * 2

    async def run() -> None:
        assert await workers.submit(slow, 21) == 42
        with pytest.raises(ValueError, match="disk on fire"):
            await workers.submit(fail)
        abandoned = workers.submit(slow, 1)
        abandoned.cancel()
        assert await asyncio.gather(*(workers.submit(slow, n) for n in range(5))) == [0, 2, 4, 6, 8]

    asyncio.run(run())
    workers.close()
    assert sorted(finished) == [0, 1, 1, 2, 3, 4, 21]
    assert not any(t.is_alive() for t in workers._threads)
