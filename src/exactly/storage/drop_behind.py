"""Drop-behind: after a segment's `.log` is fsynced, the page cache is told to forget what lies more than
`window` bytes behind its synced end (`posix_fadvise(POSIX_FADV_DONTNEED)`), so that the next appends
reuse the pages just freed instead of growing the cache into memory the machine has not touched lately.

Why (`exactly.log.drop.behind.bytes`, off by default, as Kafka has no such knob): in a VM that returns
free memory to its host (virtio-balloon free page reporting: Firecracker, cloud-hypervisor), the first
write into a page the host took back faults on the host, and the guest pays it in the kernel's copy. On
this project's 2-core VM a plain writer (1 MiB writes, fdatasync each) costs 0.7 s of CPU for its first GB
and 1.9-2.6 s for every later one; with a 64 MiB window it costs 0.31-0.33 s per GB at ~4 x the rate
(bench/cpu-profile.md). On a machine whose free memory stays backed, dropping saves nothing.

The cost: a consumer more than `window` bytes behind a partition's log end reads from the disk instead of
the page cache (on that VM ~1 s of CPU per GB read the first time, 0.04 s cached). Consumers at the tail
read within the window. What is dropped is only ever clean (synced) data: after a segment's own fsync,
or for a group of logs synced by one syncfs (`files.synced_together`) after that sync
(`PartitionLog.drop_behind`).

The advice is per segment: a rolled segment keeps its last `window` bytes cached until the kernel evicts
them, as any page would be. Advice that fails is logged once and otherwise ignored: it is only advice.
"""

from __future__ import annotations

import logging
import os

log = logging.getLogger(__name__)

#: what is dropped ends on a multiple of this. The page cache holds a file in folios of up to 2 MiB, each
#: aligned to its size; a folio across the end of the range is kept, then lies across the start of the
#: next range and is kept again (a broker left ~9 % of its dropped ranges cached before the ends were
#: aligned). It batches the calls too: one per 2 MiB, not one per fsynced 1 KiB append.
ALIGN = 2 << 20


class DropBehind:
    """The broker's one drop-behind window (`exactly.log.drop.behind.bytes`; -1: off)."""

    __slots__ = ("_warned", "window")

    def __init__(self, window: int = -1) -> None:
        self.window = window
        self._warned = False

    def after_sync(self, fd: int, dropped: int, synced: int) -> int:
        """`synced` bytes of the file behind `fd` are durable and everything below `dropped` was already
        dropped: drop up to `synced - window`, rounded down to `ALIGN`. Returns the new `dropped`."""
        if self.window < 0:
            return dropped
        end = (synced - self.window) // ALIGN * ALIGN
        if end <= dropped:
            return dropped
        try:
            os.posix_fadvise(fd, dropped, end - dropped, os.POSIX_FADV_DONTNEED)
        except OSError as e:
            if not self._warned:
                self._warned = True
                log.warning("drop-behind advice failed (%s): the page cache keeps what it holds", e)
            return dropped
        return end


#: set once at the broker's start (server.py), like file_handles.HANDLES
DROP_BEHIND = DropBehind()
