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
from tests.storage.helpers import leader_append

from .helpers import T0, data_batch, read_all


def test_create_load_and_clean_shutdown(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    mgr = LogManager(tmp_path, LogConfig(segment_bytes=500), clock)
    mgr.startup()
    a = mgr.get_or_create_log("orders", 0)
    b = mgr.get_or_create_log("orders", 1)
    for _ in range(5):
        leader_append(a, data_batch(1, value=b"x" * 100))
    leader_append(b, data_batch(3))
    assert {"orders-0", "orders-1"} <= set(os.listdir(tmp_path))
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
    leader_append(plog, data_batch(2))
    plog.flush()
    mgr.checkpoint()
    leader_append(plog, data_batch(2))
    plog.close_without_flush()  # crash: no marker
    again = LogManager(tmp_path, LogConfig(), clock)
    again.startup()
    log2 = again.get_log("t", 0)
    assert log2 is not None
    assert log2.log_end_offset >= 2


def _three_partitions(tmp_path: Path, clock: ManualClock) -> None:
    mgr = LogManager(tmp_path, LogConfig(), clock)
    mgr.startup()
    for p in range(3):
        mgr.get_or_create_log("t", p).append_as_leader(data_batch(p + 1))
    mgr.close()


def test_start_up_loads_no_log_until_asked_or_in_slices(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    _three_partitions(tmp_path, clock)
    mgr = LogManager(tmp_path, LogConfig(), clock)
    mgr.startup()
    assert mgr.pending == 3
    assert list(mgr.logs()) == []
    assert sorted(mgr.partitions()) == [("t", 0), ("t", 1), ("t", 2)]
    log1 = mgr.get_log("t", 1)  # asked for: loaded at once
    assert log1 is not None
    assert log1.log_end_offset == 2
    assert mgr.pending == 2
    mgr.checkpoint()  # an unloaded partition keeps its checkpointed recovery point
    assert read_checkpoint(tmp_path / files.RECOVERY_POINT_CHECKPOINT) == {
        ("t", 0): 1,
        ("t", 1): 2,
        ("t", 2): 3,
    }
    assert mgr.load_pending(1) == 1
    assert mgr.load_pending(10) == 0
    assert [(tp, plog.log_end_offset) for tp, plog in sorted(mgr.logs())] == [
        (("t", 0), 1),
        (("t", 1), 2),
        (("t", 2), 3),
    ]
    mgr.delete_log("t", 2)
    assert not (tmp_path / "t-2").exists()
    mgr.close()
    assert (tmp_path / files.CLEAN_SHUTDOWN_FILE).exists()


def test_unloaded_partitions_that_need_recovery_keep_the_next_start_unclean(tmp_path: Path) -> None:
    """After a crash, a stop before every partition was loaded (recovered) writes no clean-shutdown marker:
    the next start still recovers those partitions."""
    clock = ManualClock(T0)
    _three_partitions(tmp_path, clock)
    (tmp_path / files.CLEAN_SHUTDOWN_FILE).unlink()  # as after kill -9
    mgr = LogManager(tmp_path, LogConfig(), clock)
    mgr.startup()
    assert mgr.get_log("t", 0) is not None
    mgr.close()
    assert not (tmp_path / files.CLEAN_SHUTDOWN_FILE).exists()
    mgr = LogManager(tmp_path, LogConfig(), clock)
    mgr.startup()
    mgr.load_all()
    assert mgr.pending == 0
    mgr.close()
    assert (tmp_path / files.CLEAN_SHUTDOWN_FILE).exists()  # every partition recovered: clean again
    deleted_unloaded = LogManager(tmp_path, LogConfig(), clock)
    deleted_unloaded.startup()
    deleted_unloaded.delete_log("t", 1)  # never loaded: its directory goes all the same
    assert not (tmp_path / "t-1").exists()
    assert deleted_unloaded.get_log("t", 1) is None
    deleted_unloaded.close()


def test_periodic_work(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    mgr = LogManager(tmp_path, LogConfig(segment_bytes=300, retention_ms=1000, flush_ms=10), clock)
    mgr.startup()
    plog = mgr.get_or_create_log("t", 0)
    for _ in range(4):
        leader_append(plog, data_batch(1, value=b"x" * 100, pid=1, epoch=0, seq=plog.log_end_offset))
    clock.advance(5000)
    assert mgr.flush_dirty_logs() == 1
    assert mgr.delete_old_segments() >= 1
    assert mgr.remove_expired_producers(T0 + 10**9) == 1
    mgr.set_topic_config("c", LogConfig(cleanup_policy=CleanupPolicy.COMPACT))
    c = mgr.get_or_create_log("c", 0)
    leader_append(c, data_batch(1))
    assert mgr.clean_logs() == 0
    mgr.take_snapshots()
    mgr.close()


def test_topic_configs_reach_the_named_topics_logs_only(tmp_path: Path) -> None:
    mgr = LogManager(tmp_path, LogConfig(), ManualClock(T0))
    mgr.startup()
    logs = {(t, p): mgr.get_or_create_log(t, p) for t in ("a", "b", "c") for p in (0, 1)}
    compact, short = LogConfig(cleanup_policy=CleanupPolicy.COMPACT), LogConfig(retention_ms=1000)
    mgr.set_topic_configs({"a": compact, "c": short, "new": short})
    assert {tp: plog.config for tp, plog in logs.items()} == {
        ("a", 0): compact,
        ("a", 1): compact,
        ("b", 0): LogConfig(),
        ("b", 1): LogConfig(),
        ("c", 0): short,
        ("c", 1): short,
    }
    assert mgr.get_or_create_log("new", 0).config == short  # a topic's later logs take it too
    assert mgr.config_for("b") == LogConfig()
    mgr.close()


def test_a_cluster_replica_restarts_with_its_checkpointed_high_watermark(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    mgr = LogManager(tmp_path, LogConfig(), clock, keep_high_watermarks=True)
    mgr.startup()
    follower = mgr.get_or_create_log("orders", 0)
    follower.append_as_follower(_leader_batches(tmp_path / "leader", 4))
    follower.update_follower_high_watermark(2)  # the leader had committed two records
    mgr.close()
    assert read_checkpoint(tmp_path / files.HIGH_WATERMARK_CHECKPOINT) == {("orders", 0): 2}
    again = LogManager(tmp_path, LogConfig(), clock, keep_high_watermarks=True)
    again.startup()
    restored = again.get_log("orders", 0)
    assert restored is not None
    assert (restored.log_end_offset, restored.high_watermark) == (4, 2)  # not its log end
    again.close()
    alone = LogManager(tmp_path, LogConfig(), clock)  # one broker alone: everything it has is committed
    alone.startup()
    single = alone.get_log("orders", 0)
    assert single is not None
    assert single.high_watermark == 4
    alone.close()


def _leader_batches(directory: Path, count: int) -> bytes:
    from exactly.storage.log import Isolation

    mgr = LogManager(directory, LogConfig(), ManualClock(T0))
    mgr.startup()
    leader = mgr.get_or_create_log("orders", 0)
    for _ in range(count):
        leader_append(leader, data_batch(1))
    leader.update_high_watermark(leader.log_end_offset)
    records = bytes(leader.read(0, 1 << 20, Isolation.LOG_END).records)
    mgr.close()
    return records
