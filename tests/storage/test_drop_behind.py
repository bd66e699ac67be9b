"""Drop-behind (storage/drop_behind.py): what it asks the kernel to forget, checked with mincore(2) on real
files, and a segment whose dropped bytes still read back."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from exactly.storage.drop_behind import ALIGN, DROP_BEHIND, DropBehind
from tests.storage.helpers import data_batch, open_log, read_all, resident

MIB = 1 << 20


def write_synced(path: Path, size: int) -> int:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, os.urandom(size))
    os.fdatasync(fd)
    return fd


def test_off_by_default_and_at_minus_one(tmp_path: Path) -> None:
    assert DROP_BEHIND.window == -1  # Kafka keeps everything in the page cache
    path = tmp_path / "f"
    fd = write_synced(path, 4 * MIB)
    try:
        assert DropBehind().after_sync(fd, 0, 4 * MIB) == 0
        assert resident(path, 0, 4 * MIB) > 0.9
    finally:
        os.close(fd)


def test_drops_what_lies_more_than_the_window_behind_the_synced_end(tmp_path: Path) -> None:
    path = tmp_path / "f"
    fd = write_synced(path, 8 * MIB)
    try:
        dropper = DropBehind(window=MIB + 100)
        assert dropper.after_sync(fd, 0, 8 * MIB) == 6 * MIB  # 8 MiB - window, down to a 2 MiB boundary
        assert resident(path, 0, 6 * MIB) == 0.0
        assert resident(path, 6 * MIB, 8 * MIB) > 0.9
        # nothing new below the window's next boundary: no call, same mark
        assert dropper.after_sync(fd, 6 * MIB, 8 * MIB) == 6 * MIB
        assert dropper.after_sync(fd, 6 * MIB, 9 * MIB + 99) == 6 * MIB
        assert dropper.after_sync(fd, 6 * MIB, 9 * MIB + 100) == 8 * MIB
        assert resident(path, 0, 8 * MIB) == 0.0
    finally:
        os.close(fd)


def test_advice_that_fails_keeps_the_mark_and_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    dropper = DropBehind(window=0)
    assert dropper.after_sync(987654, 0, 4 * MIB) == 0  # a descriptor that is not open
    assert dropper.after_sync(987654, 0, 4 * MIB) == 0
    assert [r.levelname for r in caplog.records] == ["WARNING"]


@pytest.fixture
def window(monkeypatch: pytest.MonkeyPatch) -> DropBehind:
    monkeypatch.setattr(DROP_BEHIND, "window", MIB)
    return DROP_BEHIND


def test_a_flushed_segment_drops_its_old_bytes_and_still_reads_them_back(
    tmp_path: Path, window: DropBehind
) -> None:
    plog = open_log(tmp_path / "t-0")
    try:
        value = os.urandom(64 * 1024)
        for _ in range(96):  # 6 MiB of batches, synced as they go
            plog.append_as_leader(data_batch(1, value=value), leader_epoch=0)
            plog.flush()
        seg = plog.active_segment
        assert seg.dropped_size > seg.size - window.window - ALIGN
        assert seg.dropped_size >= 4 * MIB
        assert resident(seg.log_path, 0, seg.dropped_size) == 0.0
        assert resident(seg.log_path, seg.size - window.window // 2, seg.size) > 0.9
        plog.update_high_watermark(plog.log_end_offset)  # the partition's job; this log is alone
        values = [r.value for b in read_all(plog) for r in b.records()]
        assert len(values) == 96
        assert all(v == value for v in values)
    finally:
        plog.close()
