"""The file handling the three index kinds (.index, .timeindex, .txnindex) share: write, fsync, rename and
truncate. Each index keeps its entries in memory and codes its own format, so its file is only written at
a flush: the file is opened for that write and closed again, and an index at rest holds no file
descriptor (a partition at rest costs one, its active segment's log: issue 14's descriptor budget)."""

from __future__ import annotations

import os
from pathlib import Path

from exactly.storage import files


class IndexFile:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._unsynced = True  # written (or not yet created) since the last fsync

    def close(self) -> None:
        """Nothing to close between flushes; kept for the segment's close path."""

    def rename_to(self, path: Path) -> None:
        files.replace(self.path, path)
        self.path = path

    def _write(self, data: bytes, position: int, fsync: bool) -> None:
        """Write `data` at `position` (creating the file) and fsync when asked, in one open/close."""
        if not data and not (fsync and self._unsynced):
            return
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if data:
                os.pwrite(fd, data, position)
                self._unsynced = True
            if fsync:
                files.fsync(fd, self.path)
                self._unsynced = False
        finally:
            os.close(fd)

    def _truncate_file(self, size: int) -> None:
        """Truncate (or create) the file to `size` bytes; a file already that size is left alone (start-up
        recovery resets every index of the recovered segments, most of them empty: no open/ftruncate)."""
        try:
            already = os.stat(self.path).st_size == size
        except FileNotFoundError:
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
