"""The open-file budget (storage/file_handles.py): segment files beyond it are closed least recently used
first and reopened on use; reads, appends and flushes see the same bytes either way."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from exactly.clock import ManualClock
from exactly.storage.config import LogConfig
from exactly.storage.file_handles import HANDLES, UNLIMITED
from exactly.storage.log import PartitionLog
from exactly.storage.log_manager import LogManager
from tests.storage.helpers import leader_append

from .helpers import T0, data_batch, read_all

BUDGET = 4


def values(plog: PartitionLog) -> list[bytes | None]:
    return [r.value for batch in read_all(plog) for r in batch.records()]


def expected(p: int) -> list[bytes | None]:
    return [f"{p}-{r}".encode() * 20 for r in range(3) for _ in range(2)]


@pytest.fixture
def small_budget() -> Iterator[None]:
    HANDLES.set_budget(BUDGET)  # files other tests left open are closed first
    try:
        yield
    finally:
        HANDLES.budget = UNLIMITED


def test_thirty_partitions_through_a_budget_of_four_files(tmp_path: Path, small_budget: None) -> None:
    clock = ManualClock(T0)
    mgr = LogManager(tmp_path, LogConfig(segment_bytes=400), clock)
    mgr.startup()
    logs = [mgr.get_or_create_log("t", p) for p in range(30)]
    assert HANDLES.open_count <= BUDGET
    evictions = HANDLES.evictions
    for round_ in range(3):
        for p, plog in enumerate(logs):
            leader_append(plog, data_batch(2, value=f"{p}-{round_}".encode() * 20))
            assert HANDLES.open_count <= BUDGET
    assert HANDLES.evictions > evictions
    assert len(logs[0].segments) > 1  # several segments each: all of them within the budget
    for plog in logs:
        plog.flush()
    for p, plog in enumerate(logs):
        assert values(plog) == expected(p)
        assert HANDLES.open_count <= BUDGET
    mgr.close()
    assert HANDLES.open_count == 0
    again = LogManager(tmp_path, LogConfig(segment_bytes=400), clock)
    again.startup()
    for p in range(30):
        plog = again.get_log("t", p)
        assert plog is not None
        assert values(plog) == expected(p)
    assert HANDLES.open_count <= BUDGET
    again.close()


def test_a_flush_thread_reopens_an_evicted_segment_without_evicting(
    tmp_path: Path, small_budget: None
) -> None:
    mgr = LogManager(tmp_path, LogConfig(), ManualClock(T0))
    mgr.startup()
    logs = [mgr.get_or_create_log("f", p) for p in range(10)]
    for plog in logs:
        leader_append(plog, data_batch(1))
    evicted = logs[0].segments[-1]
    assert evicted._fd < 0
    errors: list[BaseException] = []

    def flush_all() -> None:
        try:
            for plog in logs:
                plog.flush()
        except BaseException as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    worker = threading.Thread(target=flush_all)
    worker.start()
    worker.join(30)
    assert not errors
    assert evicted._fd >= 0  # reopened by the flush thread, counted, not evicting in that thread
    assert all(plog.recovery_point == 1 for plog in logs)
    mgr.close()
