"""What an fdatasync costs after a small append that grows the file, against one inside a preallocated
length (storage/preallocation.py): `python -m tools.fsync_grow [DIR] [N]`.

Each mode writes N 120-byte records one after another into a fresh file in DIR (default: the current
directory, so that it measures the file system the broker's data is on), each followed by fdatasync, and
prints the sync's p50 and p90 and the process's CPU per record:

- `append`: the file grows by each write (what a segment without `preallocate` does);
- `fallocate`: the file was fallocate'd first, the writes land inside its length;
- `keep_size`: fallocate(FALLOC_FL_KEEP_SIZE): blocks allocated, the size still grows with each write.
"""

from __future__ import annotations

import ctypes
import os
import sys
import time
from pathlib import Path

RECORD = b"x" * 120
FALLOC_FL_KEEP_SIZE = 1


def measure(directory: Path, mode: str, n: int) -> tuple[float, float, float]:
    path = directory / f".fsync-grow-{mode}-{os.getpid()}"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        length = n * len(RECORD) + 4096
        if mode != "append":
            libc = ctypes.CDLL(None, use_errno=True)
            flags = FALLOC_FL_KEEP_SIZE if mode == "keep_size" else 0
            if libc.fallocate(fd, flags, ctypes.c_longlong(0), ctypes.c_longlong(length)) != 0:
                raise OSError(ctypes.get_errno(), "fallocate")
            os.fsync(fd)
        syncs: list[float] = []
        cpu = time.process_time()
        for i in range(n):
            os.pwrite(fd, RECORD, i * len(RECORD))
            start = time.perf_counter()
            os.fdatasync(fd)
            syncs.append(time.perf_counter() - start)
        cpu = time.process_time() - cpu
    finally:
        os.close(fd)
        path.unlink()
    syncs.sort()
    return syncs[n // 2], syncs[n * 9 // 10], cpu / n


def main() -> None:
    directory = Path(sys.argv[1]) if len(sys.argv) > 1 else Path.cwd()
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    for _ in range(2):
        for mode in ("append", "fallocate", "keep_size"):
            p50, p90, cpu = measure(directory, mode, n)
            print(
                f"{mode:10s} p50 {p50 * 1e6:6.1f} us  p90 {p90 * 1e6:6.1f} us  cpu/sync {cpu * 1e6:5.1f} us"
            )


if __name__ == "__main__":
    main()
