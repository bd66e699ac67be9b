"""Disk faults for the harness: simulated power loss, disk damage at restart, and a disk that fills up.

All three act on the data directory of a broker that is already dead (killed -9), except `DiskLimit`,
which a running broker writes into.

Power loss (`power_loss`) replays the broker's fsync ledger (`exactly.debug.fsync.ledger`, format in
exactly.storage.files) to learn, for every file, how many of its bytes were durable, then models what a
machine that lost power could show on reboot. The model:

* a file the ledger saw fsynced keeps at least its durable length; beyond it the file is cut to a random
  length in [durable, size] (the page cache had written back some of it), and one time in three gets a
  garbage tail (random bytes: blocks allocated but never written, or written out of order);
* a file never fsynced since it was created (no ledger line, or only truncations) vanishes one time in two,
  otherwise it is cut to a random length in [0, size]; a file that was fsynced keeps its directory entry
  (we assume the file system journals the entry with the file's first fsync, as ext4 and xfs do; the broker
  also fsyncs its directories);
* files the broker fsynced and never wrote again are untouched; so are files outside the data directory.

Disk damage at restart (`damage`) picks one or more of:

| kind                   | what                                                         | exercises          |
|------------------------|--------------------------------------------------------------|--------------------|
| delete-index           | remove a segment's `.index` and `.timeindex`                 | index rebuild      |
| delete-snapshot        | remove a producer-state `.snapshot`                          | snapshot fallback  |
| garble-snapshot        | overwrite a `.snapshot`'s middle with random bytes           | snapshot CRC       |
| stale-recovery-point   | `recovery-point-offset-checkpoint` rewritten, all offsets 0  | full recovery      |
| delete-recovery-point  | remove that checkpoint                                       | full recovery      |
| delete-clean-shutdown  | remove the clean-shutdown marker                             | unclean recovery   |
| flip-unflushed-byte    | flip one byte of a `.log` beyond its fsynced length (ledger) | CRC-truncated tail |

It never touches fsynced bytes of a `.log` segment: acknowledged data is fsynced there, and damaging it
would be real data loss, not a fault the broker must survive.

Disk full (`DiskLimit`): a size-limited tmpfs mounted on a directory (needs root); `fill` writes a ballast
file leaving a given number of bytes free, `free` removes it.
"""

from __future__ import annotations

import os
import random
import shutil
import struct
import subprocess
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from exactly.storage import files
from exactly.storage.checkpoint import read_checkpoint, write_checkpoint

KINDS = (
    "delete-index",
    "delete-snapshot",
    "garble-snapshot",
    "stale-recovery-point",
    "delete-recovery-point",
    "delete-clean-shutdown",
    "flip-unflushed-byte",
)
_GARBAGE_MAX = 4096
_BATCH_PREFIX = struct.Struct(">qi")  # baseOffset, batchLength
_LAST_DELTA = struct.Struct(">i")
_LAST_DELTA_AT = 23  # baseOffset 8, length 4, leaderEpoch 4, magic 1, crc 4, attributes 2


# -- the fsync ledger -----------------------------------------------------------------------------------


def read_ledger(ledger: Path) -> dict[str, int]:
    """Replay the ledger: every file (relative to the data dir) that was fsynced -> its durable length."""
    durable: dict[str, int] = {}
    try:
        text = ledger.read_text()
    except FileNotFoundError:
        return durable
    for line in text.splitlines():
        fields = line.split("\t")
        if len(fields) < 2:
            continue  # a torn last line
        path = fields[0]
        if fields[1] == "deleted":
            if path.endswith("/"):
                for name in [n for n in durable if n.startswith(path)]:
                    del durable[name]
            durable.pop(path, None)
        elif fields[1] == "from" and len(fields) == 3:
            old = durable.pop(fields[2], None)
            if old is None:
                durable.pop(path, None)
            else:
                durable[path] = old
        elif fields[1].isdigit():
            length = int(fields[1])
            if len(fields) == 3:  # truncated: at most this much is durable now
                if path in durable:
                    durable[path] = min(durable[path], length)
            else:
                durable[path] = length
    return durable


def _data_files(data_dir: Path) -> list[Path]:
    return sorted(p for p in data_dir.rglob("*") if p.is_file() and not p.is_symlink())


# -- power loss -----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PowerLoss:
    files_cut: int  # files cut short or vanished
    bytes_removed: int
    garbage_tails: int
    cut: dict[str, int]  # "<topic>:<partition>" -> the log end offset that survives


def power_loss(data_dir: Path, ledger: Path, rng: random.Random) -> PowerLoss:
    """Cut every file back towards its fsynced length as a power loss could (model in the module doc)."""
    durable = read_ledger(ledger)
    ledger_abs = ledger.resolve()
    files_cut = removed = tails = 0
    kept_log: dict[Path, int] = {}  # .log files cut: the kept length before any garbage
    for path in _data_files(data_dir):
        if path.resolve() == ledger_abs:
            continue
        size = path.stat().st_size
        rel = str(path.relative_to(data_dir))
        synced = durable.get(rel)
        if synced is None:
            if rng.random() < 0.5:
                path.unlink()
                files_cut += 1
                removed += size
                continue
            synced = 0
        if size <= synced:
            continue
        keep = rng.randint(synced, size)
        garbage = rng.randbytes(rng.randint(1, _GARBAGE_MAX)) if rng.random() < 1 / 3 else b""
        if keep == size and not garbage:
            continue
        with open(path, "r+b") as f:
            f.truncate(keep)
            if garbage:
                f.seek(keep)
                f.write(garbage)
        files_cut += 1
        removed += size - keep
        tails += bool(garbage)
        if path.suffix == files.LOG_SUFFIX:
            kept_log[path] = keep
    return PowerLoss(files_cut, removed, tails, surviving_ends(data_dir, kept_log))


def surviving_ends(data_dir: Path, kept: dict[Path, int] | None = None) -> dict[str, int]:
    """ "<topic>:<partition>" -> the log end offset the `.log` bytes support: one past the last complete
    batch of the last segment (within `kept[path]` bytes for files given there), or the segment's base
    offset when it holds no complete batch."""
    ends: dict[str, int] = {}
    for part in sorted(data_dir.iterdir()):
        parsed = files.parse_partition_dir_name(part.name) if part.is_dir() else None
        if parsed is None:
            continue
        end = 0
        for seg in sorted(part.glob(f"*{files.LOG_SUFFIX}")):
            base = files.offset_from_name(seg.name)
            if base is None:
                continue
            data = seg.read_bytes()
            limit = (kept or {}).get(seg, len(data))
            end = max(end, base, _complete_batches_end(data[:limit]))
        ends[f"{parsed[0]}:{parsed[1]}"] = end
    return ends


def _complete_batches_end(data: bytes) -> int:
    pos, end = 0, 0
    while pos + _LAST_DELTA_AT + 4 <= len(data):
        base, length = _BATCH_PREFIX.unpack_from(data, pos)
        if length <= 0 or pos + 12 + length > len(data):
            break
        end = base + _LAST_DELTA.unpack_from(data, pos + _LAST_DELTA_AT)[0] + 1
        pos += 12 + length
    return end


# -- damage at restart ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Damage:
    kind: str
    path: str


def damage(
    data_dir: Path, rng: random.Random, ledger: Path | None = None, count: int | None = None
) -> list[Damage]:
    """Apply `count` (default 1-3) random kinds of damage; returns what was done (kinds with nothing to
    damage are skipped; flip-unflushed-byte needs the ledger)."""
    done: list[Damage] = []
    for kind in rng.sample(KINDS, count if count is not None else rng.randint(1, 3)):
        hit = apply_damage(kind, data_dir, rng, ledger)
        if hit is not None:
            done.append(Damage(kind, str(hit.relative_to(data_dir))))
    return done


def apply_damage(kind: str, data_dir: Path, rng: random.Random, ledger: Path | None = None) -> Path | None:
    """Apply one kind of damage; the file it hit, or None when there was nothing to damage."""
    if kind == "delete-index":
        indexes = sorted(data_dir.glob(f"*/*{files.INDEX_SUFFIX}"))
        if not indexes:
            return None
        index = rng.choice(indexes)
        index.unlink()
        index.with_suffix(files.TIME_INDEX_SUFFIX).unlink(missing_ok=True)
        return index
    if kind in ("delete-snapshot", "garble-snapshot"):
        snapshots = sorted(data_dir.glob(f"*/*{files.SNAPSHOT_SUFFIX}"))
        if not snapshots:
            return None
        snapshot = rng.choice(snapshots)
        if kind == "delete-snapshot":
            snapshot.unlink()
        else:
            data = bytearray(snapshot.read_bytes())
            start = len(data) // 3
            data[start : start + 16] = rng.randbytes(len(data[start : start + 16]))
            snapshot.write_bytes(bytes(data))
        return snapshot
    if kind == "delete-clean-shutdown":
        marker = data_dir / files.CLEAN_SHUTDOWN_FILE
        if not marker.exists():
            return None
        marker.unlink()
        return marker
    if kind == "flip-unflushed-byte":
        return _flip_unflushed(data_dir, rng, ledger)
    checkpoint = data_dir / files.RECOVERY_POINT_CHECKPOINT
    if not checkpoint.exists():
        return None
    if kind == "stale-recovery-point":
        write_checkpoint(checkpoint, dict.fromkeys(read_checkpoint(checkpoint), 0))
    else:
        checkpoint.unlink()
    return checkpoint


def _flip_unflushed(data_dir: Path, rng: random.Random, ledger: Path | None) -> Path | None:
    if ledger is None:
        return None
    durable = read_ledger(ledger)
    tails = []
    for log in sorted(data_dir.glob(f"*/*{files.LOG_SUFFIX}")):
        synced = durable.get(str(log.relative_to(data_dir)), 0)
        if log.stat().st_size > synced:
            tails.append((log, synced))
    if not tails:
        return None
    log, synced = rng.choice(tails)
    with open(log, "r+b") as f:
        size = f.seek(0, os.SEEK_END)
        at = rng.randrange(synced, size)
        f.seek(at)
        byte = f.read(1)[0]
        f.seek(at)
        f.write(bytes([byte ^ (1 << rng.randrange(8))]))
    return log


# -- disk full ------------------------------------------------------------------------------------------

BALLAST = ".ballast"


class DiskLimit:
    """A tmpfs of `size_bytes` mounted on `directory` (root only): a disk that can be filled on demand."""

    def __init__(self, directory: Path, size_bytes: int) -> None:
        self.directory = directory
        self.size_bytes = size_bytes
        self.mounted = False

    def mount(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        _run("mount", "-t", "tmpfs", "-o", f"size={self.size_bytes}", "tmpfs", str(self.directory))
        self.mounted = True

    def unmount(self) -> None:
        if self.mounted:
            _run("umount", "-l", str(self.directory))
            self.mounted = False

    def resize(self, size_bytes: int) -> None:
        """Grow (or shrink) the file system without unmounting it."""
        _run("mount", "-o", f"remount,size={size_bytes}", str(self.directory))
        self.size_bytes = size_bytes

    def free_bytes(self) -> int:
        st = os.statvfs(self.directory)
        return st.f_bavail * st.f_frsize

    def fill(self, leave_bytes: int = 0) -> int:
        """Write a ballast file until at most `leave_bytes` are free; returns the ballast's size."""
        path = self.directory / BALLAST
        chunk = b"\0" * (1 << 20)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            while (room := self.free_bytes() - leave_bytes) > 0:
                try:
                    os.write(fd, chunk[: min(room, len(chunk))])
                except OSError:
                    break
        finally:
            os.close(fd)
        return path.stat().st_size

    def free(self) -> None:
        (self.directory / BALLAST).unlink(missing_ok=True)

    def __enter__(self) -> DiskLimit:
        self.mount()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.unmount()


def _run(*args: str) -> None:
    if shutil.which(args[0]) is None:
        raise RuntimeError(f"{args[0]} not found")
    subprocess.run(args, check=True, capture_output=True)
