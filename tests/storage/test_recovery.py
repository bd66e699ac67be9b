"""Crash recovery: what survives, what is truncated, what is rebuilt (loader.py)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from exactly.clock import ManualClock
from exactly.storage import files
from exactly.storage.config import LogConfig
from exactly.storage.loader import load_log
from exactly.storage.log import Isolation, PartitionLog
from tests.storage.helpers import leader_append, leader_append_marker

from .helpers import T0, abort, batches, commit, data_batch, open_log, read_all, reopen

CFG = LogConfig(segment_bytes=1000, index_interval_bytes=100)


def fill(plog: PartitionLog, n: int, pid: int = 7) -> None:
    for _ in range(n):
        entry = plog.producer_state.last_entry(pid)
        seq = entry.last_seq + 1 if entry is not None else 0
        leader_append(plog, data_batch(2, pid=pid, epoch=0, seq=seq, value=b"x" * 50))


def snapshot_bytes(plog: PartitionLog) -> list[bytes]:
    return [bytes(b.buffer) for b in read_all(plog)]


def test_clean_restart_is_identical(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", CFG)
    fill(plog, 20)
    before = snapshot_bytes(plog)
    again = reopen(plog, clean=True)
    assert snapshot_bytes(again) == before
    assert again.log_end_offset == 40
    assert again.recovery_point == 40
    # Idempotence still works after the restart (all five cached batches were persisted).
    dup = leader_append(again, data_batch(2, pid=7, epoch=0, seq=32, value=b"x" * 50))
    assert dup.duplicate
    assert dup.first_offset == 32


def test_unflushed_torn_tail_is_truncated(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", CFG)
    fill(plog, 10)
    plog.flush()
    flushed = snapshot_bytes(plog)
    fill(plog, 3)
    active = files.log_file(plog.directory, plog.active_segment.base_offset)
    plog.close_without_flush()
    with open(active, "r+b") as f:
        f.truncate(os.path.getsize(active) - 7)
    again = load_log(plog.directory, "t", 0, CFG, ManualClock(T0), recovery_point=20)
    got = snapshot_bytes(again)
    assert got[: len(flushed)] == flushed
    assert again.log_end_offset == 24  # 12 whole batches remain
    assert all(len(b) > 0 for b in got)
    fill(again, 1)  # producer state was rebuilt: sequence continues at 24
    assert again.log_end_offset == 26


def test_flipped_byte_in_unflushed_tail_truncates_there_and_drops_later_segments(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", CFG)
    fill(plog, 5)
    plog.flush()
    rp = plog.recovery_point
    fill(plog, 20)
    assert len(plog.segments) > 3
    victim = plog.segments[1]
    path = files.log_file(plog.directory, victim.base_offset)
    plog.close_without_flush()
    data = bytearray(path.read_bytes())
    data[200] ^= 0xFF
    path.write_bytes(bytes(data))
    again = load_log(plog.directory, "t", 0, CFG, ManualClock(T0), recovery_point=rp)
    assert len(again.segments) == 2
    assert again.log_end_offset >= rp
    for b in read_all(again):
        b.verify_crc()


def test_missing_and_corrupt_indexes_are_rebuilt(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", CFG)
    fill(plog, 30)
    before = snapshot_bytes(plog)
    plog.close()
    d = plog.directory
    bases = sorted(int(n[:20]) for n in os.listdir(d) if n.endswith(".log"))
    files.index_file(d, bases[0]).unlink()
    files.time_index_file(d, bases[1]).write_bytes(b"\x01\x02\x03")
    idx = files.index_file(d, bases[2])
    idx.write_bytes(bytes(8) + idx.read_bytes()[8:])  # goes backwards / wrong
    files.txn_index_file(d, bases[3]).write_bytes(b"\x01" * 7)  # not whole entries: recovered
    assert not files.txn_index_file(d, bases[4]).exists()  # no aborted transaction there: no file
    again = load_log(d, "t", 0, CFG, ManualClock(T0), recovery_point=60, had_clean_shutdown=True)
    assert snapshot_bytes(again) == before
    for off in range(0, 60, 3):
        assert batches(again.read(off, 1).records)[0].last_offset >= off
    assert files.txn_index_file(d, bases[3]).read_bytes() == b""  # rebuilt: no aborted transaction


def test_wrong_index_entry_is_detected_at_read(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", LogConfig(segment_bytes=100_000, index_interval_bytes=100))
    fill(plog, 20)
    plog.close()
    idx = files.index_file(plog.directory, 0)
    raw = bytearray(idx.read_bytes())
    raw[7] ^= 0x01  # a position now points into the middle of a batch (still increasing)
    idx.write_bytes(bytes(raw))
    again = load_log(plog.directory, "t", 0, plog.config, ManualClock(T0), had_clean_shutdown=True)
    for off in range(40):
        got = batches(again.read(off, 1).records)
        assert got[0].base_offset <= off <= got[0].last_offset


def test_corrupt_or_missing_snapshot_falls_back_to_replay(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", CFG)
    fill(plog, 10)
    leader_append(plog, data_batch(1, pid=9, epoch=2, seq=0, txn=True))
    plog.close()
    snaps = sorted(n for n in os.listdir(plog.directory) if n.endswith(".snapshot"))
    for n in snaps:
        (plog.directory / n).write_bytes(b"junk")
    again = load_log(plog.directory, "t", 0, CFG, ManualClock(T0), had_clean_shutdown=True)
    assert again.last_stable_offset == 20  # the open transaction was found by replay
    entry = again.producer_state.last_entry(7)
    assert entry is not None
    assert entry.last_seq == 19
    again.close()
    for n in os.listdir(again.directory):
        if n.endswith(".snapshot"):
            (again.directory / n).unlink()
    third = load_log(again.directory, "t", 0, CFG, ManualClock(T0), had_clean_shutdown=True)
    assert third.last_stable_offset == 20


def test_transaction_state_survives_unclean_restart(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", CFG)
    leader_append(plog, data_batch(1, pid=1, epoch=0, seq=0, txn=True))  # 0
    fill(plog, 8, pid=2)  # rolls segments, takes snapshots with the open txn
    leader_append(plog, data_batch(1, pid=3, epoch=0, seq=0, txn=True))  # 17
    leader_append_marker(plog, 3, 0, abort())  # 18
    plog.flush()
    again = reopen(plog, clean=False)
    assert again.last_stable_offset == 0
    assert [t.first_offset for t in again.ongoing_transactions()] == [0]
    leader_append_marker(again, 1, 0, commit())
    info = again.read(17, 1 << 20, Isolation.READ_COMMITTED)
    assert info.aborted_transactions is not None
    assert [(t.producer_id, t.first_offset) for t in info.aborted_transactions] == [(3, 17)]


def test_recovery_rebuilds_txn_index(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", CFG)
    leader_append(plog, data_batch(1, pid=1, epoch=0, seq=0, txn=True))
    fill(plog, 6, pid=2)
    leader_append_marker(plog, 1, 0, abort())
    expected = plog.collect_aborted_transactions(0, 100)
    assert len(expected) == 1
    plog.close_without_flush()
    again = load_log(plog.directory, "t", 0, CFG, ManualClock(T0), recovery_point=0)
    assert again.collect_aborted_transactions(0, 100) == expected


def test_clean_shutdown_needs_no_replay(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", CFG)
    fill(plog, 10)
    plog.close()
    snaps = [n for n in os.listdir(plog.directory) if n.endswith(".snapshot")]
    assert files.snapshot_file(plog.directory, 20).name in snaps


# -- leader epochs -------------------------------------------------------------------------------------------


def fill_epochs(plog: PartitionLog, epochs: list[int]) -> None:
    for epoch in epochs:
        leader_append(plog, data_batch(2, value=b"x" * 50), leader_epoch=epoch)


def epoch_pairs(plog: PartitionLog) -> list[tuple[int, int]]:
    return [(e.epoch, e.start_offset) for e in plog.leader_epochs.entries]


def epoch_path(plog: PartitionLog) -> Path:
    return plog.directory / files.LEADER_EPOCH_CHECKPOINT


def test_clean_restart_reads_the_leader_epoch_checkpoint(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", CFG)
    fill_epochs(plog, [0] * 5 + [3] * 5 + [4] * 5)
    plog.close()
    assert epoch_path(plog).read_bytes() == b"0\n3\n0 0\n3 10\n4 20\n"
    again = load_log(plog.directory, "t", 0, CFG, ManualClock(T0), had_clean_shutdown=True)
    assert epoch_pairs(again) == [(0, 0), (3, 10), (4, 20)]
    assert again.leader_epoch == 4
    assert again.end_offset_for_epoch(3) == (3, 20)
    # The file is what the cache comes from (not a scan): one that differs from the batches is believed.
    again.close()
    epoch_path(plog).write_bytes(b"0\n2\n0 0\n1 2\n")
    third = load_log(plog.directory, "t", 0, CFG, ManualClock(T0), had_clean_shutdown=True)
    assert epoch_pairs(third) == [(0, 0), (1, 2)]


def test_a_missing_leader_epoch_checkpoint_is_rebuilt_from_the_batches(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", CFG)
    fill_epochs(plog, [0] * 5 + [3] * 5 + [4] * 5)
    assert len(plog.segments) > 2
    plog.close()
    epoch_path(plog).unlink()
    again = load_log(plog.directory, "t", 0, CFG, ManualClock(T0), had_clean_shutdown=True)
    assert epoch_pairs(again) == [(0, 0), (3, 10), (4, 20)]
    again.close()
    assert epoch_path(plog).read_bytes() == b"0\n3\n0 0\n3 10\n4 20\n"  # written back at close


def test_a_corrupt_leader_epoch_checkpoint_is_one_warning_and_rebuilt(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    plog = open_log(tmp_path / "t-0", CFG)
    fill_epochs(plog, [0] * 5 + [3] * 5 + [4] * 5)
    plog.close()
    for garbage in (b"0\n3\n0 0\n3 10\n", b"\x00\xff garbage", b"", b"0\n1\n9 99999\n4 20\n"):
        epoch_path(plog).write_bytes(garbage)
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            again = load_log(plog.directory, "t", 0, CFG, ManualClock(T0), had_clean_shutdown=True)
        warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(warnings) == 1, [r.getMessage() for r in warnings]
        assert files.LEADER_EPOCH_CHECKPOINT in warnings[0].getMessage()
        assert epoch_pairs(again) == [(0, 0), (3, 10), (4, 20)]
        again.close()
        assert epoch_path(plog).read_bytes() == b"0\n3\n0 0\n3 10\n4 20\n"


def test_unclean_recovery_assigns_the_epochs_of_recovered_batches(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", CFG)
    fill_epochs(plog, [0] * 5)
    plog.flush()
    rp = plog.recovery_point
    fill_epochs(plog, [2] * 5 + [6] * 5)  # never flushed: the checkpoint on disk has only (0, 0)
    assert epoch_path(plog).read_bytes() == b"0\n1\n0 0\n"
    plog.close_without_flush()
    again = load_log(plog.directory, "t", 0, CFG, ManualClock(T0), recovery_point=rp)
    assert again.log_end_offset == 30
    assert epoch_pairs(again) == [(0, 0), (2, 10), (6, 20)]
    assert epoch_path(plog).read_bytes() == b"0\n3\n0 0\n2 10\n6 20\n"  # written with the recovered data


def test_unclean_recovery_drops_epochs_past_what_survived(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", CFG)
    fill_epochs(plog, [0] * 5 + [1] * 5)
    plog.close()
    d = plog.directory
    kept = {p.name: p.read_bytes() for p in d.iterdir() if p.suffix == ".log"}
    plog = load_log(d, "t", 0, CFG, ManualClock(T0), had_clean_shutdown=True)
    fill_epochs(plog, [7] * 5)
    plog.close()
    assert epoch_path(plog).read_bytes() == b"0\n3\n0 0\n1 10\n7 20\n"
    for path in d.iterdir():  # the batches of epoch 7 are lost, the checkpoint still has them
        if path.suffix == ".log":
            if path.name in kept:
                path.write_bytes(kept[path.name])
            else:
                path.unlink()
    again = load_log(d, "t", 0, CFG, ManualClock(T0), recovery_point=0)
    assert again.log_end_offset == 20
    assert epoch_pairs(again) == [(0, 0), (1, 10)]
    assert again.end_offset_for_epoch(7) == (-1, -1)
    assert epoch_path(plog).read_bytes() == b"0\n2\n0 0\n1 10\n"


def test_unclean_recovery_without_a_checkpoint_rebuilds_every_epoch(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", CFG)
    fill_epochs(plog, [1] * 5 + [2] * 5)
    plog.flush()
    rp = plog.recovery_point
    fill_epochs(plog, [3] * 5)
    plog.close_without_flush()
    epoch_path(plog).unlink()
    again = load_log(plog.directory, "t", 0, CFG, ManualClock(T0), recovery_point=rp)
    assert epoch_pairs(again) == [(1, 0), (2, 10), (3, 20)]


def test_log_start_after_a_restart_truncates_the_epochs(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", CFG)
    fill_epochs(plog, [0] * 5 + [1] * 5)
    plog.close()  # checkpoint (0, 0) (1, 10)
    again = load_log(
        plog.directory, "t", 0, CFG, ManualClock(T0), log_start_offset=12, had_clean_shutdown=True
    )
    assert epoch_pairs(again) == [(1, 12)]
