"""Leader-epoch cache (Kafka's LeaderEpochFileCache semantics) and its checkpoint file codec."""

from __future__ import annotations

import itertools
import logging
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from exactly.storage import files
from exactly.storage.leader_epoch import (
    UNDEFINED_EPOCH,
    CorruptLeaderEpochCheckpointError,
    EpochEntry,
    LeaderEpochCache,
    decode_checkpoint,
    encode_checkpoint,
    read_checkpoint,
    write_checkpoint,
)

UNDEFINED = (-1, -1)


def cache_of(*pairs: tuple[int, int]) -> LeaderEpochCache:
    cache = LeaderEpochCache()
    for epoch, start in pairs:
        cache.assign(epoch, start)
    return cache


def pairs(cache: LeaderEpochCache) -> list[tuple[int, int]]:
    return [(e.epoch, e.start_offset) for e in cache.entries]


# -- assign ------------------------------------------------------------------------------------------------


def test_empty_cache() -> None:
    cache = LeaderEpochCache()
    assert cache.latest_epoch is None
    assert cache.latest_entry is None
    assert cache.earliest_entry is None
    assert cache.end_offset_for(7, 0) == UNDEFINED
    assert cache.end_offset_for(UNDEFINED_EPOCH, 73) == UNDEFINED
    assert cache.truncate_from_start(7) == []
    assert cache.truncate_from_end(7) == []
    assert len(cache) == 0


def test_assign_adds_an_entry_per_new_epoch() -> None:
    cache = LeaderEpochCache()
    assert cache.assign(2, 10)
    assert cache.latest_epoch == 2
    assert cache.latest_entry == cache.earliest_entry == EpochEntry(2, 10)
    assert cache.assign(4, 15)
    assert pairs(cache) == [(2, 10), (4, 15)]
    assert cache.earliest_entry == EpochEntry(2, 10)
    assert cache.latest_entry == EpochEntry(4, 15)


def test_assign_ignores_the_latest_epoch_at_a_later_offset() -> None:
    cache = cache_of((2, 6))
    version = cache.version
    assert not cache.assign(2, 10)
    assert not cache.assign(2, 6)
    assert pairs(cache) == [(2, 6)]
    assert cache.version == version


def test_assign_of_the_latest_epoch_at_an_earlier_offset_moves_its_start() -> None:
    cache = cache_of((5, 11), (6, 12), (7, 13))
    assert cache.assign(7, 12)  # epoch 6 (starting at 12) conflicts and goes
    assert pairs(cache) == [(5, 11), (7, 12)]
    assert cache.end_offset_for(5, 0) == (5, 12)
    assert cache.end_offset_for(6, 0) == (5, 12)


def test_assign_keeps_start_offsets_increasing() -> None:
    cache = cache_of((2, 9))
    assert cache.assign(3, 9)
    assert pairs(cache) == [(3, 9)]
    cache = cache_of((2, 6))
    assert cache.assign(3, 5)
    assert pairs(cache) == [(3, 5)]


def test_assign_of_an_older_epoch_removes_the_later_ones(caplog: pytest.LogCaptureFixture) -> None:
    cache = cache_of((1, 5), (2, 6))
    with caplog.at_level(logging.WARNING, logger="exactly.storage.leader_epoch"):
        assert cache.assign(1, 7)
    assert pairs(cache) == [(1, 7)]
    assert cache.latest_epoch == 1
    assert cache.end_offset_for(1, 8) == (1, 8)
    assert cache.end_offset_for(2, 8) == UNDEFINED
    assert len(caplog.records) == 1
    assert "conflicting" in caplog.records[0].getMessage()


def test_assign_restarting_at_the_same_offset_logs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    cache = cache_of((0, 0))
    with caplog.at_level(logging.WARNING, logger="exactly.storage.leader_epoch"):
        assert cache.assign(1, 0)  # a new leader before anything was written in epoch 0
    assert pairs(cache) == [(1, 0)]
    assert caplog.records == []


@pytest.mark.parametrize(("epoch", "start"), [(-1, 0), (0, -1), (-5, -5)])
def test_assign_refuses_negative_values(epoch: int, start: int) -> None:
    with pytest.raises(ValueError, match="invalid leader epoch entry"):
        LeaderEpochCache().assign(epoch, start)


# -- end_offset_for ----------------------------------------------------------------------------------------


def test_end_offset_of_the_latest_epoch_is_the_log_end_offset() -> None:
    cache = cache_of((2, 11), (2, 12))
    assert cache.end_offset_for(2, 14) == (2, 14)
    assert cache_of((2, 6)).end_offset_for(2, 7) == (2, 7)  # epochs need not start at zero


def test_end_offset_of_an_undefined_epoch_is_undefined() -> None:
    assert cache_of((2, 11), (3, 12)).end_offset_for(UNDEFINED_EPOCH, 0) == UNDEFINED


def test_end_offset_below_the_earliest_epoch_is_the_earliest_start() -> None:
    """Today's Kafka: the requested epoch with the first known start offset (early versions of
    LeaderEpochFileCache answered UNDEFINED here)."""
    cache = cache_of((5, 11), (6, 12), (7, 13))
    assert cache.end_offset_for(4, 0) == (4, 11)
    assert cache.end_offset_for(0, 0) == (0, 11)


def test_end_offset_above_the_latest_epoch_is_undefined() -> None:
    assert cache_of((2, 100)).end_offset_for(3, 100) == UNDEFINED


def test_end_offset_of_an_earlier_epoch_is_the_next_epochs_start() -> None:
    cache = cache_of((1, 11), (1, 12), (2, 13), (2, 14), (3, 15), (3, 16))
    assert cache.end_offset_for(2, 17) == (2, 15)
    cache = cache_of((0, 10), (2, 13), (4, 17))
    assert cache.end_offset_for(1, 0) == (0, 13)  # no entry for 1: the newest epoch below it
    assert cache.end_offset_for(2, 0) == (2, 17)
    assert cache.end_offset_for(3, 0) == (2, 17)
    assert cache.end_offset_for(4, 0) == (4, 0)


def test_epochs_tracked_as_leaders_change() -> None:
    cache = cache_of((0, 0), (1, 0))
    assert cache.latest_epoch == 1
    assert cache.end_offset_for(1, 0) == (1, 0)
    assert cache.end_offset_for(0, 0) == (0, 0)  # epoch 0's entry is gone: below the earliest
    assert cache.end_offset_for(1, 5) == (1, 5)
    cache.assign(2, 5)
    assert cache.end_offset_for(2, 10) == (2, 10)
    assert cache.end_offset_for(1, 10) == (1, 5)
    assert cache.end_offset_for(0, 10) == (0, 0)


def test_previous_epoch_and_epoch_for_offset() -> None:
    cache = cache_of((2, 10), (4, 15), (10, 20))
    assert cache.previous_epoch(2) is None
    assert cache.previous_epoch(4) == 2
    assert cache.previous_epoch(5) == 4
    assert cache.previous_epoch(11) == 10
    assert cache.epoch_for_offset(9) is None
    assert cache.epoch_for_offset(10) == 2
    assert cache.epoch_for_offset(14) == 2
    assert cache.epoch_for_offset(15) == 4
    assert cache.epoch_for_offset(1000) == 10


# -- truncation --------------------------------------------------------------------------------------------


def test_truncate_from_end_drops_entries_starting_at_or_after_the_offset() -> None:
    cache = cache_of((2, 6), (3, 8), (4, 11))
    assert cache.truncate_from_end(8) == [EpochEntry(3, 8), EpochEntry(4, 11)]
    assert pairs(cache) == [(2, 6)]
    cache = cache_of((2, 6), (3, 8), (4, 11))
    assert cache.truncate_from_end(9) == [EpochEntry(4, 11)]
    assert pairs(cache) == [(2, 6), (3, 8)]
    assert cache.latest_epoch == 3


def test_truncate_from_end_past_the_last_entry_or_undefined_changes_nothing() -> None:
    cache = cache_of((2, 6), (3, 8), (4, 11))
    version = cache.version
    assert cache.truncate_from_end(12) == []
    assert cache.truncate_from_end(-1) == []
    assert len(cache) == 3
    assert cache.version == version
    assert cache.truncate_from_end(0) == [EpochEntry(2, 6), EpochEntry(3, 8), EpochEntry(4, 11)]
    assert len(cache) == 0


@pytest.mark.parametrize(
    ("offset", "after"),
    [
        (-1, [(2, 6), (3, 8), (4, 11)]),  # undefined: nothing
        (1, [(2, 6), (3, 8), (4, 11)]),  # before the first entry
        (6, [(2, 6), (3, 8), (4, 11)]),  # at the first entry: kept
        (8, [(3, 8), (4, 11)]),  # at an epoch boundary
        (9, [(3, 9), (4, 11)]),  # between boundaries: that epoch now starts there
        (11, [(4, 11)]),  # at the latest entry
        (15, [(4, 15)]),  # past every entry: the latest is kept, moved
    ],
)
def test_truncate_from_start(offset: int, after: list[tuple[int, int]]) -> None:
    cache = cache_of((2, 6), (3, 8), (4, 11))
    version = cache.version
    removed = cache.truncate_from_start(offset)
    assert pairs(cache) == after
    assert (cache.version != version) == bool(removed)


def test_truncate_from_start_between_the_first_two_epochs() -> None:
    cache = cache_of((0, 0), (1, 7), (2, 10))
    assert cache.truncate_from_start(5) == [EpochEntry(0, 0)]
    assert pairs(cache) == [(0, 5), (1, 7), (2, 10)]


def test_clear_and_copy() -> None:
    cache = cache_of((2, 6), (3, 8))
    clone = cache.copy()
    clone.assign(4, 11)
    assert pairs(cache) == [(2, 6), (3, 8)]
    assert pairs(clone) == [(2, 6), (3, 8), (4, 11)]
    cache.clear()
    assert len(cache) == 0
    assert repr(clone) == "LeaderEpochCache([(2, 6), (3, 8), (4, 11)])"


# -- the checkpoint file -----------------------------------------------------------------------------------


def test_checkpoint_format_is_kafkas() -> None:
    assert encode_checkpoint([EpochEntry(0, 0), EpochEntry(2, 1042)]) == b"0\n2\n0 0\n2 1042\n"
    assert encode_checkpoint([]) == b"0\n0\n"
    assert decode_checkpoint(b"0\r\n1\r\n3 7\r\n") == [EpochEntry(3, 7)]  # CRLF (Java's newLine on Windows)
    assert decode_checkpoint(b"0\n1\n3\t7\n") == [EpochEntry(3, 7)]


def test_checkpoint_write_and_read(tmp_path: Path) -> None:
    path = tmp_path / files.LEADER_EPOCH_CHECKPOINT
    assert read_checkpoint(path) is None
    write_checkpoint(path, [EpochEntry(0, 0), EpochEntry(5, 99)])
    assert path.read_bytes() == b"0\n2\n0 0\n5 99\n"
    assert read_checkpoint(path) == [EpochEntry(0, 0), EpochEntry(5, 99)]
    assert not (tmp_path / (files.LEADER_EPOCH_CHECKPOINT + ".tmp")).exists()
    assert LeaderEpochCache(read_checkpoint(path) or ()).end_offset_for(0, 120) == (0, 99)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"0\n",
        b"0",
        b"1\n0\n",  # unknown version
        b"0\n1\n",  # count says 1, no entry
        b"0\n0\n3 7\n",  # count says 0, one entry
        b"0\n1\n3 7",  # unterminated
        b"0\n1\n3\n",
        b"0\n1\n3 7 9\n",
        b"0\n1\n-3 7\n",
        b"0\n1\n3 -7\n",
        b"0\n1\n 3 7\n",
        b"0\n1\n2147483648 7\n",  # epoch beyond int32
        b"0\n1\n3 9223372036854775808\n",  # offset beyond int64
        b"0\n2\n3 7\n3 9\n",  # epochs not increasing
        b"0\n2\n3 7\n4 7\n",  # offsets not increasing
        b"0\n2\n4 7\n3 9\n",
        b"x\n0\n",
        b"0\n\xff\n",
        "0\n1\n\u0663 7\n".encode(),  # a non-ASCII digit
        b"0\n-1\n",
    ],
)
def test_malformed_checkpoints_raise_our_error(data: bytes) -> None:
    with pytest.raises(CorruptLeaderEpochCheckpointError):
        decode_checkpoint(data)


@st.composite
def valid_entries(draw: st.DrawFn) -> list[EpochEntry]:
    n = draw(st.integers(0, 8))
    epochs = sorted(draw(st.sets(st.integers(0, 2**31 - 1), min_size=n, max_size=n)))
    starts = sorted(draw(st.sets(st.integers(0, 2**63 - 1), min_size=n, max_size=n)))
    return [EpochEntry(e, s) for e, s in zip(epochs, starts, strict=True)]


@given(valid_entries())
def test_checkpoint_round_trip(entries: list[EpochEntry]) -> None:
    data = encode_checkpoint(entries)
    assert decode_checkpoint(data) == entries
    assert LeaderEpochCache(entries).entries == tuple(entries)


@given(st.binary(max_size=64))
def test_garbage_decodes_or_raises_our_error(data: bytes) -> None:
    try:
        entries = decode_checkpoint(data)
    except CorruptLeaderEpochCheckpointError:
        return
    assert encode_checkpoint(entries) is not None


@given(valid_entries(), st.data())
def test_damaged_checkpoint_decodes_or_raises(entries: list[EpochEntry], data: st.DataObject) -> None:
    raw = bytearray(encode_checkpoint(entries))
    kind = data.draw(st.sampled_from(["flip", "truncate", "insert"]))
    at = data.draw(st.integers(0, len(raw) - 1))
    if kind == "flip":
        raw[at] ^= data.draw(st.integers(1, 255))
    elif kind == "truncate":
        del raw[at:]
    else:
        raw[at:at] = data.draw(st.binary(min_size=1, max_size=4))
    try:
        decoded = decode_checkpoint(bytes(raw))
    except CorruptLeaderEpochCheckpointError:
        return
    # What decodes is a valid cache state: strictly increasing epochs and offsets.
    for a, b in itertools.pairwise(decoded):
        assert a.epoch < b.epoch
        assert a.start_offset < b.start_offset


# -- a model -----------------------------------------------------------------------------------------------


class _Model:
    """The cache's documented semantics written as plainly as possible: a dict epoch -> start offset."""

    def __init__(self) -> None:
        self.starts: dict[int, int] = {}

    def ordered(self) -> list[tuple[int, int]]:
        return sorted(self.starts.items())

    def assign(self, epoch: int, start: int) -> None:
        ordered = self.ordered()
        if ordered and ordered[-1][0] == epoch and start >= ordered[-1][1]:
            return
        while ordered and (ordered[-1][0] >= epoch or ordered[-1][1] >= start):
            del self.starts[ordered.pop()[0]]
        self.starts[epoch] = start

    def end_offset_for(self, requested: int, leo: int) -> tuple[int, int]:
        ordered = self.ordered()
        if requested == -1:
            return UNDEFINED
        if ordered and ordered[-1][0] == requested:
            return requested, leo
        higher = [(e, s) for e, s in ordered if e > requested]
        lower = [(e, s) for e, s in ordered if e <= requested]
        if not higher:
            return UNDEFINED
        if not lower:
            return requested, higher[0][1]
        return lower[-1][0], higher[0][1]

    def truncate_from_end(self, end: int) -> None:
        if end < 0:
            return
        for e, s in self.ordered():
            if s >= end:
                del self.starts[e]

    def truncate_from_start(self, start: int) -> None:
        at_or_before = [(e, s) for e, s in self.ordered() if s <= start]
        for e, _ in at_or_before:
            del self.starts[e]
        if at_or_before:
            self.starts[at_or_before[-1][0]] = start


class CacheMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.cache = LeaderEpochCache()
        self.model = _Model()
        self.leo = 0

    @rule(epoch=st.integers(0, 12), back=st.integers(0, 3))
    def assign(self, epoch: int, back: int) -> None:
        start = max(0, self.leo - back)
        changed = self.cache.assign(epoch, start)
        before = self.model.ordered()
        self.model.assign(epoch, start)
        assert changed == (before != self.model.ordered())

    @rule(n=st.integers(1, 5))
    def append(self, n: int) -> None:
        self.leo += n

    @rule(end=st.integers(-1, 40))
    def truncate_from_end(self, end: int) -> None:
        self.cache.truncate_from_end(end)
        self.model.truncate_from_end(end)
        if end >= 0:
            self.leo = min(self.leo, end)

    @rule(start=st.integers(-1, 40))
    def truncate_from_start(self, start: int) -> None:
        self.cache.truncate_from_start(start)
        self.model.truncate_from_start(start)

    @precondition(lambda self: len(self.cache) > 0)
    @rule()
    def reload(self) -> None:
        """A checkpoint written and read back gives the same cache."""
        self.cache = LeaderEpochCache(decode_checkpoint(encode_checkpoint(self.cache.entries)))

    @invariant()
    def same_entries(self) -> None:
        assert pairs(self.cache) == self.model.ordered()
        entries = self.cache.entries
        for a, b in itertools.pairwise(entries):
            assert a.epoch < b.epoch
            assert a.start_offset < b.start_offset

    @invariant()
    def same_answers(self) -> None:
        for requested in range(-1, 14):
            assert self.cache.end_offset_for(requested, self.leo) == self.model.end_offset_for(
                requested, self.leo
            )


CacheMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=30, deadline=None)
TestCacheMachine = CacheMachine.TestCase
