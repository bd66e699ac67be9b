"""Leader epochs of a partition (Kafka's `LeaderEpochFileCache`) and their checkpoint file.

The cache maps each leader epoch to the first offset written in it. Epochs and start offsets both increase
strictly from one entry to the next. OffsetForLeaderEpoch answers from it (`end_offset_for`); the log keeps
it in step with its data: an entry per new epoch appended (`assign`), entries dropped when the log is
truncated (`truncate_from_end`) or its start moves (`truncate_from_start`).

On-disk format of `<partition dir>/leader-epoch-checkpoint` (Kafka's `LeaderEpochCheckpointFile`, ASCII
text, every line ending in a newline)::

    0                       version
    3                       number of entries
    0 0                     <epoch> <start offset>, one entry per line, epochs increasing
    2 1042
    5 7700

Written atomically by `storage.checkpoint.write_checkpoint_lines` (temp file, fsync, rename, fsync of the
directory, all through `storage.files`). `decode_checkpoint` accepts exactly that: the version 0, a count
matching the entry lines, each entry two decimal numbers (epoch 0..2^31-1, offset 0..2^63-1) separated by
spaces or tabs, epochs and offsets strictly increasing (as the cache keeps them); a `\\r` before a newline
is tolerated. Anything else raises `CorruptLeaderEpochCheckpointError`; the loader then rebuilds the cache
from the partitionLeaderEpoch fields of the log's batches.
"""

from __future__ import annotations

import logging
import re
from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from exactly.errors import ExactlyError
from exactly.storage.checkpoint import write_checkpoint_lines

log = logging.getLogger(__name__)

VERSION = 0
UNDEFINED_EPOCH = -1  # Kafka's OffsetsForLeaderEpochResponse.UNDEFINED_EPOCH
UNDEFINED_EPOCH_OFFSET = -1  # ... and UNDEFINED_EPOCH_OFFSET
_MAX_EPOCH = (1 << 31) - 1
_MAX_OFFSET = (1 << 63) - 1
_INT = re.compile(r"-?[0-9]+")
_ENTRY = re.compile(r"([0-9]+)[ \t]+([0-9]+)")


class CorruptLeaderEpochCheckpointError(ExactlyError):
    """A `leader-epoch-checkpoint` that is not what `encode_checkpoint` writes."""


@dataclass(frozen=True, slots=True)
class EpochEntry:
    """Leader epoch `epoch` starts at `start_offset` (the offset of its first batch)."""

    epoch: int
    start_offset: int


# -- the checkpoint file ------------------------------------------------------------------------------------


def _entry_lines(entries: Iterable[EpochEntry]) -> list[str]:
    return [f"{e.epoch} {e.start_offset}" for e in entries]


def encode_checkpoint(entries: Iterable[EpochEntry]) -> bytes:
    lines = _entry_lines(entries)
    return ("\n".join([str(VERSION), str(len(lines)), *lines]) + "\n").encode()


def _int(line: str, what: str) -> int:
    if not _INT.fullmatch(line):
        raise CorruptLeaderEpochCheckpointError(f"malformed {what} line {line[:40]!r}")
    return int(line)


def decode_checkpoint(data: bytes) -> list[EpochEntry]:
    """The entries of a checkpoint file's bytes; raises CorruptLeaderEpochCheckpointError."""
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError as e:
        raise CorruptLeaderEpochCheckpointError(f"not ASCII text: {e}") from e
    if not text.endswith("\n"):
        raise CorruptLeaderEpochCheckpointError("empty" if not text else "last line not terminated")
    lines = [line.removesuffix("\r") for line in text[:-1].split("\n")]
    if len(lines) < 2:
        raise CorruptLeaderEpochCheckpointError("no entry count line")
    version = _int(lines[0], "version")
    if version != VERSION:
        raise CorruptLeaderEpochCheckpointError(f"unknown version {version}")
    count = _int(lines[1], "count")
    if count != len(lines) - 2:
        raise CorruptLeaderEpochCheckpointError(f"{count} entries announced, {len(lines) - 2} found")
    entries: list[EpochEntry] = []
    for line in lines[2:]:
        m = _ENTRY.fullmatch(line)
        if m is None:
            raise CorruptLeaderEpochCheckpointError(f"malformed entry line {line[:40]!r}")
        epoch, start = int(m[1]), int(m[2])
        if epoch > _MAX_EPOCH or start > _MAX_OFFSET:
            raise CorruptLeaderEpochCheckpointError(f"entry out of range: {line[:40]!r}")
        if entries and (epoch <= entries[-1].epoch or start <= entries[-1].start_offset):
            raise CorruptLeaderEpochCheckpointError(f"entry {epoch} {start} does not follow the one before")
        entries.append(EpochEntry(epoch, start))
    return entries


def write_checkpoint(path: Path, entries: Iterable[EpochEntry]) -> None:
    """Replace the checkpoint file at `path` atomically (the fsync ledger sees every step)."""
    write_checkpoint_lines(path, _entry_lines(entries), VERSION)


def read_checkpoint(path: Path) -> list[EpochEntry] | None:
    """The entries of the checkpoint file at `path`, None when there is none; raises
    CorruptLeaderEpochCheckpointError (and OSError when the file cannot be read)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    return decode_checkpoint(data)


# -- the cache ----------------------------------------------------------------------------------------------


class LeaderEpochCache:
    """Kafka's `LeaderEpochFileCache`, in memory; the owner (the partition log) decides when to write it.

    The entries are an immutable tuple replaced by each change, so a flush thread that reads `entries`
    (and `version`, bumped after each change) always sees a consistent state while the owning thread
    changes it.
    """

    __slots__ = ("_entries", "_name", "_version")

    def __init__(self, entries: Iterable[EpochEntry] = (), name: str = "") -> None:
        self._entries: tuple[EpochEntry, ...] = ()
        self._version = 0
        self._name = name
        for entry in entries:
            self.assign(entry.epoch, entry.start_offset)
        self._version = 0

    def __repr__(self) -> str:
        inner = ", ".join(f"({e.epoch}, {e.start_offset})" for e in self._entries)
        return f"LeaderEpochCache([{inner}])"

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def entries(self) -> tuple[EpochEntry, ...]:
        return self._entries

    @property
    def version(self) -> int:
        """Bumped by every change (what the owner compares to know whether its file is up to date)."""
        return self._version

    def copy(self) -> LeaderEpochCache:
        clone = LeaderEpochCache(name=self._name)
        clone._entries = self._entries
        return clone

    def _set(self, entries: tuple[EpochEntry, ...]) -> None:
        self._entries = entries
        self._version += 1

    @property
    def latest_entry(self) -> EpochEntry | None:
        return self._entries[-1] if self._entries else None

    @property
    def latest_epoch(self) -> int | None:
        """The newest epoch with an entry (Kafka's `latestEpoch`), None when there is none."""
        return self._entries[-1].epoch if self._entries else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        return self._entries[0] if self._entries else None

    def previous_epoch(self, epoch: int) -> int | None:
        """The newest epoch below `epoch` that has an entry."""
        i = bisect_right(self._entries, epoch - 1, key=_epoch)
        return self._entries[i - 1].epoch if i else None

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch `offset` was written in: that of the last entry starting at or before it (None when
        every entry starts after it)."""
        i = bisect_right(self._entries, offset, key=_start)
        return self._entries[i - 1].epoch if i else None

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that `epoch` starts at `start_offset`; True when the cache changed.

        As Kafka: nothing changes when `epoch` is the latest epoch and `start_offset` is not before its
        start. Otherwise the entries that conflict with the new one (an epoch at or above `epoch`, or a start
        at or after `start_offset`) are removed from the end (logged when that drops more than an entry
        restarting at the same offset) and the new entry becomes the latest.
        """
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"invalid leader epoch entry ({epoch}, {start_offset})")
        entries = self._entries
        if entries and entries[-1].epoch == epoch and start_offset >= entries[-1].start_offset:
            return False
        keep = len(entries)
        while keep and (entries[keep - 1].epoch >= epoch or entries[keep - 1].start_offset >= start_offset):
            keep -= 1
        removed = entries[keep:]
        self._set((*entries[:keep], EpochEntry(epoch, start_offset)))
        if len(removed) > 1 or (removed and removed[0].start_offset != start_offset):
            log.warning(
                "%snew leader epoch entry (%d, %d) removed the conflicting entries %s",
                self._prefix(),
                epoch,
                start_offset,
                [(e.epoch, e.start_offset) for e in removed],
            )
        return True

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetForLeaderEpoch, Kafka's `endOffsetFor`:

        * UNDEFINED_EPOCH requested, or no epoch at or above the requested one: (-1, -1);
        * the latest epoch: (it, `log_end_offset`);
        * an epoch below the earliest entry: (the requested epoch, the earliest entry's start offset);
        * otherwise: (the newest epoch at or below the requested one, the start of the next epoch).
        """
        entries = self._entries
        if requested_epoch == UNDEFINED_EPOCH:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if entries and entries[-1].epoch == requested_epoch:
            return requested_epoch, log_end_offset
        higher = bisect_right(entries, requested_epoch, key=_epoch)
        if higher == len(entries):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return requested_epoch, entries[0].start_offset
        return entries[higher - 1].epoch, entries[higher].start_offset

    def truncate_from_end(self, end_offset: int) -> list[EpochEntry]:
        """After the log was truncated to `end_offset`: remove every entry starting at or after it (a
        negative offset removes nothing). Returns the removed entries."""
        entries = self._entries
        if end_offset < 0 or not entries or entries[-1].start_offset < end_offset:
            return []
        keep = bisect_right(entries, end_offset - 1, key=_start)
        self._set(entries[:keep])
        return list(entries[keep:])

    def truncate_from_start(self, start_offset: int) -> list[EpochEntry]:
        """After the log start moved to `start_offset`: the entries starting at or before it go, except the
        newest of them, which now starts at `start_offset` (so `truncate_from_start(6)` keeps an entry at
        6 unchanged). Returns the removed entries (before the rewrite)."""
        entries = self._entries
        drop = bisect_right(entries, start_offset, key=_start)
        if drop == 0:
            return []
        removed = list(entries[:drop])
        first = EpochEntry(removed[-1].epoch, start_offset)
        if drop == 1 and first == removed[0]:
            return []
        self._set((first, *entries[drop:]))
        return removed

    def clear(self) -> None:
        if self._entries:
            self._set(())

    def _prefix(self) -> str:
        return f"[LeaderEpochCache {self._name}] " if self._name else ""


def _epoch(entry: EpochEntry) -> int:
    return entry.epoch


def _start(entry: EpochEntry) -> int:
    return entry.start_offset


__all__ = [
    "UNDEFINED_EPOCH",
    "UNDEFINED_EPOCH_OFFSET",
    "CorruptLeaderEpochCheckpointError",
    "EpochEntry",
    "LeaderEpochCache",
    "decode_checkpoint",
    "encode_checkpoint",
    "read_checkpoint",
    "write_checkpoint",
]
