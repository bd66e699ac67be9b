"""The acks=all group commit (exactly.broker.flusher): one log at a time, and many logs with one syncfs."""

from __future__ import annotations

import asyncio
import errno
import threading
import time
from pathlib import Path

import pytest

from exactly.broker.flusher import GROUP_SYNC_MIN_LOGS, Flusher
from exactly.errors import ErrorCode, KafkaError
from exactly.storage import files
from exactly.storage.drop_behind import ALIGN, DROP_BEHIND
from exactly.storage.log import PartitionLog
from exactly.verify.disk import read_ledger
from tests.storage.helpers import data_batch, leader_append, open_log, resident


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


def _fsync_threads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the threads that call `files.fsync` from now on, in order."""
    names: list[str] = []
    real = files.fsync

    def recording(fd: int, path: Path | str) -> None:
        names.append(threading.current_thread().name)
        real(fd, path)

    monkeypatch.setattr(files, "fsync", recording)
    return names


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


def test_a_group_sync_drops_behind_as_a_flush_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With drop-behind on (window 0 here), the logs of one syncfs leave the page cache up to their last
    2 MiB boundary after it, as a one-log fsync would (storage/drop_behind.py)."""
    monkeypatch.setattr(DROP_BEHIND, "window", 0)
    data = tmp_path / "data"
    value = b"v" * (64 << 10)
    logs = []
    for i in range(GROUP_SYNC_MIN_LOGS):
        log = open_log(data / f"t-{i}")
        for _ in range(ALIGN // len(value) + 1):  # just past one 2 MiB step
            leader_append(log, data_batch(1, value=value))
        logs.append(log)
    flusher = Flusher(data)
    try:
        assert _wait(flusher, logs) == [None] * len(logs)
        assert flusher.group_syncs == 1
    finally:
        flusher.close()
    for log in logs:
        segment = log.active_segment
        assert segment.dropped_size == ALIGN
        assert resident(segment.log_path, 0, ALIGN) == 0.0
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


def _count_fsyncs(monkeypatch: pytest.MonkeyPatch, gate: threading.Event | None = None) -> list[str]:
    """Record every data-file fsync (each held until `gate` is set: a slow disk, so that the waiters
    that come meanwhile must share the next flush)."""
    calls: list[str] = []
    real = files.fsync

    def counting(fd: int, path: Path | str) -> None:
        calls.append(str(path))
        if gate is not None:
            assert gate.wait(30), "the test never opened the gate"
        real(fd, path)

    monkeypatch.setattr(files, "fsync", counting)
    return calls


def test_concurrent_waiters_on_one_log_share_its_flushes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (log,) = _logs(tmp_path / "data", 1)
    gate = threading.Event()  # holds the first fsync until the five waiters have come
    calls = _count_fsyncs(monkeypatch, gate=gate)
    flusher = Flusher(tmp_path / "data")

    async def run() -> list[list[KafkaError | None]]:
        first = asyncio.ensure_future(flusher.wait_durable_each([(log, log.log_end_offset)]))
        deadline = time.monotonic() + 30
        while not calls:  # the first flush is running: the next appends wait for one more
            assert time.monotonic() < deadline, "the first flush never started"
            await asyncio.sleep(0.001)
        later = []
        for _ in range(5):
            leader_append(log, data_batch(2))
            later.append(asyncio.ensure_future(flusher.wait_durable_each([(log, log.log_end_offset)])))
        await asyncio.sleep(0)  # let the five register before the running flush ends
        gate.set()
        return list(await asyncio.gather(first, *later))

    try:
        assert asyncio.run(run()) == [[None]] * 6
    finally:
        flusher.close()
    assert log.recovery_point == log.log_end_offset == 13
    assert len([c for c in calls if c.endswith(".log")]) == 2  # the running flush, then one for the five
    log.close()


def test_a_cancelled_waiter_does_not_cancel_the_flush_others_wait_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (log,) = _logs(tmp_path / "data", 1)
    gate = threading.Event()  # the flush runs until the impatient waiter has been cancelled
    calls = _count_fsyncs(monkeypatch, gate=gate)
    flusher = Flusher(tmp_path / "data")

    async def run() -> list[KafkaError | None]:
        target = [(log, log.log_end_offset)]
        impatient = asyncio.ensure_future(flusher.wait_durable_each(target))
        patient = asyncio.ensure_future(flusher.wait_durable_each(target))
        deadline = time.monotonic() + 30
        while not calls:
            assert time.monotonic() < deadline, "the flush never started"
            await asyncio.sleep(0.001)
        impatient.cancel()
        await asyncio.sleep(0)
        gate.set()
        result = await patient
        assert impatient.cancelled()
        return result

    try:
        assert asyncio.run(run()) == [None]
    finally:
        flusher.close()
    assert log.recovery_point == 3
    log.close()


def test_a_failed_flush_is_its_targets_storage_error_and_the_others_are_durable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    logs = _logs(tmp_path / "data", 3)
    real = files.fsync

    def failing(fd: int, path: Path | str) -> None:
        if Path(path).parent.name == "t-1":
            raise OSError(errno.EIO, "I/O error")
        real(fd, path)

    monkeypatch.setattr(files, "fsync", failing)
    flusher = Flusher(tmp_path / "data")
    try:
        outcome = _wait(flusher, logs)
        single = _wait(flusher, [logs[1]])
    finally:
        flusher.close()
    assert outcome[0] is None
    assert outcome[2] is None
    for failed in (outcome[1], single[0]):
        assert isinstance(failed, KafkaError)
        assert failed.code == ErrorCode.KAFKA_STORAGE_ERROR
    assert [log.recovery_point for log in logs] == [3, 0, 3]
    monkeypatch.undo()
    for log in logs:
        log.close()


def test_close_finishes_the_flushes_queued_and_stops_its_threads(tmp_path: Path) -> None:
    logs = _logs(tmp_path / "data", 2)
    flusher = Flusher(tmp_path / "data", threads=2)
    assert _wait(flusher, logs) == [None, None]
    workers = [t for t in threading.enumerate() if t.name.startswith("exactly-flush_")]
    assert len(workers) >= 2
    flusher.close()
    assert not any(t.is_alive() for t in workers)
    leader_append(logs[0], data_batch(1))
    with pytest.raises(RuntimeError, match="closed"):
        _wait(flusher, logs[:1])
    for log in logs:
        log.close()


def test_a_lone_flush_runs_inline_and_fails_as_a_threaded_one_would(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`inline_when` true: a one-log flush runs on the event loop's own thread (no flush thread starts);
    false, or with a flush already running, it goes to the threads as before. A failing inline fsync is
    the same KAFKA_STORAGE_ERROR."""
    logs = _logs(tmp_path / "data", 4)
    flusher = Flusher(tmp_path / "data")
    alone = True
    flusher.inline_when = lambda: alone
    flushed_on = _fsync_threads(monkeypatch)
    try:
        assert _wait(flusher, [logs[0]]) == [None]
        assert logs[0].recovery_point == 3
        assert flusher.inline_flushes == 1
        assert flushed_on
        assert set(flushed_on) == {"MainThread"}
        assert not flusher._workers  # no flush thread was needed

        alone = False
        flushed_on.clear()
        assert _wait(flusher, [logs[1]]) == [None]
        assert logs[1].recovery_point == 3
        assert flusher.inline_flushes == 1
        assert flushed_on
        assert all(name.startswith("exactly-flush_") for name in flushed_on)

        alone = True  # two logs of one request: nothing runs in a thread, so each is flushed inline in turn
        flushed_on.clear()
        assert _wait(flusher, logs[2:]) == [None, None]
        assert [log.recovery_point for log in logs[2:]] == [3, 3]
        assert flusher.inline_flushes == 3
        assert set(flushed_on) == {"MainThread"}

        def failing(fd: int, path: Path | str) -> None:
            raise OSError(errno.EIO, "I/O error")

        monkeypatch.setattr(files, "fsync", failing)
        leader_append(logs[0], data_batch(1))
        failed = _wait(flusher, [logs[0]])[0]
        assert isinstance(failed, KafkaError)
        assert failed.code == ErrorCode.KAFKA_STORAGE_ERROR
        assert logs[0].recovery_point == 3
    finally:
        flusher.close()
        monkeypatch.undo()
    for log in logs:
        log.close()


def test_a_flush_behind_an_answer_waits_for_it_then_runs_inline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The coordinator's markers, started while EndTxn is answered, await `answer_written()` first: with
    that request all the loop has, no fsync until `answered()`'s future is resolved, then the flush runs
    on the event loop's thread. With other requests being handled (`inline_when` false) it goes to a
    thread at once, without waiting; with no request being handled (`answered()` is None) it runs inline
    at once."""
    logs = _logs(tmp_path / "data", 3)
    flusher = Flusher(tmp_path / "data")
    alone = True
    flusher.inline_when = lambda: alone
    waiters: list[asyncio.Future[None] | None] = []
    handled = True

    def answered() -> asyncio.Future[None] | None:
        waiter = asyncio.get_running_loop().create_future() if handled else None
        waiters.append(waiter)
        return waiter

    flusher.answered = answered
    flushed_on = _fsync_threads(monkeypatch)

    async def behind(log: PartitionLog) -> list[KafkaError | None]:
        await flusher.answer_written()
        return await flusher.wait_durable_each([(log, log.log_end_offset)])

    async def run() -> None:
        nonlocal alone, handled
        waiting = asyncio.create_task(behind(logs[0]))
        for _ in range(5):
            await asyncio.sleep(0)
        assert len(waiters) == 1
        assert not waiting.done()
        assert flushed_on == []
        assert logs[0].recovery_point == 0
        waiter = waiters[0]
        assert waiter is not None
        waiter.set_result(None)
        assert await waiting == [None]
        assert logs[0].recovery_point == 3
        assert set(flushed_on) == {"MainThread"}
        assert flusher.inline_flushes == 1

        alone = False  # other requests: the threads take it, the loop writes the answer meanwhile
        flushed_on.clear()
        assert await behind(logs[1]) == [None]
        assert len(waiters) == 1  # not asked
        assert flushed_on
        assert all(name.startswith("exactly-flush_") for name in flushed_on)
        assert flusher.inline_flushes == 1
        assert flusher.thread_flushes == 1

        alone, handled = True, False  # nothing being handled: nothing to wait for
        flushed_on.clear()
        assert await behind(logs[2]) == [None]
        assert waiters[-1] is None
        assert set(flushed_on) == {"MainThread"}
        assert flusher.inline_flushes == 2

    try:
        asyncio.run(run())
        assert [log.recovery_point for log in logs] == [3, 3, 3]
    finally:
        flusher.close()
        monkeypatch.undo()
    for log in logs:
        log.close()
