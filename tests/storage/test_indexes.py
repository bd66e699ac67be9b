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


def test_reset_empties_creates_and_leaves_an_empty_file_alone(tmp_path: Path) -> None:
    # A written index is emptied; a missing one is created empty; an already-empty one is not rewritten.
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
    assert path.exists()
    assert path.read_bytes() == b""
    idx.append(9, 100)
    idx.flush(fsync=False)
    assert path.read_bytes() == bytes.fromhex("0000000900000064")  # an append after the resets lands
