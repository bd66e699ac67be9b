"""Aborted-transaction index of one segment (Kafka's `TransactionIndex` / `AbortedTxn`).

The index holds one entry per aborted transaction whose ABORT marker was written into this segment. It
is what a read_committed fetch uses to tell the client which producers' data to drop.

On-disk format (`<base>.txnindex`), a flat array of 34-byte big-endian entries, no header:

    version             int16   0
    producer_id         int64
    first_offset        int64   offset of the transaction's first data batch
    last_offset         int64   offset of the ABORT marker
    last_stable_offset  int64   the partition's LSO right after the abort was completed

Unlike the offset and time indexes this file is not derivable from the segment alone (the transaction's
first offset may lie in an earlier segment), so it is fsynced with its segment and only rebuilt by a full
recovery (which replays producer state from before the segment). exactly always creates the file (empty
when no transaction was aborted) so that a missing file is noticed.

Fetch rule (Kafka `LocalLog.collectAbortedTransactions`): for a read of [fetch_offset, upper_bound) the
client needs every entry with `last_offset >= fetch_offset and first_offset < upper_bound`; entries are in
marker order, and scanning can stop at the first entry whose `last_stable_offset >= upper_bound`.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

from exactly.storage.index_file import IndexFile

ENTRY_SIZE = 34
VERSION = 0
_ENTRY = struct.Struct(">hqqqq")


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return _ENTRY.pack(
            VERSION, self.producer_id, self.first_offset, self.last_offset, self.last_stable_offset
        )


@dataclass(frozen=True, slots=True)
class FetchAbortedTxn:
    """What a Fetch response carries for one aborted transaction."""

    producer_id: int
    first_offset: int


class TransactionIndex(IndexFile):
    __slots__ = ("_entries", "_flushed_entries", "_rewrite", "_unsynced", "base_offset", "path")

    def __init__(self, path: Path, base_offset: int) -> None:
        super().__init__(path)
        self.base_offset = base_offset
        self._entries: list[AbortedTxn] = []
        self._flushed_entries = 0

    @classmethod
    def load(cls, path: Path, base_offset: int) -> TransactionIndex | None:
        """Read an existing index (a missing file is an empty index, as in Kafka: the file is only made for
        the first entry); None when malformed."""
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return cls(path, base_offset)
        if len(data) % ENTRY_SIZE:
            return None
        idx = cls(path, base_offset)
        for version, pid, first, last, lso in _ENTRY.iter_unpack(data):
            if version != VERSION or first > last:
                return None
            idx._entries.append(AbortedTxn(pid, first, last, lso))
        idx._flushed_entries = len(idx._entries)
        idx._unsynced = False  # read back from the file: nothing of it waits for an fsync
        return idx

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def has_pending(self) -> bool:
        return len(self._entries) > self._flushed_entries

    @property
    def entries(self) -> list[AbortedTxn]:
        return list(self._entries)

    def append(self, txn: AbortedTxn) -> None:
        if self._entries and txn.last_offset <= self._entries[-1].last_offset:
            raise ValueError("aborted transactions must be appended in marker order")
        self._entries.append(txn)

    def collect(self, fetch_offset: int, upper_bound: int, out: list[AbortedTxn]) -> bool:
        """Add overlapping entries to `out`; True when no later segment can hold more."""
        for txn in self._entries:
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound:
                out.append(txn)
            if txn.last_stable_offset >= upper_bound:
                return True
        return False

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose marker offset is >= `offset`."""
        keep = len(self._entries)
        while keep and self._entries[keep - 1].last_offset >= offset:
            keep -= 1
        if keep < len(self._entries):
            del self._entries[keep:]
            if self._flushed_entries > keep:
                self._flushed_entries = keep
                self._truncate_file(keep * ENTRY_SIZE)

    def reset(self, *, lazily: bool = False) -> None:
        """No entries; the file follows now, or `lazily` at the next flush (see index_file)."""
        self._entries.clear()
        self._flushed_entries = 0
        self._truncate_file(0, lazily=lazily)

    def flush(self, fsync: bool) -> None:
        n = len(self._entries)
        data = b"".join(t.encode() for t in self._entries[self._flushed_entries :])
        self._write(data, self._flushed_entries * ENTRY_SIZE, fsync)
        self._flushed_entries = n


def is_aborted(producer_id: int, offset: int, aborted: list[AbortedTxn]) -> bool:
    """The seed's filtering rule: a record is dropped when an aborted entry of its producer covers it."""
    return any(t.producer_id == producer_id and t.first_offset <= offset <= t.last_offset for t in aborted)
