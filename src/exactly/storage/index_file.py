"""The file handling the three index kinds (.index, .timeindex, .txnindex) share: write, fsync, rename and
truncate. Each index keeps its entries in memory and codes its own format, so its file is only written at
a flush: the file is opened for that write and closed again, and an index at rest holds no file
descriptor (a partition at rest costs one, its active segment's log: issue 14's descriptor budget).

An empty index has no file: the file is made by the first write of entries (creating a partition makes one
file, its log; stopping does not make empty index files either). `LogSegment.load_indexes` reads a missing
file as empty where that is right: always for the transaction index (as Kafka), and for the offset and
time indexes of a segment too small to have had an entry. Start-up
recovery resets the indexes of the recovered segments `lazily`: the file keeps its bytes until the next
write rewrites it from the start and cuts it to the written length, so an index that comes out the same
costs a write and no ftruncate (ftruncate of a non-empty file took ~0.9 ms here, once per partition)."""

from __future__ import annotations

import os
from pathlib import Path

from exactly.storage import files


class IndexFile:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._unsynced = False  # written since the last fsync
        self._rewrite = False  # reset lazily: the next write starts at 0 and cuts the file to its length

    def close(self) -> None:
        """Nothing to close between flushes; kept for the segment's close path."""

    def rename_to(self, path: Path) -> None:
        files.replace(self.path, path)
        self.path = path

    def _write(self, data: bytes, position: int, fsync: bool) -> None:
        """Write `data` at `position` (creating the file) and fsync when asked, in one open/close."""
        if not data and not (fsync and self._unsynced) and not self._rewrite:
            return
        if not data and position == 0 and not os.path.exists(self.path):
            self._rewrite = self._unsynced = False  # empty and no file: nothing to write, cut or sync
            return
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if data:
                os.pwrite(fd, data, position)
                self._unsynced = True
            if self._rewrite:
                end = position + len(data)
                if os.fstat(fd).st_size != end:
                    os.ftruncate(fd, end)
                    files.note_length(self.path, end)
                    self._unsynced = True
                self._rewrite = False
            if fsync:
                files.fsync(fd, self.path)
                self._unsynced = False
        finally:
            os.close(fd)

    def _truncate_file(self, size: int, *, lazily: bool = False) -> None:
        """Truncate the file to `size` bytes: at once (a missing file stays missing when `size` is 0, a file
        already that size is left alone), or `lazily` at the next write (which starts at `size`)."""
        if lazily:
            self._rewrite = True
            return
        try:
            already = os.stat(self.path).st_size == size
        except FileNotFoundError:
            if size == 0:  # an empty index needs no file
                return
            already = False
        if already:
            self._unsynced = True
            files.note_length(self.path, size)
            return
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            os.ftruncate(fd, size)
        finally:
            os.close(fd)
        self._unsynced = True
        files.note_length(self.path, size)
