"""A byte range of a segment file, to be sent as it is (zero copy) instead of read into memory.

A plaintext Fetch answers whole batches exactly as they lie in the segment file, so the connection can
hand the range to the kernel (`os.sendfile`, file -> socket) instead of `pread`-ing it into a bytes
object and writing that. A `FileSlice` holds its own duplicate of the segment's descriptor: the
segment's may be closed under it by the open-file budget (exactly.storage.file_handles) or a retention
delete before the response is written, and the duplicate keeps the same file (even unlinked) readable.
It is closed once sent (`close`), or when the slice is dropped unsent.

`len()` is its size, so response encoding counts it like any records chunk; `read()` copies it into
memory for a connection that cannot send files (TLS).

The duplicates are descriptors the open-file budget (exactly.broker.connection_slots) does not count, so
at most `MAX_OPEN` slices are open at once: past that, or when `dup` fails (EMFILE), `open` answers None
and the reader copies the bytes instead (a Fetch of 200 partitions under a 512-descriptor limit would
otherwise take 200 more descriptors at once).
"""

from __future__ import annotations

import os
from typing import ClassVar

__all__ = ["FileSlice"]


MAX_OPEN = 32  # FileSlices open at once, each holding one duplicated descriptor


class FileSlice:
    __slots__ = ("_fd", "position", "size")

    open_count: ClassVar[int] = 0  # slices not closed yet (the event loop's thread only)

    def __init__(self, fd: int, position: int, size: int) -> None:
        """`fd` is duplicated: the caller keeps its own. Raises OSError when it cannot be."""
        self._fd = -1
        self._fd = os.dup(fd)
        FileSlice.open_count += 1
        self.position = position
        self.size = size

    @classmethod
    def open(cls, fd: int, position: int, size: int) -> FileSlice | None:
        """A slice, or None when `MAX_OPEN` are open or the descriptor cannot be duplicated (copy the bytes
        instead)."""
        if cls.open_count >= MAX_OPEN:
            return None
        try:
            return cls(fd, position, size)
        except OSError:
            return None

    @property
    def fd(self) -> int:
        return self._fd

    def __len__(self) -> int:
        return self.size

    def read(self) -> bytes:
        """The bytes themselves (a copy); raises OSError when the file no longer holds them all."""
        data = os.pread(self._fd, self.size, self.position)
        if len(data) != self.size:
            raise OSError(f"segment file truncated under a fetch: {len(data)} of {self.size} bytes left")
        return data

    def close(self) -> None:
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            FileSlice.open_count -= 1
            os.close(fd)

    def __del__(self) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"FileSlice(position={self.position}, size={self.size})"
