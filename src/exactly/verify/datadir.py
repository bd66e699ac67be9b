"""Where a verification run's broker keeps its data, and what the disk faults need of it.

    run dir/
      disk/               a size-limited tmpfs (only when the disk-full fault is on and we are root)
        data/             the broker's data directory
        .ballast          what `disk-full` writes to fill the file system when it cannot shrink it
      data/               the broker's data directory (no tmpfs), or its copy once the tmpfs is unmounted
      fsync.ledger        the broker's fsync ledger (`exactly.debug.fsync.ledger`: one line per fsync of a
                          data file, `<path relative to the data dir>\\t<length synced>`), which `power-loss`
                          replays; outside the tmpfs so that a full disk cannot stop it

The tmpfs needs root and `mount`; without it the disk-full fault records itself as skipped.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from pathlib import Path

from exactly.verify.disk import DiskLimit

#: the tmpfs's size limit: a bound, not a reservation (an hour of the default workloads writes ~200 MiB)
TMPFS_BYTES = 2 << 30


class DataDir:
    def __init__(self, run_dir: Path, size_limited: bool) -> None:
        self.run_dir = run_dir
        self.limit: DiskLimit | None = None
        self.ledger = run_dir / "fsync.ledger"
        self.path = run_dir / "data"
        if size_limited:
            self.limit = _mount(run_dir / "disk")
            if self.limit is not None:
                self.path = run_dir / "disk" / "data"
        self.path.mkdir(parents=True, exist_ok=True)

    @property
    def skipped_full(self) -> str | None:
        """Why disk-full cannot run here (None: it can)."""
        return None if self.limit is not None else "the data directory is not on a size-limited tmpfs"

    def fill(self, leave: int) -> dict[str, int]:
        """Leave about `leave` bytes free: shrink the tmpfs to what it holds + `leave` (no memory used),
        else write a ballast file."""
        assert self.limit is not None
        for _ in range(5):  # the broker writes on meanwhile: a size below the use is refused
            used = TMPFS_BYTES - self.limit.free_bytes()
            with contextlib.suppress(subprocess.CalledProcessError):
                self.limit.resize(used + leave)
                return {"size": used + leave}
        return {"ballast": self.limit.fill(leave)}

    def free(self) -> None:
        assert self.limit is not None
        self.limit.resize(TMPFS_BYTES)
        self.limit.free()

    def settings(self) -> list[str]:
        return [f"exactly.debug.fsync.ledger={self.ledger}"]

    def close(self) -> None:
        """Copy the data out of the tmpfs (the run dir keeps it) and unmount it; the broker must be down."""
        if self.limit is None:
            return
        self.free()
        with contextlib.suppress(OSError):
            shutil.copytree(self.path, self.run_dir / "data", dirs_exist_ok=True)
        self.limit.unmount()
        self.limit = None


def _mount(directory: Path) -> DiskLimit | None:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return None
    limit = DiskLimit(directory, TMPFS_BYTES)
    try:
        limit.mount()
    except Exception:  # noqa: BLE001 (no tmpfs here: the run goes on without disk-full)
        return None
    return limit
