"""Compaction (cleaner.py)."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from exactly.clock import ManualClock
from exactly.records import build_batch
from exactly.storage import files
from exactly.storage.cleaner import clean_log, group_segments
from exactly.storage.config import CleanupPolicy, LogConfig
from exactly.storage.loader import load_log
from tests.storage.helpers import leader_append, leader_append_marker

from .helpers import T0, abort, commit, consume_committed, data_batch, open_log, read_all

CFG = LogConfig(cleanup_policy=CleanupPolicy.COMPACT, segment_bytes=400, delete_retention_ms=1000)


def kv(
    plog_records: list[tuple[int, bytes | None, bytes | None]],
) -> list[tuple[int, bytes | None, bytes | None]]:
    return plog_records


def records(plog: object) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(r.offset, r.key, r.value) for b in read_all(plog) if not b.is_control for r in b.records()]  # type: ignore[arg-type]


def test_keeps_latest_per_key_and_drops_old_tombstones(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    plog = open_log(tmp_path / "t-0", CFG, clock)
    for i in range(6):
        leader_append(plog, build_batch([(b"a", b"a%d" % i), (b"b", b"b%d" % i)], timestamp=T0))
    leader_append(plog, build_batch([(b"c", b"c0"), (b"b", None)], timestamp=T0))
    leader_append(plog, build_batch([(b"d", b"d0")], timestamp=T0))
    plog.roll()
    plog.flush()
    assert clean_log(plog, T0) > 0
    assert records(plog) == [(10, b"a", b"a5"), (12, b"c", b"c0"), (13, b"b", None), (14, b"d", b"d0")]
    clock.advance(5000)
    leader_append(plog, build_batch([(b"e", b"e0")], timestamp=clock.milliseconds()))
    plog.roll()
    plog.flush()
    clean_log(plog, clock.milliseconds())
    assert [r[1] for r in records(plog)] == [b"a", b"c", b"d", b"e"]  # the tombstone is gone
    for b in read_all(plog):
        b.verify_crc()
    # The offsets and bytes survive a restart (recovery accepts compacted batches).
    before = [bytes(b.buffer) for b in read_all(plog)]
    plog.close_without_flush()
    again = load_log(plog.directory, "t", 0, CFG, clock, recovery_point=0)
    assert [bytes(b.buffer) for b in read_all(again)] == before


def test_drops_aborted_data_keeps_committed_and_stops_at_lso(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", CFG)
    leader_append(plog, data_batch(1, pid=1, epoch=0, seq=0, txn=True, key=b"x", value=b"aborted"))
    leader_append(plog, data_batch(1, pid=2, epoch=0, seq=0, txn=True, key=b"y", value=b"committed"))
    leader_append_marker(plog, 1, 0, abort())
    leader_append_marker(plog, 2, 0, commit())
    for i in range(6):
        leader_append(plog, data_batch(1, key=b"k", value=b"%d" % i))
    leader_append(plog, data_batch(1, pid=3, epoch=0, seq=0, txn=True, key=b"z", value=b"open"))  # 10
    for i in range(12):
        leader_append(plog, data_batch(1, key=b"k", value=b"%d" % i))
    plog.flush()
    assert plog.last_stable_offset == 10
    clean_log(plog, T0)
    got = records(plog)
    assert (0, b"x", b"aborted") not in got
    assert (1, b"y", b"committed") in got
    assert (10, b"z", b"open") in got  # above the LSO: untouched
    assert (8, b"k", b"4") not in got  # superseded within the cleanable range
    assert plog.log_start_offset == 0
    leader_append_marker(plog, 3, 0, commit())
    assert 10 in consume_committed(plog)


def test_interrupted_swap_is_completed_on_load(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", CFG)
    for i in range(8):
        leader_append(plog, build_batch([(b"a", b"%d" % i)], timestamp=T0))
    plog.roll()
    plog.close()
    d = plog.directory
    # Simulate a crash after the `.swap` rename: an empty cleaned log for segment 0.
    first = sorted(n for n in os.listdir(d) if n.endswith(".log"))[0]
    base = int(first[:20])
    src = files.log_file(d, base).read_bytes()
    os.rename(files.log_file(d, base), str(files.log_file(d, base)) + ".keep")
    (d / (first + ".swap")).write_bytes(src[: len(src) // 2 // 1])
    os.rename(str(files.log_file(d, base)) + ".keep", files.log_file(d, base))
    (d / "junk.cleaned").write_bytes(b"x")
    again = load_log(d, "t", 0, CFG, ManualClock(T0))
    assert not any(n.endswith((".swap", ".cleaned")) for n in os.listdir(d))
    for b in read_all(again):
        b.verify_crc()


def test_cleaned_segments_are_merged_up_to_segment_bytes(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    plog = open_log(tmp_path / "t-0", CFG, clock)
    for i in range(40):  # one key rewritten: every segment but the last shrinks to nothing
        leader_append(plog, build_batch([(b"k", b"v%02d" % i), (b"j%d" % (i % 3), b"w")], timestamp=T0))
        if i % 2:
            plog.roll()
    plog.roll()
    plog.flush()
    before = len(plog.segments)
    assert before > 20
    clean_log(plog, T0)
    sizes = [seg.size for seg in plog.segments]
    assert len(sizes) < before // 4
    assert all(size <= CFG.segment_bytes for size in sizes)
    assert plog.log_start_offset == 0
    assert plog.segments[0].base_offset == 0
    got = records(plog)
    assert got == [(75, b"j1", b"w"), (77, b"j2", b"w"), (78, b"k", b"v39"), (79, b"j0", b"w")]
    # A second pass has nothing left to merge or reclaim.
    after = [(seg.base_offset, seg.size) for seg in plog.segments]
    assert clean_log(plog, T0) == 0
    assert [(seg.base_offset, seg.size) for seg in plog.segments] == after
    # The merged segments load again with the same bytes and offsets.
    content = [bytes(b.buffer) for b in read_all(plog)]
    plog.close_without_flush()
    again = load_log(plog.directory, "t", 0, CFG, clock, recovery_point=0)
    assert [bytes(b.buffer) for b in read_all(again)] == content
    assert [seg.base_offset for seg in again.segments] == [base for base, _ in after]


def test_an_interrupted_merge_is_completed_on_load(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", CFG)
    for i in range(6):
        leader_append(plog, build_batch([(b"a%d" % i, b"x")], timestamp=T0))
        plog.roll()
    plog.close()
    d = plog.directory
    bases = sorted(int(n[:20]) for n in os.listdir(d) if n.endswith(".log"))
    assert len(bases) >= 6
    # A crash after the merged file became `.swap`, with segments 1 and 2 still in place: the loader
    # deletes every segment the swap covers and keeps those after it.
    merged = b"".join(files.log_file(d, base).read_bytes() for base in bases[:3])
    (d / (files.log_file(d, 0).name + ".swap")).write_bytes(merged)
    again = load_log(d, "t", 0, CFG, ManualClock(T0))
    assert [seg.base_offset for seg in again.segments] == [0, *bases[3:]]
    assert [r[1] for r in records(again)] == [b"a%d" % i for i in range(6)]


@given(
    st.lists(st.integers(0, 500), min_size=1, max_size=30),
    st.lists(st.integers(1, 1 << 30), min_size=30, max_size=30),
    st.integers(1, 1000),
)
def test_groups_cover_every_segment_in_order_within_the_bounds(
    sizes: list[int], gaps: list[int], max_bytes: int
) -> None:
    bases = [sum(gaps[:i]) for i in range(len(sizes))]
    end = bases[-1] + gaps[len(sizes) - 1]
    runs = group_segments(sizes, bases, end, max_bytes)
    assert [i for first, stop in runs for i in range(first, stop)] == list(range(len(sizes)))
    for first, stop in runs:
        last_end = bases[stop] if stop < len(bases) else end
        if stop - first > 1:
            assert sum(sizes[first:stop]) <= max_bytes
            assert last_end - bases[first] < 1 << 31
    for (first, stop), _ in itertools.pairwise(runs):  # greedy: the run ended because the next did not fit
        grown_end = bases[stop + 1] if stop + 1 < len(bases) else end
        assert sum(sizes[first : stop + 1]) > max_bytes or grown_end - bases[first] > (1 << 31) - 1
