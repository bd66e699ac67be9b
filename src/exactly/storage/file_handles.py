"""Open segment files as a budget: an LRU of the `.log` descriptors of every segment of every partition.

A segment opens its `.log` when first used and keeps it open while it is used; when more than `budget`
segment files are open, the least recently used ones are closed, and reopened (by path) on their next use.
So descriptors are a budget, not a function of the partition count: 100,000 partitions hold at most
`budget` descriptors between them, and connections keep the rest of the process's open-file limit: by
default a quarter of the limit goes to segment files and three quarters to connections and the files
opened for a moment (indexes, checkpoints, snapshots); at 20,000 that is 5,000 segment files and room for
10,000 idle connections with clients still working (with half, 10,000 connections and 10,000 open
segments used up the limit and a checkpoint write failed with EMFILE). (Indexes hold no descriptor at
rest: see index_file.py.)

Threads: the event loop's thread (the main thread) does nearly all segment I/O and is the only one that
evicts; it uses a descriptor right after asking for it, without yielding, so nothing it holds is closed
under it. The flush threads (fsync) hold the segment's `io_lock` while they use its descriptor, and the
evictor skips a segment whose `io_lock` it cannot take; a flush thread that reopens an evicted segment
never evicts (the budget may be exceeded until the main thread next opens a file).
"""

from __future__ import annotations

import os
import resource
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Protocol

UNLIMITED = 1 << 40


class HasFile(Protocol):
    io_lock: threading.Lock

    def _evicted(self) -> None: ...


class FileHandles:
    def __init__(self, budget: int = UNLIMITED) -> None:
        self.budget = budget
        self._open: OrderedDict[int, tuple[HasFile, int]] = OrderedDict()  # id(owner) -> (owner, fd)
        self._lock = threading.Lock()
        self.evictions = 0
        self.hits = 0  # `touch` of a segment whose file is open (the LRU had it)
        self.opens = 0  # files opened or adopted: each one a miss (first use, or reopened after eviction)

    @property
    def open_count(self) -> int:
        return len(self._open)

    def open(self, owner: HasFile, path: Path | str, flags: int, mode: int = 0o644) -> int:
        """Open `path` for `owner` (evicting least-recently-used files beyond the budget)."""
        return self.adopt(owner, os.open(path, flags, mode))

    def adopt(self, owner: HasFile, fd: int) -> int:
        """Count `fd`, opened by `owner`, in the budget (evicting others beyond it)."""
        with self._lock:
            self._open[id(owner)] = (owner, fd)
            self.opens += 1
        if threading.current_thread() is threading.main_thread():
            self._evict_beyond_budget(owner)
        return fd

    def touch(self, owner: HasFile) -> None:
        key = id(owner)
        with self._lock:
            if key in self._open:
                self._open.move_to_end(key)
                self.hits += 1

    def forget(self, owner: HasFile) -> None:
        """`owner` closes its descriptor itself (segment close/delete)."""
        with self._lock:
            self._open.pop(id(owner), None)

    def set_budget(self, budget: int) -> None:
        """A new budget; files beyond it are closed now (least recently used first)."""
        self.budget = budget
        self._evict_beyond_budget(None)

    def _evict_beyond_budget(self, keep: HasFile | None) -> None:
        while True:
            with self._lock:
                if len(self._open) <= self.budget:
                    return
                victim = None
                for key, (owner, fd) in self._open.items():
                    if owner is keep or not owner.io_lock.acquire(blocking=False):
                        continue
                    victim = (key, owner, fd)
                    break
                if victim is None:
                    return  # every other open file is in use by a flush: over budget for now
                key, owner, fd = victim
                del self._open[key]
            try:
                os.close(fd)
                owner._evicted()
                self.evictions += 1
            finally:
                owner.io_lock.release()


def open_files_budget(configured: int) -> int:
    """`exactly.log.max.open.files`, or a quarter of the process's open-file limit (at least 16) for -1."""
    if configured > 0:
        return configured
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return UNLIMITED
    return max(16, soft // 4)


#: the broker's one budget (`exactly.log.max.open.files`, set at start); unlimited until then
HANDLES = FileHandles()
