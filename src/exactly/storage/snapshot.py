"""Producer-state snapshot files (`<offset>.snapshot`): codec only, no state.

A snapshot named N holds the producer state after applying every batch below offset N. Two versions:

Version 1 - Kafka's format (`storage/src/main/resources/message/ProducerSnapshot.json`), read and written
for compatibility; it keeps only the last batch of each producer::

    version                  int16   1
    crc                      uint32  CRC-32C of bytes [6, end)
    count                    int32
    count x (46 bytes):
      producer_id            int64
      producer_epoch         int16
      last_sequence          int32
      last_offset            int64
      offset_delta           int32   last_sequence - first sequence of the last batch
      timestamp              int64   max timestamp of the last batch
      coordinator_epoch      int32
      current_txn_first_offset int64 -1 when no transaction is open

Version 2 - exactly's own (what `write_snapshot` emits by default): the same header, and per producer all
(up to five) cached batches, so duplicate detection after a restart is as good as before it::

    version                  int16   2
    crc                      uint32  CRC-32C of bytes [6, end)
    count                    int32
    count x:
      producer_id            int64
      producer_epoch         int16
      coordinator_epoch      int32
      current_txn_first_offset int64 -1 when none
      last_timestamp         int64
      batch_count            int8    0..5, oldest first
      batch_count x (24 bytes):
        last_sequence        int32
        last_offset          int64
        offset_delta         int32
        timestamp            int64

A snapshot that is short, has trailing bytes, an unknown version or a bad CRC raises `CorruptSnapshotError`;
the loader then deletes it and falls back to an older one (or a replay from the log start).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import crc32c

from exactly.errors import ExactlyError
from exactly.storage.files import write_atomically

KAFKA_VERSION = 1
EXACTLY_VERSION = 2

_HEADER = struct.Struct(">hIi")
_V1_ENTRY = struct.Struct(">qhiqiqiq")
_V2_ENTRY = struct.Struct(">qhiqqb")
_V2_BATCH = struct.Struct(">iqiq")


class CorruptSnapshotError(ExactlyError):
    """A snapshot file that cannot be trusted."""


@dataclass(frozen=True, slots=True)
class SnapshotBatch:
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int


@dataclass(frozen=True, slots=True)
class SnapshotEntry:
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    current_txn_first_offset: int  # -1 when none
    last_timestamp: int
    batches: tuple[SnapshotBatch, ...]


def encode_snapshot(entries: Iterable[SnapshotEntry], version: int = EXACTLY_VERSION) -> bytes:
    body = bytearray()
    count = 0
    for e in entries:
        count += 1
        if version == KAFKA_VERSION:
            last = e.batches[-1] if e.batches else SnapshotBatch(-1, -1, 0, e.last_timestamp)
            body += _V1_ENTRY.pack(
                e.producer_id,
                e.producer_epoch,
                last.last_sequence,
                last.last_offset,
                last.offset_delta,
                last.timestamp,
                e.coordinator_epoch,
                e.current_txn_first_offset,
            )
        elif version == EXACTLY_VERSION:
            body += _V2_ENTRY.pack(
                e.producer_id,
                e.producer_epoch,
                e.coordinator_epoch,
                e.current_txn_first_offset,
                e.last_timestamp,
                len(e.batches),
            )
            for b in e.batches:
                body += _V2_BATCH.pack(b.last_sequence, b.last_offset, b.offset_delta, b.timestamp)
        else:
            raise ValueError(f"unknown snapshot version {version}")
    out = bytearray(_HEADER.pack(version, 0, count)) + body
    crc = crc32c.crc32c(memoryview(out)[6:])
    struct.pack_into(">I", out, 2, crc)
    return bytes(out)


def decode_snapshot(data: bytes) -> list[SnapshotEntry]:
    if len(data) < _HEADER.size:
        raise CorruptSnapshotError(f"snapshot too short ({len(data)} bytes)")
    version, crc, count = _HEADER.unpack_from(data)
    if crc32c.crc32c(memoryview(data)[6:]) != crc:
        raise CorruptSnapshotError("snapshot CRC mismatch")
    if count < 0:
        raise CorruptSnapshotError(f"negative entry count {count}")
    pos = _HEADER.size
    entries: list[SnapshotEntry] = []
    try:
        if version == KAFKA_VERSION:
            if len(data) != pos + count * _V1_ENTRY.size:
                raise CorruptSnapshotError("snapshot size does not match its entry count")
            for pid, epoch, last_seq, last_off, delta, ts, coord, txn_first in _V1_ENTRY.iter_unpack(
                data[pos:]
            ):
                batches: tuple[SnapshotBatch, ...] = (
                    (SnapshotBatch(last_seq, last_off, delta, ts),) if last_off >= 0 else ()
                )
                entries.append(SnapshotEntry(pid, epoch, coord, txn_first, ts, batches))
        elif version == EXACTLY_VERSION:
            for _ in range(count):
                pid, epoch, coord, txn_first, ts, n = _V2_ENTRY.unpack_from(data, pos)
                pos += _V2_ENTRY.size
                if not 0 <= n <= 5:
                    raise CorruptSnapshotError(f"bad batch count {n}")
                batches = tuple(SnapshotBatch(*_V2_BATCH.unpack_from(data, pos + i * 24)) for i in range(n))
                pos += n * _V2_BATCH.size
                entries.append(SnapshotEntry(pid, epoch, coord, txn_first, ts, batches))
            if pos != len(data):
                raise CorruptSnapshotError("trailing bytes in snapshot")
        else:
            raise CorruptSnapshotError(f"unknown snapshot version {version}")
    except struct.error as e:
        raise CorruptSnapshotError(f"truncated snapshot: {e}") from e
    return entries


def write_snapshot(path: Path, entries: Iterable[SnapshotEntry], version: int = EXACTLY_VERSION) -> None:
    """Write atomically and durably (temp file, fsync, rename, fsync dir)."""
    write_atomically(path, encode_snapshot(entries, version))


def read_snapshot(path: Path) -> list[SnapshotEntry]:
    try:
        data = path.read_bytes()
    except FileNotFoundError as e:
        raise CorruptSnapshotError(f"{path} is missing") from e
    return decode_snapshot(data)
