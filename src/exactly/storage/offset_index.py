"""Sparse offset index of one segment (Kafka's `OffsetIndex`).

On-disk format (`<base>.index`), a flat array of 8-byte big-endian entries, no header:

    relative_offset  uint32   last offset of an indexed batch, minus the segment's base offset
    position         uint32   byte position of that batch in the segment's `.log`

Entries are strictly increasing in both fields. An entry is added every `index.interval.bytes` of log. To
find offset `o`, take the last entry whose offset is <= `o` and scan batch headers forward from its
position (the indexed batch ends at or before `o`, so `o` cannot be earlier).

The index is derived data: it is held in memory (two `array`s), appended to its file lazily (written on
flush/close), checked when loaded and rebuilt from the `.log` whenever it is missing or inconsistent.
"""

from __future__ import annotations

import sys
from array import array
from bisect import bisect_right
from pathlib import Path

from exactly.storage.index_file import IndexFile

ENTRY_SIZE = 8


class OffsetIndex(IndexFile):
    __slots__ = (
        "_flushed_entries",
        "_offsets",
        "_positions",
        "_rewrite",
        "_unsynced",
        "base_offset",
        "max_entries",
        "path",
    )

    def __init__(self, path: Path, base_offset: int, max_index_bytes: int) -> None:
        super().__init__(path)
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_bytes // ENTRY_SIZE)
        self._offsets = array("I")  # relative offsets
        self._positions = array("I")
        self._flushed_entries = 0

    # -- loading ------------------------------------------------------------------------------------------

    @classmethod
    def load(cls, path: Path, base_offset: int, max_index_bytes: int, log_size: int) -> OffsetIndex | None:
        """Read and check an existing index; None when it is missing or not trustworthy."""
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        if len(data) % ENTRY_SIZE:
            return None
        idx = cls(path, base_offset, max_index_bytes)
        both = array("I")
        both.frombytes(data)
        if sys.byteorder == "little":
            both.byteswap()
        offsets = both[0::2]
        positions = both[1::2]
        if len(offsets) > 0:
            if positions[-1] >= max(log_size, 1) or not _strictly_increasing(offsets):
                return None
            if not _strictly_increasing(positions):
                return None
        idx._offsets = offsets
        idx._positions = positions
        idx._flushed_entries = len(offsets)
        idx._unsynced = False  # read back from the file: nothing of it waits for an fsync
        return idx

    # -- queries ------------------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._offsets)

    @property
    def is_full(self) -> bool:
        return len(self._offsets) >= self.max_entries

    @property
    def last_offset(self) -> int:
        """Largest indexed offset (the base offset when empty)."""
        return self.base_offset + self._offsets[-1] if self._offsets else self.base_offset

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the last entry with offset <= `offset`; (base_offset, 0) if none."""
        rel = offset - self.base_offset
        if rel < 0 or not self._offsets:
            return self.base_offset, 0
        i = bisect_right(self._offsets, min(rel, 0xFFFFFFFF)) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self._offsets[i], self._positions[i]

    def entries(self) -> list[tuple[int, int]]:
        return [(self.base_offset + o, p) for o, p in zip(self._offsets, self._positions, strict=True)]

    # -- mutation -----------------------------------------------------------------------------------------

    def append(self, offset: int, position: int) -> None:
        rel = offset - self.base_offset
        if self._offsets and (rel <= self._offsets[-1] or position <= self._positions[-1]):
            raise ValueError(f"offset index entry ({offset}, {position}) is not increasing")
        if not 0 <= rel <= 0xFFFFFFFF:
            raise ValueError(f"offset {offset} does not fit in index based at {self.base_offset}")
        self._offsets.append(rel)
        self._positions.append(position)

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose offset is >= `offset`."""
        keep = bisect_right(self._offsets, offset - self.base_offset - 1) if offset > self.base_offset else 0
        if keep < len(self._offsets):
            del self._offsets[keep:]
            del self._positions[keep:]
            if self._flushed_entries > keep:
                self._flushed_entries = keep
                self._truncate_file(keep * ENTRY_SIZE)

    def reset(self, *, lazily: bool = False) -> None:
        """No entries; the file follows now, or `lazily` at the next flush (see index_file)."""
        del self._offsets[:]
        del self._positions[:]
        self._flushed_entries = 0
        self._truncate_file(0, lazily=lazily)

    def flush(self, fsync: bool) -> None:
        """Write entries not yet in the file (and fsync it when asked)."""
        n = len(self._offsets)
        data = b""
        if n > self._flushed_entries:
            both = array("I", bytes(8 * (n - self._flushed_entries)))
            both[0::2] = self._offsets[self._flushed_entries :]
            both[1::2] = self._positions[self._flushed_entries :]
            if sys.byteorder == "little":
                both.byteswap()
            data = both.tobytes()
        self._write(data, self._flushed_entries * ENTRY_SIZE, fsync)
        self._flushed_entries = n


def _strictly_increasing(values: array[int]) -> bool:
    return all(a < b for a, b in zip(values, values[1:], strict=False))  # noqa: RUF007
