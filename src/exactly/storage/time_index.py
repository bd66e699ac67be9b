"""Sparse time index of one segment (Kafka's `TimeIndex`).

On-disk format (`<base>.timeindex`), a flat array of 12-byte big-endian entries, no header:

    timestamp        int64    largest batch max-timestamp seen in the segment so far
    relative_offset  uint32   offset of the batch holding that timestamp, minus the base offset

Timestamps are strictly increasing (an entry is only added when the maximum grows); offsets never
decrease. An entry is added alongside each offset-index entry and when a segment is rolled or closed,
so the last entry holds the segment's largest timestamp.

To find the first offset with timestamp >= t: take the last entry with timestamp < t, and scan batches
from its offset (every batch before it has a max timestamp below t). Derived data like the offset index:
written lazily, checked on load, rebuilt when missing or wrong.
"""

from __future__ import annotations

import struct
from bisect import bisect_left
from pathlib import Path

from exactly.storage.index_file import IndexFile

ENTRY_SIZE = 12
_ENTRY = struct.Struct(">qI")


class TimeIndex(IndexFile):
    __slots__ = (
        "_flushed_entries",
        "_offsets",
        "_rewrite",
        "_timestamps",
        "_unsynced",
        "base_offset",
        "max_entries",
        "path",
    )

    def __init__(self, path: Path, base_offset: int, max_index_bytes: int) -> None:
        super().__init__(path)
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_bytes // ENTRY_SIZE)
        self._timestamps: list[int] = []
        self._offsets: list[int] = []  # absolute
        self._flushed_entries = 0

    @classmethod
    def load(cls, path: Path, base_offset: int, max_index_bytes: int, next_offset: int) -> TimeIndex | None:
        """Read and check an existing index; None when missing or not trustworthy."""
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        if len(data) % ENTRY_SIZE:
            return None
        idx = cls(path, base_offset, max_index_bytes)
        prev_ts, prev_off = -(1 << 63), base_offset
        for ts, rel in _ENTRY.iter_unpack(data):
            off = base_offset + rel
            if ts <= prev_ts or off < prev_off or off >= next_offset:
                return None
            idx._timestamps.append(ts)
            idx._offsets.append(off)
            prev_ts, prev_off = ts, off
        idx._flushed_entries = len(idx._offsets)
        idx._unsynced = False  # read back from the file: nothing of it waits for an fsync
        return idx

    def __len__(self) -> int:
        return len(self._offsets)

    @property
    def is_full(self) -> bool:
        return len(self._offsets) >= self.max_entries

    @property
    def last_entry(self) -> tuple[int, int] | None:
        return (self._timestamps[-1], self._offsets[-1]) if self._offsets else None

    def lookup_before(self, timestamp: int) -> int:
        """Offset of the last entry whose timestamp is < `timestamp`, or the base offset."""
        i = bisect_left(self._timestamps, timestamp) - 1
        return self._offsets[i] if i >= 0 else self.base_offset

    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._timestamps, self._offsets, strict=True))

    def keep_final_entry(self, timestamp: int, offset: int) -> None:
        """After a lazy reset and a rebuild: when the file still holds the rebuilt entries plus the entry a
        clean close adds (`timestamp`, `offset`: the segment's largest timestamp), keep that entry too, so
        that the rewrite finds the file unchanged (no ftruncate for every recovered partition)."""
        if not self._rewrite or (self._timestamps and timestamp <= self._timestamps[-1]):
            return
        entries = [*zip(self._timestamps, self._offsets, strict=True), (timestamp, offset)]
        expected = b"".join(_ENTRY.pack(ts, off - self.base_offset) for ts, off in entries)
        try:
            with open(self.path, "rb") as f:
                found = f.read(len(expected) + 1)
        except FileNotFoundError:
            return
        if found == expected:
            self.maybe_append(timestamp, offset)

    def maybe_append(self, timestamp: int, offset: int) -> None:
        if self._timestamps and timestamp <= self._timestamps[-1]:
            return
        if self._offsets and offset < self._offsets[-1]:
            raise ValueError("time index offsets must not decrease")
        self._timestamps.append(timestamp)
        self._offsets.append(offset)

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose offset is >= `offset`."""
        keep = len(self._offsets)
        while keep and self._offsets[keep - 1] >= offset:
            keep -= 1
        if keep < len(self._offsets):
            del self._offsets[keep:]
            del self._timestamps[keep:]
            if self._flushed_entries > keep:
                self._flushed_entries = keep
                self._truncate_file(keep * ENTRY_SIZE)

    def reset(self, *, lazily: bool = False) -> None:
        """No entries; the file follows now, or `lazily` at the next flush (see index_file)."""
        self._offsets.clear()
        self._timestamps.clear()
        self._flushed_entries = 0
        self._truncate_file(0, lazily=lazily)

    def flush(self, fsync: bool) -> None:
        n = len(self._offsets)
        data = b"".join(
            _ENTRY.pack(ts, off - self.base_offset)
            for ts, off in zip(
                self._timestamps[self._flushed_entries :],
                self._offsets[self._flushed_entries :],
                strict=True,
            )
        )
        self._write(data, self._flushed_entries * ENTRY_SIZE, fsync)
        self._flushed_entries = n
