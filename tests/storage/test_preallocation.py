"""Preallocated segments (topic config `preallocate`, storage/preallocation.py): the file runs ahead of its
batches in zeros; reads, rolls, clean stops, crashes and the fsync ledger see only the batches."""

from __future__ import annotations

import logging
import os
import random
from pathlib import Path

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import invariant, rule

from exactly.clock import ManualClock
from exactly.storage import files
from exactly.storage.config import LogConfig
from exactly.storage.loader import load_log
from exactly.storage.log import PartitionLog
from exactly.storage.preallocation import MAX_AHEAD, MIN_AHEAD, PREALLOCATION
from tests.storage.helpers import leader_append
from tests.storage.test_state_machine import PartitionMachine

from .helpers import T0, data_batch, open_log, read_all, reopen

pytestmark = pytest.mark.skipif(not PREALLOCATION.supported, reason="no fallocate(2) here")

PRE = LogConfig(segment_bytes=64 * 1024, index_interval_bytes=512, preallocate=True)
PLAIN = LogConfig(segment_bytes=64 * 1024, index_interval_bytes=512)


def fill(plog: PartitionLog, n: int, size: int = 100) -> None:
    for i in range(n):
        leader_append(plog, data_batch(1, value=bytes([i % 251 + 1]) * size))


def on_disk(plog: PartitionLog) -> list[tuple[int, int, int]]:
    """(base offset, logical size, file length) of each segment."""
    return [(s.base_offset, s.size, s.log_path.stat().st_size) for s in plog.segments]


def batch_bytes(plog: PartitionLog) -> list[bytes]:
    return [bytes(b.buffer) for b in read_all(plog)]


def test_appends_allocate_ahead_in_zeros_and_the_batches_are_those_of_a_plain_file(tmp_path: Path) -> None:
    pre = open_log(tmp_path / "pre-0", PRE)
    plain = open_log(tmp_path / "plain-0", PLAIN)
    for plog in (pre, plain):
        fill(plog, 40)
        plog.flush()
    [(_, size, length)] = on_disk(pre)
    assert size == plain.active_segment.size == plain.active_segment.log_path.stat().st_size
    assert length == size // 40 + MIN_AHEAD  # allocated at the first append: its batch and 16 KiB ahead
    data = pre.active_segment.log_path.read_bytes()
    assert data[:size] == plain.active_segment.log_path.read_bytes()
    assert data[size:] == bytes(length - size)
    assert batch_bytes(pre) == batch_bytes(plain)


def test_the_allocation_grows_with_the_segment_up_to_its_limits(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=32 * 1024 * 1024, index_interval_bytes=4096, preallocate=True)
    plog = open_log(tmp_path / "t-0", config)
    lengths = []
    for _ in range(60):
        fill(plog, 1, size=200_000)
        seg = plog.active_segment
        lengths.append(seg.log_path.stat().st_size)
        assert seg.size <= lengths[-1] <= seg.size + max(min(seg.size, MAX_AHEAD), MIN_AHEAD) + 200_100
    seg = plog.active_segment
    assert lengths[-1] - seg.size <= MAX_AHEAD
    assert len(set(lengths)) < 20  # one fallocate per several appends, not one each


def test_a_segment_is_never_allocated_past_segment_bytes(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", PRE)
    fill(plog, 200, size=1000)  # rolls every ~64 KiB
    assert len(plog.segments) > 2
    assert all(length <= PRE.segment_bytes for _, _, length in on_disk(plog))


def test_a_rolled_segment_and_a_clean_stop_trim_to_the_batches(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", PRE)
    fill(plog, 200, size=1000)
    *rolled, (_, size, length) = on_disk(plog)
    assert all(s == n for _, s, n in rolled)
    assert length > size
    before = batch_bytes(plog)
    again = reopen(plog, clean=True)
    assert all(s == n for _, s, n in on_disk(again))
    assert batch_bytes(again) == before


def test_a_crash_leaves_zeros_that_recovery_trims_quietly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    plog = open_log(tmp_path / "t-0", PRE)
    fill(plog, 30)
    plog.flush()
    before = batch_bytes(plog)
    ((_, size, length),) = on_disk(plog)
    assert length > size
    with caplog.at_level(logging.WARNING):
        again = reopen(plog, clean=False)
    assert "invalid data" not in caplog.text
    assert again.log_end_offset == 30
    assert batch_bytes(again) == before
    assert on_disk(again) == [(0, size, size)]
    fill(again, 1)  # and it appends (and allocates) again after them
    assert again.log_end_offset == 31


def test_zeros_kept_past_a_rolled_segment_lose_nothing_after_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A trim that a crash lost, in a segment below the recovery point: the segments after it stay."""
    plog = open_log(tmp_path / "t-0", PRE)
    fill(plog, 200, size=1000)
    plog.flush()
    before = batch_bytes(plog)
    first = plog.segments[0]
    plog.close_without_flush()
    os.truncate(first.log_path, first.size + 5000)
    with caplog.at_level(logging.WARNING):
        again = load_log(plog.directory, "t", 0, PRE, ManualClock(T0), recovery_point=200)
    assert "invalid data" not in caplog.text
    assert again.log_end_offset == 200
    assert batch_bytes(again) == before
    assert all(s == n for _, s, n in on_disk(again)[:-1])


def test_zeros_kept_after_a_clean_stop_are_recovered(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", PRE)
    fill(plog, 3)  # small: a clean stop writes no index file
    before = batch_bytes(plog)
    plog.close()
    path = plog.active_segment.log_path
    os.truncate(path, path.stat().st_size + 3000)
    again = load_log(plog.directory, "t", 0, PRE, ManualClock(T0), recovery_point=3, had_clean_shutdown=True)
    assert again.log_end_offset == 3
    assert batch_bytes(again) == before


def test_a_torn_batch_before_the_zeros_is_invalid_data(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    plog = open_log(tmp_path / "t-0", PRE)
    fill(plog, 10)
    plog.flush()
    before = batch_bytes(plog)
    fill(plog, 1)
    seg = plog.active_segment
    torn_at, end = seg.flushed_size, seg.size
    plog.close_without_flush()
    with open(seg.log_path, "r+b") as f:  # the crash kept the batch's first page, not the rest
        f.seek(torn_at + 40)
        f.write(bytes(end - torn_at - 40))
    with caplog.at_level(logging.WARNING):
        again = load_log(plog.directory, "t", 0, PRE, ManualClock(T0), recovery_point=10)
    assert again.log_end_offset == 10
    assert batch_bytes(again) == before
    assert "truncated 40 bytes" in caplog.text  # what the crash kept of the batch, not the zeros after it


def test_the_fsync_ledger_records_the_batches_not_the_allocation(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    files.open_fsync_ledger(ledger, tmp_path)
    try:
        plog = open_log(tmp_path / "t-0", PRE)
        fill(plog, 10)
        plog.flush()
        with files.synced_together(tmp_path):
            fill(plog, 5)
            assert plog.flush_deferred() is not None
        size = plog.active_segment.size
        assert plog.active_segment.log_path.stat().st_size > size
    finally:
        files.close_fsync_ledger()
    lengths = [
        int(fields[1])
        for line in ledger.read_text().splitlines()
        if (fields := line.split("\t"))[0] == "t-0/00000000000000000000.log" and len(fields) == 2
    ]
    assert lengths[-1] == size
    assert lengths == sorted(lengths)
    assert lengths[0] > 0


class PreallocatedPartitionMachine(PartitionMachine):
    """The storage state machine on preallocated segments, with the crash a preallocated file has: the
    bytes written after its last fsync read back as zeros (or a prefix of them survives)."""

    def __init__(self) -> None:
        super().__init__()
        self.plog.close_without_flush()
        self.config = LogConfig(
            segment_bytes=700,
            index_interval_bytes=64,
            retention_bytes=2500,
            segment_index_bytes=160,
            preallocate=True,
        )
        self.plog = load_log(self.tmp / "t-0", "t", 0, self.config, self.clock)

    @rule(seed=st.integers(0, 2**32))
    def crash_to_zeros(self, seed: int) -> None:
        plog = self.plog
        rnd = random.Random(seed)
        flushed = plog.recovery_point
        log_start = plog.log_start_offset
        unflushed = [(s.log_path, s.flushed_size, s.size) for s in plog.segments if s.size > s.flushed_size]
        plog.close_without_flush()
        if unflushed:
            path, lo, hi = rnd.choice(unflushed)
            at = rnd.randrange(lo, hi)
            with open(path, "r+b") as f:
                f.seek(at)
                f.write(bytes(hi - at))
        self.plog = load_log(
            plog.directory,
            "t",
            0,
            self.config,
            self.clock,
            recovery_point=flushed,
            log_start_offset=log_start,
        )
        leo = self.plog.log_end_offset
        assert leo >= flushed, f"flushed data lost: log end {leo} < recovery point {flushed}"
        self.model = [s for s in self.model if s.last < leo]
        self.forget_transactions_below_log_start()

    @invariant()
    def only_the_active_segment_runs_past_its_batches_in_zeros(self) -> None:
        *rolled, active = self.plog.segments
        for seg in rolled:
            assert seg.log_path.stat().st_size == seg.size
        data = active.log_path.read_bytes()
        assert len(data) >= active.size
        assert data[active.size :] == bytes(len(data) - active.size)


PreallocatedPartitionMachine.TestCase.settings = PartitionMachine.TestCase.settings
TestPreallocatedPartitionMachine = PreallocatedPartitionMachine.TestCase
