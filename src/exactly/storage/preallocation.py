"""Preallocation (topic config `preallocate`): the active segment's `.log` is extended ahead of its appends
with fallocate(2), so that the fdatasync after an append does not also have to write the file's new size.

Why: on ext4 an fdatasync that follows an append which grew the file commits the size change to the
journal; one that follows a write inside the file's length does not. On this project's VM (ext4 on
virtio), a 120-byte append then fdatasync, 2,000 times (`python -m tools.fsync_grow`): 109-123 µs p50 and
50-59 µs of CPU per sync when the file grows, 77-86 µs and 32-37 µs inside a fallocate'd range;
fallocate with FALLOC_FL_KEEP_SIZE (the size still grows) saved nothing. The coordinators' internal topics
have `preallocate=true` (topic_manager.py): each EndTxn, AddPartitionsToTxn and OffsetCommit waits on such
a small sync.

How: when an append would pass the file's length, the segment allocates to the append's end plus its own
size, at least `MIN_AHEAD` and at most `MAX_AHEAD`, never past `segment.bytes`. A small partition costs
`MIN_AHEAD` of disk, a busy one one fallocate per `MAX_AHEAD` bytes. Kafka's `preallocate` allocates a
whole segment (`segment.bytes`) at its creation, which for 50 partitions of 100 MiB segments is 5 GB.

The file then ends past its last batch, in zeros. The segment keeps its logical size (`LogSegment.size`)
and everything reads within it; a segment that stops being active is trimmed to it (roll, clean shutdown).
After a crash, recovery stops at the zeros and trims them without calling them invalid data (segment.py).
A file system without fallocate (EOPNOTSUPP) turns it off for the process, logged once; any other failure
(a full disk) skips it for that append, which then fails or not as it would have.
"""

from __future__ import annotations

import ctypes
import errno
import logging
import os
from collections.abc import Callable

from exactly.storage import files

log = logging.getLogger(__name__)

#: the least a segment allocates ahead of its appends
MIN_AHEAD = 16 * 1024
#: the most
MAX_AHEAD = 4 * 1024 * 1024


class Preallocation:
    """fallocate(2) ahead of appends; none at all once a file system said it has none."""

    __slots__ = ("_fallocate", "_warned")

    def __init__(self) -> None:
        self._fallocate: Callable[..., int] | None = files.libc_function(
            "fallocate", ctypes.c_int, ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong
        )
        self._warned = False

    @property
    def supported(self) -> bool:
        return self._fallocate is not None

    def extend(self, fd: int, allocated: int, size: int, needed: int, limit: int) -> int:
        """The file behind `fd` is `allocated` bytes long and holds `size` bytes of batches; an append needs
        it `needed` long. Allocates ahead (see the module docstring) and returns the file's new length."""
        fallocate = self._fallocate
        if fallocate is None:
            return allocated
        target = min(needed + min(max(size, MIN_AHEAD), MAX_AHEAD), max(limit, needed))
        if target <= allocated:
            return allocated
        if fallocate(fd, 0, allocated, target - allocated) == 0:
            return target
        err = ctypes.get_errno()
        if err in (errno.EOPNOTSUPP, errno.ENOSYS):
            self._fallocate = None
            log.warning(
                "the file system cannot preallocate (%s): segments grow by their appends", os.strerror(err)
            )
        elif not self._warned:
            self._warned = True
            log.warning("preallocating a segment failed (%s): it grows by its appends", os.strerror(err))
        try:  # a failure part-way may still have grown the file
            return max(allocated, os.fstat(fd).st_size)
        except OSError:
            return allocated


PREALLOCATION = Preallocation()
