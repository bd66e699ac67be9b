"""A byte range of a segment file, to be sent as it is (zero copy) instead of read into memory.

A plaintext Fetch answers whole batches exactly as they lie in the segment file, so the connection can
hand the range to the kernel (`os.sendfile`, file -> socket) instead of `pread`-ing it into a bytes
object and writing that. A `FileSlice` holds its own duplicate of the segment's descriptor: the
segment's may be closed under it by the open-file budget (exactly.storage.file_handles) or a retention
delete before the response is written, and the duplicate keeps the same file (even unlinked) readable.
It is closed once sent (`close`), or when the slice is dropped unsent.

`len()` is its size, so response encoding counts it like any records chunk; `read()` copies it into
memory for a connection that cannot send files (TLS).
"""

from __future__ import annotations

import os

__all__ = ["FileSlice"]


class FileSlice:
    __slots__ = ("_fd", "position", "size")

    def __init__(self, fd: int, position: int, size: int) -> None:
        """`fd` is duplicated: the caller keeps its own."""
        self._fd = os.dup(fd)
        self.position = position
        self.size = size

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
            os.close(fd)

    def __del__(self) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"FileSlice(position={self.position}, size={self.size})"
