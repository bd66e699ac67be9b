"""The file handling the three index kinds (.index, .timeindex, .txnindex) share: a lazily opened file
descriptor, close, rename and truncate. Each index keeps its entries in memory and codes its own format."""

from __future__ import annotations

import os
from pathlib import Path

from exactly.storage import files


class IndexFile:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd = -1

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def rename_to(self, path: Path) -> None:
        files.replace(self.path, path)
        self.path = path

    def _open(self) -> int:
        if self._fd < 0:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        return self._fd

    def _truncate_file(self, size: int) -> None:
        os.ftruncate(self._open(), size)
        files.note_length(self.path, size)
