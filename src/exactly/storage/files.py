"""File names inside a partition directory (Kafka's `LogFileUtils`).

A partition lives in `<data_dir>/<topic>-<partition>/`. Every segment is named by its base offset as
20 zero-padded decimal digits:

    00000000000000000000.log        record batches, exactly as stored
    00000000000000000000.index      sparse offset index
    00000000000000000000.timeindex  sparse time index
    00000000000000000000.txnindex   aborted transactions whose ABORT marker lies in this segment
    00000000000000000042.snapshot   producer state as of offset 42
    leader-epoch-checkpoint         (epoch, start offset) of each leader epoch (see leader_epoch.py)

Transient suffixes: `.cleaned` (compaction output being written), `.swap` (compaction output ready to
replace its sources), `.deleted` (scheduled for removal). `<data_dir>/.exactly_cleanshutdown` marks a
clean shutdown; `recovery-point-offset-checkpoint` and `log-start-offset-checkpoint` hold per-partition
offsets (see checkpoint.py).

fsync ledger (testing only, broker setting `exactly.debug.fsync.ledger=<path>`): every fsync of a data file
goes through `fsync` below, which then appends one line to the ledger (one `write` on an O_APPEND fd, so
lines from several threads never interleave):

    <path relative to the data dir>\t<length>\n        the file was fsynced; its first <length> bytes are
                                                      durable (the size taken just before the fsync)
    <path>\t<length>\ttruncated\n                      the file was truncated (or created with O_TRUNC, 0):
                                                      at most <length> bytes of it are durable now
    <path>\tdeleted\n                                  the file was unlinked (a path ending in "/": a whole
                                                      directory tree)
    <new path>\tfrom\t<old path>\n                     a rename: the new name has what the old one had

Start-up recovery, creating many partitions and acks=all for many partitions at once would cost an fsync
per file; inside `synced_together(data_dir)` the thread's fsyncs of data files and directories are deferred
and one syncfs(2) of the data dir's file system at the end makes everything durable (10,000 dirty files:
0.13 s, against 1.7 s of fdatasyncs; the ledger then records each of those files at its length at that
moment). Nothing may claim durability inside it: recovery points move after it.

A data file is made durable with fdatasync(2), not fsync(2): fdatasync writes the data and the metadata
needed to read it back (the file's size, its block map), and skips what is not (mtime/ctime). Kafka's
`FileChannel.force(true)` syncs the timestamps too, which recovery never reads. For a log segment, which
only ever grows by appends (not preallocated), every flush changes its size, so the inode is written
either way and the two cost the same (measured on ext4: ~0.42 s of system time per GB written and synced
in 735 KB appends for both; preallocating with fallocate(KEEP_SIZE) did not beat it within the noise);
index files written inside their preallocated length, and rewritten checkpoint files of the same size,
are where fdatasync saves the inode write. Directories (renames, new files) keep fsync (`fsync_dir`).

The harness (exactly.verify.disk.power_loss) replays the ledger to know which bytes a power loss may take.
With the setting unset `_ledger` is None and each hook costs one global lookup.

Write failures (ENOSPC, EDQUOT, EIO: any OSError from a write or fsync of a data file) become a KafkaError
KAFKA_STORAGE_ERROR through `storage_error`, which logs one WARNING when the broker goes from writing to
failing (not one per request); `storage_ok` logs once when writes succeed again.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import cast

from exactly.errors import ErrorCode, KafkaError
from exactly.metrics.histogram import SECONDS_BUCKETS, Histogram

log = logging.getLogger(__name__)

# every data-file fsync's latency, in seconds (the broker's metrics export it; flusher threads observe it)
FSYNC_SECONDS = Histogram(SECONDS_BUCKETS, locked=True)

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
HIGH_WATERMARK_CHECKPOINT = "replication-offset-checkpoint"  # a cluster's replicas only (log_manager.py)
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"  # in each partition directory (leader_epoch.py)
META_PROPERTIES = "meta.properties"  # in each log dir: which broker it belongs to (log_manager.py)


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


FUTURE_DIR_SUFFIX = "-future"  # a replica being moved to another log dir (Kafka's LogFileUtils names)
DELETE_DIR_SUFFIX = "-delete"  # a replica's old directory after a move, removed at once or at start-up


def moved_dir_name(topic: str, partition: int, unique: str, suffix: str) -> str:
    """`<topic>-<partition>.<32 hex digits><suffix>`, as Kafka names future and deleted logs."""
    return f"{partition_dir_name(topic, partition)}.{unique}{suffix}"


def parse_moved_dir_name(name: str, suffix: str) -> tuple[str, int] | None:
    """The partition of a `moved_dir_name` with `suffix`, or None."""
    if not name.endswith(suffix):
        return None
    base, dot, unique = name[: -len(suffix)].rpartition(".")
    if not dot or len(unique) != 32 or any(c not in "0123456789abcdef" for c in unique):
        return None
    return parse_partition_dir_name(base)


class _Ledger:
    def __init__(self, path: Path, data_dir: Path) -> None:
        self.data_dir = os.path.abspath(data_dir)
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def name(self, path: Path | str) -> str:
        full = os.path.abspath(path)
        rel = os.path.relpath(full, self.data_dir)
        return full if rel.startswith("..") else rel

    def write(self, *fields: str) -> None:
        os.write(self.fd, ("\t".join(fields) + "\n").encode())


_ledger: _Ledger | None = None


def open_fsync_ledger(path: Path, data_dir: Path) -> None:
    """Start recording fsyncs of files under `data_dir` to `path` (testing only)."""
    global _ledger
    close_fsync_ledger()
    _ledger = _Ledger(path, data_dir)


def close_fsync_ledger() -> None:
    global _ledger
    if _ledger is not None:
        os.close(_ledger.fd)
        _ledger = None


class _Deferral(threading.local):
    # inside synced_together(): the files whose fsync waits for its end -> the length they hold data to
    # (None: the file's size)
    files: dict[str, int | None] | None = None


_deferral = _Deferral()


def libc_function(name: str, *argtypes: type[ctypes._SimpleCData[int]]) -> Callable[..., int] | None:
    """The C library's `name` (errno kept for `ctypes.get_errno`), returning an int; None where the
    platform has none."""
    try:
        fn = getattr(ctypes.CDLL(None, use_errno=True), name)
    except (AttributeError, OSError):
        return None
    fn.argtypes = list(argtypes)
    fn.restype = ctypes.c_int
    return cast(Callable[..., int], fn)


_syncfs = libc_function("syncfs", ctypes.c_int)


def sync_filesystem(directory: Path | None) -> None:
    """syncfs(2) of the file system holding `directory` (sync(2) where syncfs is missing or no directory is
    given). Raises OSError when the kernel reports a write-back error."""
    if directory is None or _syncfs is None:
        os.sync()
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        if _syncfs(fd) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err), str(directory))
    finally:
        os.close(fd)


def _one_per_file_system(directories: Sequence[Path]) -> list[Path]:
    """The first of `directories` on each file system (by st_dev); one that cannot be stat-ed is skipped."""
    seen: set[int] = set()
    chosen: list[Path] = []
    for directory in directories:
        try:
            dev = os.stat(directory).st_dev
        except OSError:
            continue  # an offline log dir: nothing of it to sync
        if dev not in seen:
            seen.add(dev)
            chosen.append(directory)
    return chosen


def deferring() -> bool:
    """True inside `synced_together()` on this thread."""
    return _deferral.files is not None


@contextlib.contextmanager
def synced_together(directory: Path | Sequence[Path] | None = None) -> Iterator[None]:
    """Defer this thread's fsyncs (data files and directories) to one syncfs(2) of `directory`'s file system
    (sync(2) without one) at the end of the block; several directories (a broker's log dirs): one syncfs
    per file system they are on. Thread-local: other threads' fsyncs are not deferred.
    Nothing inside may claim durability before the block ends."""
    if _deferral.files is not None:
        yield
        return
    _deferral.files = {}
    try:
        yield
    finally:
        pending, _deferral.files = _deferral.files, None
        if directory is None or isinstance(directory, Path):
            sync_filesystem(directory)
        else:
            for each in _one_per_file_system(directory):
                sync_filesystem(each)
        ledger = _ledger
        if ledger is not None:
            for path, length in sorted(pending.items()):
                with contextlib.suppress(OSError):
                    ledger.write(ledger.name(path), str(os.stat(path).st_size if length is None else length))


def defer_fsync(path: Path | str, length: int | None = None) -> None:
    """Inside `synced_together()`: `path` becomes durable at the block's end (recorded for the ledger, with
    `length` as in `fsync`)."""
    deferred = _deferral.files
    assert deferred is not None, "defer_fsync outside synced_together"
    _defer(deferred, str(path), length)


def _defer(deferred: dict[str, int | None], path: str, length: int | None) -> None:
    if length is None or path not in deferred:
        deferred[path] = length
    else:
        known = deferred[path]
        deferred[path] = None if known is None else max(known, length)


_sync_data = getattr(os, "fdatasync", os.fsync)  # macOS has no fdatasync


def note_data_length(path: Path | str, length: int) -> None:
    """The next fsync of `path` by this thread makes its first `length` bytes durable, not its whole size
    (a preallocated segment ends in zeros past its batches): for the ledger only."""
    if _ledger is not None:
        _data_lengths.lengths[str(path)] = length


class _DataLengths(threading.local):
    def __init__(self) -> None:
        self.lengths: dict[str, int] = {}


_data_lengths = _DataLengths()


def fsync(fd: int, path: Path | str) -> None:
    """fdatasync (see the module docstring) of the data file `path` open as `fd`; every data-file sync in
    storage comes through here."""
    deferred = _deferral.files
    if deferred is not None:
        deferred[str(path)] = None
        return
    ledger = _ledger
    if ledger is None:
        start = time.perf_counter()
        _sync_data(fd)
        FSYNC_SECONDS.observe(time.perf_counter() - start)
        return
    length = _data_lengths.lengths.pop(str(path), None)
    if length is None:
        length = os.fstat(fd).st_size
    start = time.perf_counter()
    _sync_data(fd)
    FSYNC_SECONDS.observe(time.perf_counter() - start)
    ledger.write(ledger.name(path), str(length))


def note_length(path: Path | str, length: int) -> None:
    """Record that `path` was truncated (or created) to `length` bytes."""
    ledger = _ledger
    if ledger is not None:
        ledger.write(ledger.name(path), str(length), "truncated")


def note_deleted(path: Path | str, tree: bool = False) -> None:
    ledger = _ledger
    if ledger is not None:
        ledger.write(ledger.name(path) + ("/" if tree else ""), "deleted")


def unlink(path: Path, missing_ok: bool = False) -> None:
    """Path.unlink, recorded in the fsync ledger."""
    path.unlink(missing_ok=missing_ok)
    note_deleted(path)


def replace(src: Path | str, dst: Path | str) -> None:
    """os.replace, recorded in the fsync ledger."""
    os.replace(src, dst)
    deferred = _deferral.files
    if deferred is not None and str(src) in deferred:
        deferred[str(dst)] = deferred.pop(str(src))
    ledger = _ledger
    if ledger is not None:
        ledger.write(ledger.name(dst), "from", ledger.name(src))


_failing = False


def storage_error(e: OSError, what: str) -> KafkaError:
    """The error a write of `what` that raised `e` answers with; the first since the last success logs."""
    global _failing
    if not _failing:
        _failing = True
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            log.warning(
                "disk full: cannot write %s (%s); writes get KAFKA_STORAGE_ERROR until space returns",
                what,
                e.strerror,
            )
        else:
            log.warning("storage error: cannot write %s (%s); writes get KAFKA_STORAGE_ERROR", what, e)
    return KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"cannot write {what}: {e.strerror or e}")


def storage_ok() -> None:
    """A data write succeeded: leave the failing state (one log line)."""
    global _failing
    if _failing:
        _failing = False
        log.warning("disk writes succeed again")


def fsync_dir(directory: Path) -> None:
    """Make renames/creations/unlinks in `directory` durable."""
    if _deferral.files is not None:
        return
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
        fsync(fd, tmp)
    except OSError:
        os.close(fd)
        tmp.unlink(missing_ok=True)  # a full disk must not keep a half-written temp file
        raise
    os.close(fd)
    replace(tmp, path)
    fsync_dir(path.parent)
