"""File names inside a partition directory (Kafka's `LogFileUtils`).

A partition lives in `<data_dir>/<topic>-<partition>/`. Every segment is named by its base offset as
20 zero-padded decimal digits:

    00000000000000000000.log        record batches, exactly as stored
    00000000000000000000.index      sparse offset index
    00000000000000000000.timeindex  sparse time index
    00000000000000000000.txnindex   aborted transactions whose ABORT marker lies in this segment
    00000000000000000042.snapshot   producer state as of offset 42

Transient suffixes: `.cleaned` (compaction output being written), `.swap` (compaction output ready to
replace its sources), `.deleted` (scheduled for removal). `<data_dir>/.exactly_cleanshutdown` marks a
clean shutdown; `recovery-point-offset-checkpoint` and `log-start-offset-checkpoint` hold per-partition
offsets (see checkpoint.py).
"""

from __future__ import annotations

import os
from pathlib import Path

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
SNAPSHOT_SUFFIX = ".snapshot"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
DELETED_SUFFIX = ".deleted"
CLEAN_SHUTDOWN_FILE = ".exactly_cleanshutdown"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_CHECKPOINT = "log-start-offset-checkpoint"


def filename_prefix(offset: int) -> str:
    return f"{offset:020d}"


def log_file(directory: Path, offset: int) -> Path:
    return directory / (filename_prefix(offset) + LOG_SUFFIX)


def index_file(directory: Path, offset: int) -> Path:
    return directory / (filename_prefix(offset) + INDEX_SUFFIX)


def time_index_file(directory: Path, offset: int) -> Path:
    return directory / (filename_prefix(offset) + TIME_INDEX_SUFFIX)


def txn_index_file(directory: Path, offset: int) -> Path:
    return directory / (filename_prefix(offset) + TXN_INDEX_SUFFIX)


def snapshot_file(directory: Path, offset: int) -> Path:
    return directory / (filename_prefix(offset) + SNAPSHOT_SUFFIX)


def offset_from_name(name: str) -> int | None:
    """The base offset a file name starts with, or None when it is not one of ours."""
    stem = name.split(".", 1)[0]
    if len(stem) != 20 or not stem.isdigit():
        return None
    return int(stem)


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def parse_partition_dir_name(name: str) -> tuple[str, int] | None:
    topic, sep, part = name.rpartition("-")
    if not sep or not topic or not part.isdigit():
        return None
    return topic, int(part)


def fsync_dir(directory: Path) -> None:
    """Make renames/creations/unlinks in `directory` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: Path, data: bytes) -> None:
    """Write `data` to a temp file, fsync it, rename over `path`, fsync the directory."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)
