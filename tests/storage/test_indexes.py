from __future__ import annotations

from pathlib import Path

import pytest

from exactly.storage.offset_index import OffsetIndex
from exactly.storage.time_index import TimeIndex
from exactly.storage.txn_index import AbortedTxn, TransactionIndex


def test_offset_index_lookup_and_roundtrip(tmp_path: Path) -> None:
    idx = OffsetIndex(tmp_path / "0.index", 100, 1024)
    assert idx.lookup(150) == (100, 0)
    for i in range(1, 6):
        idx.append(100 + 10 * i, 1000 * i)
    assert idx.lookup(99) == (100, 0)
    assert idx.lookup(109) == (100, 0)
    assert idx.lookup(110) == (110, 1000)
    assert idx.lookup(135) == (130, 3000)
    assert idx.lookup(10**9) == (150, 5000)
    idx.flush(fsync=True)
    loaded = OffsetIndex.load(tmp_path / "0.index", 100, 1024, log_size=6000)
    assert loaded is not None
    assert loaded.entries() == idx.entries()


def test_offset_index_rejects_bad_files(tmp_path: Path) -> None:
    path = tmp_path / "0.index"
    idx = OffsetIndex(path, 0, 1024)
    idx.append(5, 100)
    idx.append(9, 200)
    idx.flush(fsync=False)
    assert OffsetIndex.load(path, 0, 1024, log_size=150) is None  # points past the log
    path.write_bytes(path.read_bytes()[:-3])
    assert OffsetIndex.load(path, 0, 1024, log_size=1000) is None  # torn entry
    path.write_bytes(bytes.fromhex("00000009000000640000000500000096"))
    assert OffsetIndex.load(path, 0, 1024, log_size=1000) is None  # goes backwards
    assert OffsetIndex.load(tmp_path / "missing.index", 0, 1024, 10) is None


def test_offset_index_truncate_and_append_order(tmp_path: Path) -> None:
    idx = OffsetIndex(tmp_path / "0.index", 0, 24)
    idx.append(3, 10)
    idx.append(7, 20)
    idx.flush(fsync=False)
    with pytest.raises(ValueError, match="not increasing"):
        idx.append(7, 30)
    idx.append(9, 30)
    assert idx.is_full
    idx.truncate_to(7)
    assert idx.entries() == [(3, 10)]
    idx.flush(fsync=False)
    assert (tmp_path / "0.index").stat().st_size == 8


def test_time_index(tmp_path: Path) -> None:
    path = tmp_path / "0.timeindex"
    idx = TimeIndex(path, 0, 1200)
    idx.maybe_append(1000, 5)
    idx.maybe_append(1000, 6)  # not larger: ignored
    idx.maybe_append(2000, 9)
    assert idx.entries() == [(1000, 5), (2000, 9)]
    assert idx.lookup_before(1000) == 0
    assert idx.lookup_before(1001) == 5
    assert idx.lookup_before(5000) == 9
    idx.flush(fsync=False)
    loaded = TimeIndex.load(path, 0, 1200, next_offset=10)
    assert loaded is not None
    assert loaded.entries() == idx.entries()
    assert TimeIndex.load(path, 0, 1200, next_offset=9) is None  # offset beyond the log
    idx.truncate_to(9)
    assert idx.entries() == [(1000, 5)]


def test_txn_index_roundtrip_and_collect(tmp_path: Path) -> None:
    path = tmp_path / "0.txnindex"
    idx = TransactionIndex(path, 0)
    idx.append(AbortedTxn(1, 0, 10, 11))
    idx.append(AbortedTxn(2, 5, 20, 21))
    idx.append(AbortedTxn(3, 30, 40, 100))
    idx.flush(fsync=True)
    assert path.stat().st_size == 3 * 34
    loaded = TransactionIndex.load(path, 0)
    assert loaded is not None
    assert loaded.entries == idx.entries
    out: list[AbortedTxn] = []
    assert idx.collect(11, 25, out)  # entry 3 has lso 100 >= 25: nothing later can overlap
    assert [t.producer_id for t in out] == [2]
    out.clear()
    assert idx.collect(0, 50, out)
    assert [t.producer_id for t in out] == [1, 2, 3]
    with pytest.raises(ValueError, match="marker order"):
        idx.append(AbortedTxn(4, 0, 40, 41))
    idx.truncate_to(20)
    assert [t.producer_id for t in idx.entries] == [1]
    path.write_bytes(b"\x00" * 33)
    assert TransactionIndex.load(path, 0) is None


def test_reset_empties_a_file_leaves_an_empty_or_missing_one_alone(tmp_path: Path) -> None:
    # A written index is emptied; an already-empty one is not rewritten; a missing one stays missing until
    # it has entries (a new partition makes one file, its log).
    path = tmp_path / "00000000000000000000.index"
    idx = OffsetIndex(path, 0, 1024)
    idx.append(5, 4096)
    idx.flush(fsync=False)
    assert path.stat().st_size == 8
    idx.reset()
    assert path.read_bytes() == b""
    inode = path.stat().st_ino, path.stat().st_mtime_ns
    idx.reset()
    assert (path.stat().st_ino, path.stat().st_mtime_ns) == inode
    path.unlink()
    idx.reset()
    assert not path.exists()
    idx.flush(fsync=False)
    idx.flush(fsync=True)
    assert not path.exists()  # an empty index needs no file (segment.load_indexes reads none as empty)
    idx.append(9, 100)
    idx.flush(fsync=False)
    assert path.read_bytes() == bytes.fromhex("0000000900000064")  # an append after the resets lands


def test_a_lazy_reset_rewrites_the_file_at_the_next_flush(tmp_path: Path) -> None:
    """Start-up recovery resets lazily: the old bytes stay until the next flush, which writes the rebuilt
    entries from the start and cuts what is left over (an identical index is rewritten in place)."""
    path = tmp_path / "00000000000000000000.index"
    idx = OffsetIndex(path, 0, 1024)
    for offset in (5, 9, 12):
        idx.append(offset, offset * 100)
    idx.flush(fsync=True)
    old = path.read_bytes()
    assert len(old) == 24
    idx.reset(lazily=True)
    assert len(idx) == 0
    assert path.read_bytes() == old  # untouched until the flush
    idx.append(5, 500)
    idx.flush(fsync=False)
    assert path.read_bytes() == old[:8]  # rebuilt entries, the rest cut off
    inode = path.stat().st_ino
    idx.reset(lazily=True)
    idx.append(5, 500)
    idx.flush(fsync=False)
    assert path.read_bytes() == old[:8]
    assert path.stat().st_ino == inode
    idx.reset(lazily=True)
    idx.flush(fsync=False)  # nothing rebuilt: the file is emptied
    assert path.read_bytes() == b""


def test_recovery_keeps_the_final_time_index_entry_of_a_clean_close(tmp_path: Path) -> None:
    """The entry a clean close adds survives a recovery that finds the same data: the file is not cut."""
    path = tmp_path / "00000000000000000000.timeindex"
    idx = TimeIndex(path, 0, 1200)
    idx.maybe_append(1000, 3)
    idx.flush(fsync=True)
    old = path.read_bytes()
    idx.reset(lazily=True)
    idx.keep_final_entry(999, 2)  # not what the file holds: dropped at the rewrite
    idx.flush(fsync=False)
    assert path.read_bytes() == b""
    path.write_bytes(old)
    idx = TimeIndex(path, 0, 1200)
    idx.reset(lazily=True)
    idx.keep_final_entry(1000, 3)
    assert idx.entries() == [(1000, 3)]
    idx.flush(fsync=False)
    assert path.read_bytes() == old
