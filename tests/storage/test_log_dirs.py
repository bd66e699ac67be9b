"""LogManager over several log dirs: placement, loading, duplicates, offline dirs, moving a replica."""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from exactly.clock import ManualClock
from exactly.errors import ErrorCode, KafkaError
from exactly.storage import files
from exactly.storage.checkpoint import read_checkpoint
from exactly.storage.config import LogConfig
from exactly.storage.log_manager import LogDirError, LogManager

from .helpers import T0, data_batch, leader_append, read_all

CONFIG = LogConfig(segment_bytes=600)


def _dirs(root: Path, n: int) -> list[Path]:
    return [root / f"d{i}" for i in range(n)]


def _manager(dirs: list[Path], broker_id: int | None = 1) -> LogManager:
    mgr = LogManager(dirs, CONFIG, ManualClock(T0), broker_id=broker_id)
    mgr.startup()
    return mgr


def _values(mgr: LogManager, topic: str, partition: int) -> list[bytes]:
    plog = mgr.get_log(topic, partition)
    assert plog is not None
    return [r.value or b"" for batch in read_all(plog) for r in batch.records()]


def _append(mgr: LogManager, topic: str, partition: int, values: list[bytes]) -> None:
    plog = mgr.get_log(topic, partition)
    assert plog is not None
    for value in values:
        leader_append(plog, data_batch(1, value=value))


# -- placement and loading ------------------------------------------------------------------------------


def test_new_partitions_go_to_the_dir_with_the_fewest(tmp_path: Path) -> None:
    dirs = _dirs(tmp_path, 3)
    dirs[1].mkdir(parents=True)
    shutil.copytree(_seed(tmp_path / "seed"), dirs[1] / "old-0")  # d1 already holds one partition
    mgr = _manager(dirs)
    placed = [mgr.get_or_create_log("t", p).directory.parent for p in range(5)]
    # d0 and d2 are empty, d1 has one: d0, d2 (first on a tie), then every dir has 1 -> d0, d1, d2
    assert placed == [dirs[0], dirs[2], dirs[0], dirs[1], dirs[2]]
    assert mgr.dir_of("t", 3) == dirs[1]
    counts = {d: sum(1 for name in os.listdir(d) if name.startswith(("t-", "old-"))) for d in dirs}
    assert counts == {dirs[0]: 2, dirs[1]: 2, dirs[2]: 2}


def _seed(path: Path) -> Path:
    """A partition directory with two records in it."""
    mgr = LogManager(path, CONFIG, ManualClock(T0))
    mgr.startup()
    plog = mgr.get_or_create_log("seed", 0)
    leader_append(plog, data_batch(2))
    mgr.close()
    return path / "seed-0"


def test_every_dir_is_loaded_with_its_own_checkpoints_and_meta_properties(tmp_path: Path) -> None:
    dirs = _dirs(tmp_path, 2)
    mgr = _manager(dirs, broker_id=7)
    for p in range(4):
        mgr.get_or_create_log("orders", p)
        _append(mgr, "orders", p, [f"{p}-{i}".encode() for i in range(p + 1)])
    mgr.close()
    for i, d in enumerate(dirs):
        assert (d / files.META_PROPERTIES).read_text() == "version=0\nbroker.id=7\n"
        assert (d / files.CLEAN_SHUTDOWN_FILE).exists()
        # d0 has partitions 0 and 2, d1 has 1 and 3: each checkpoint names its own
        mine = {("orders", p): p + 1 for p in range(i, 4, 2)}
        assert read_checkpoint(d / files.RECOVERY_POINT_CHECKPOINT) == mine
    again = _manager(dirs, broker_id=7)
    assert sorted(again.partitions()) == [("orders", p) for p in range(4)]
    for p in range(4):
        assert again.dir_of("orders", p) == dirs[p % 2]
        assert _values(again, "orders", p) == [f"{p}-{i}".encode() for i in range(p + 1)]
    again.close()


def test_a_partition_in_two_dirs_is_a_startup_error(tmp_path: Path) -> None:
    dirs = _dirs(tmp_path, 2)
    mgr = _manager(dirs)
    plog = mgr.get_or_create_log("dup", 0)
    leader_append(plog, data_batch(1))
    mgr.close()
    shutil.copytree(dirs[0] / "dup-0", dirs[1] / "dup-0")
    with pytest.raises(LogDirError, match=r"dup-0 is in two log directories"):
        _manager(dirs)


def test_another_brokers_dir_is_refused(tmp_path: Path) -> None:
    dirs = _dirs(tmp_path, 2)
    _manager(dirs, broker_id=1).close()
    (dirs[1] / files.META_PROPERTIES).write_text("version=0\nbroker.id=2\n")
    with pytest.raises(LogDirError, match="belongs to broker 2"):
        _manager(dirs, broker_id=1)


def test_a_dir_listed_twice_is_refused(tmp_path: Path) -> None:
    with pytest.raises(LogDirError, match="listed twice"):
        LogManager([tmp_path / "a", tmp_path / "b" / ".." / "a"], CONFIG, ManualClock(T0))


# -- a failed dir -----------------------------------------------------------------------------------------


def test_a_failed_dir_takes_only_its_partitions_offline(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    dirs = _dirs(tmp_path, 2)
    mgr = _manager(dirs)
    for p in range(2):
        mgr.get_or_create_log("t", p)
        _append(mgr, "t", p, [b"a"])
    mgr.close()
    shutil.rmtree(dirs[1])
    dirs[1].write_bytes(b"")  # a file where the dir was: every use of it is an I/O error
    with caplog.at_level("ERROR", logger="exactly.storage.log_manager"):
        again = _manager(dirs)
    assert [r.getMessage() for r in caplog.records if "offline" in r.getMessage()] == [
        f"log directory {dirs[1]} is offline (FileExistsError: File exists): its partitions answer "
        "KAFKA_STORAGE_ERROR, the broker serves the others"
    ]
    assert list(again.offline_dirs) == [dirs[1]]
    assert _values(again, "t", 0) == [b"a"]  # partition 0 is in d0: served
    with pytest.raises(KafkaError) as failed:
        again.get_log("t", 1)  # partition 1 was in d1
    assert failed.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    assert again.get_or_create_log("t", 2).directory.parent == dirs[0]  # new ones go to online dirs
    described = again.describe()
    assert [(info.path, info.error is not None) for info in described] == [
        (os.path.abspath(dirs[0]), False),
        (os.path.abspath(dirs[1]), True),
    ]
    assert described[1].replicas == ()
    again.close()


def test_every_dir_failed_is_a_startup_error(tmp_path: Path) -> None:
    dirs = _dirs(tmp_path, 2)
    for d in dirs:
        d.write_bytes(b"")
    with pytest.raises(LogDirError, match="no log directory is usable"):
        _manager(dirs)


# -- moving a replica ---------------------------------------------------------------------------------------


def test_move_copies_while_appending_then_swaps(tmp_path: Path) -> None:
    dirs = _dirs(tmp_path, 2)
    mgr = _manager(dirs)
    mgr.get_or_create_log("m", 0)
    written = [f"v{i}".encode() * 20 for i in range(30)]
    _append(mgr, "m", 0, written[:20])
    assert mgr.dir_of("m", 0) == dirs[0]
    assert mgr.moves.alter_log_dir("m", 0, str(dirs[1].resolve())) is True
    future_dirs = [n for n in os.listdir(dirs[1]) if n.endswith(files.FUTURE_DIR_SUFFIX)]
    assert len(future_dirs) == 1
    assert future_dirs[0].startswith("m-0.")
    described = {info.path: info.replicas for info in mgr.describe()}
    (future,) = described[os.path.abspath(dirs[1])]
    assert (future.is_future, future.offset_lag) == (True, 20)
    steps = 0
    i = 20
    while not mgr.moves.copy_to_future("m", 0, max_bytes=200):  # a few batches a step, appends in between
        steps += 1
        if i < len(written):
            _append(mgr, "m", 0, [written[i]])
            i += 1
    assert steps > 5
    _append(mgr, "m", 0, written[i:])  # more before the swap: the next step catches up again
    while not mgr.moves.copy_to_future("m", 0, max_bytes=200):
        pass
    new = mgr.moves.replace_current_with_future("m", 0)
    assert new.directory == dirs[1] / "m-0"
    assert mgr.dir_of("m", 0) == dirs[1]
    assert _values(mgr, "m", 0) == written
    assert new.high_watermark == len(written)
    assert not [n for n in os.listdir(dirs[0]) if n.startswith("m-0")]
    assert not [n for n in os.listdir(dirs[1]) if n != "m-0" and n.startswith("m-0")]
    assert mgr.moves.future_logs() == []
    assert read_checkpoint(dirs[1] / files.RECOVERY_POINT_CHECKPOINT) == {("m", 0): len(written)}
    assert ("m", 0) not in read_checkpoint(dirs[0] / files.RECOVERY_POINT_CHECKPOINT)
    _append(mgr, "m", 0, [b"after"])
    mgr.close()
    again = _manager(dirs)
    assert again.dir_of("m", 0) == dirs[1]
    assert _values(again, "m", 0) == [*written, b"after"]
    again.close()


def test_move_keeps_the_log_start_and_follows_truncation(tmp_path: Path) -> None:
    dirs = _dirs(tmp_path, 2)
    mgr = _manager(dirs)
    plog = mgr.get_or_create_log("s", 0)
    _append(mgr, "s", 0, [f"{i}".encode() for i in range(10)])
    plog.delete_records_before(4)
    mgr.moves.alter_log_dir("s", 0, dirs[1])
    future = mgr.moves.future_log("s", 0)
    assert future is not None
    assert future.log_start_offset == 4
    while not mgr.moves.copy_to_future("s", 0):  # a step reads from one segment
        pass
    plog.truncate_to(7)  # a follower's truncation under the move
    assert mgr.moves.copy_to_future("s", 0)
    assert future.log_end_offset == 7
    new = mgr.moves.replace_current_with_future("s", 0)
    assert (new.log_start_offset, new.log_end_offset) == (4, 7)
    assert _values(mgr, "s", 0) == [b"4", b"5", b"6"]
    mgr.close()


def test_move_errors_and_no_op(tmp_path: Path) -> None:
    dirs = _dirs(tmp_path, 2)
    mgr = _manager(dirs)
    mgr.get_or_create_log("e", 0)
    with pytest.raises(KafkaError) as unknown_dir:
        mgr.moves.alter_log_dir("e", 0, str(tmp_path / "elsewhere"))
    assert unknown_dir.value.code == ErrorCode.LOG_DIR_NOT_FOUND
    with pytest.raises(KafkaError) as no_replica:
        mgr.moves.alter_log_dir("nope", 0, str(dirs[1]))
    assert no_replica.value.code == ErrorCode.REPLICA_NOT_AVAILABLE
    assert mgr.moves.alter_log_dir("e", 0, str(dirs[0])) is False  # already there
    assert mgr.moves.future_logs() == []
    assert mgr.moves.alter_log_dir("e", 0, str(dirs[1])) is True
    assert mgr.moves.alter_log_dir("e", 0, str(dirs[0])) is False  # back home: the move is abandoned
    assert mgr.moves.future_logs() == []
    assert not [n for n in os.listdir(dirs[1]) if n.startswith("e-0")]
    mgr.close()


def test_a_restart_resumes_an_unfinished_move(tmp_path: Path) -> None:
    dirs = _dirs(tmp_path, 2)
    mgr = _manager(dirs)
    mgr.get_or_create_log("r", 0)
    _append(mgr, "r", 0, [b"a", b"b", b"c"])
    mgr.moves.alter_log_dir("r", 0, dirs[1])
    mgr.moves.copy_to_future("r", 0, max_bytes=80)  # part of it
    mgr.close()
    again = _manager(dirs)
    assert again.dir_of("r", 0) == dirs[0]
    ((tp, _future),) = again.moves.future_logs()
    assert tp == ("r", 0)
    while not again.moves.copy_to_future("r", 0):
        pass
    again.moves.replace_current_with_future("r", 0)
    assert _values(again, "r", 0) == [b"a", b"b", b"c"]
    assert again.dir_of("r", 0) == dirs[1]
    again.close()


def test_a_restart_after_the_old_copy_went_completes_the_move(tmp_path: Path) -> None:
    """A crash between renaming the current dir away and renaming the future into place."""
    dirs = _dirs(tmp_path, 2)
    mgr = _manager(dirs)
    mgr.get_or_create_log("c", 0)
    _append(mgr, "c", 0, [b"x", b"y"])
    mgr.moves.alter_log_dir("c", 0, dirs[1])
    while not mgr.moves.copy_to_future("c", 0):
        pass
    future = mgr.moves.future_log("c", 0)
    assert future is not None
    future_dir = future.directory
    mgr.close()
    os.replace(dirs[0] / "c-0", dirs[0] / files.moved_dir_name("c", 0, "0" * 32, files.DELETE_DIR_SUFFIX))
    again = _manager(dirs)
    assert not future_dir.exists()
    assert again.moves.future_logs() == []
    assert again.dir_of("c", 0) == dirs[1]
    assert _values(again, "c", 0) == [b"x", b"y"]
    assert os.listdir(dirs[0]).count(files.META_PROPERTIES) == 1
    assert not [n for n in os.listdir(dirs[0]) if n.startswith("c-0")]  # the -delete dir is gone
    again.close()


@given(
    topic=st.text(alphabet="abcXYZ._-09", min_size=1, max_size=40).filter(lambda t: t not in (".", "..")),
    partition=st.integers(0, 2**31 - 1),
    unique=st.uuids(),
    suffix=st.sampled_from([files.FUTURE_DIR_SUFFIX, files.DELETE_DIR_SUFFIX]),
)
def test_moved_dir_names_round_trip(topic: str, partition: int, unique: uuid.UUID, suffix: str) -> None:
    name = files.moved_dir_name(topic, partition, unique.hex, suffix)
    assert files.parse_moved_dir_name(name, suffix) == (topic, partition)
    assert files.parse_partition_dir_name(name) is None  # never taken for a current log
    other = files.DELETE_DIR_SUFFIX if suffix == files.FUTURE_DIR_SUFFIX else files.FUTURE_DIR_SUFFIX
    assert files.parse_moved_dir_name(name, other) is None
