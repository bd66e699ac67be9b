"""Per-partition producer state: idempotence and transaction tracking (Kafka's `ProducerStateManager`).

For every producer id that wrote to the partition the manager keeps a `ProducerStateEntry`: the producer
epoch, the metadata of its last five batches (sequence range, offsets, timestamp), the epoch of the last
transaction coordinator that wrote a marker for it, and the first offset of its open transaction.

Appends follow *prepare, then apply*: `prepare_update(pid, origin)` returns a `ProducerAppendInfo` that
validates each batch of one append against a private copy of the entry (`append_data_batch`,
`append_end_txn_marker`); only once the bytes are in the log does `update(info)` fold it into the state.

Rules, as Kafka applies them for appends from clients (`ProducerAppendInfo.java`):

* epoch lower than the recorded one -> INVALID_PRODUCER_EPOCH;
* a new (higher) epoch must start at sequence 0 unless the producer is unknown -> else
  OUT_OF_ORDER_SEQUENCE_NUMBER; the new epoch clears the cached batches;
* same epoch: the first sequence must follow the last one (INT32_MAX wraps to 0), unless the entry has no
  epoch yet (unknown producer, KIP-360: any sequence is accepted) -> else OUT_OF_ORDER_SEQUENCE_NUMBER;
* a non-transactional batch while the producer has an open transaction -> INVALID_TXN_STATE;
* an end marker whose coordinator epoch is lower than the recorded one -> TRANSACTION_COORDINATOR_FENCED.

Duplicates are found by the log before any of this (`ProducerStateEntry.find_duplicate_batch`: same epoch
and exact first/last sequence match among the cached batches) and answered with the original offsets, except
(a guard Kafka lacks) a transactional duplicate of a batch of an ended transaction, which is a reused
sequence, not a retry: OUT_OF_ORDER_SEQUENCE_NUMBER (`check_duplicate_in_open_txn`).
Appends with origin REPLICATION (recovery replay) skip the sequence checks and never raise for epochs.

The last stable offset: `first_unstable_offset` is the smallest first offset of any ongoing transaction
(or of a completed one whose marker is not yet below the high watermark); the log takes
`LSO = min(first_unstable_offset, high_watermark)`.

State survives restarts through snapshots (see snapshot.py): `take_snapshot()` writes `<map_end>.snapshot`;
`truncate_and_reload` loads the newest valid snapshot at or below the log end and the caller replays the
log from `map_end_offset`.
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import os
from collections import deque
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from exactly.errors import ErrorCode, KafkaError
from exactly.records.control import ControlRecordType, EndTxnMarker
from exactly.storage import files
from exactly.storage.snapshot import (
    CorruptSnapshotError,
    SnapshotBatch,
    SnapshotEntry,
    read_snapshot,
    write_snapshot,
)

log = logging.getLogger(__name__)

NUM_BATCHES_TO_RETAIN = 5
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_COORDINATOR_EPOCH = -1
INT32_MAX = (1 << 31) - 1


class AppendOrigin(Enum):
    """Who is appending: a producer, the broker itself (markers, coordinator records), or a replay."""

    CLIENT = "client"
    COORDINATOR = "coordinator"
    REPLICATION = "replication"


def _decrement_sequence(sequence: int, decrement: int) -> int:
    if sequence < decrement:
        return INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """Sequence range and offsets of one cached batch (Kafka `BatchMetadata`)."""

    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        return _decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


@dataclass(frozen=True, slots=True)
class TxnMetadata:
    producer_id: int
    first_offset: int


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    producer_id: int
    first_offset: int
    last_offset: int  # offset of the marker
    is_aborted: bool


class ProducerStateEntry:
    """Mutable state of one producer id (Kafka `ProducerStateEntry`)."""

    __slots__ = (
        "batches",
        "coordinator_epoch",
        "current_txn_first_offset",
        "last_timestamp",
        "producer_epoch",
        "producer_id",
    )

    def __init__(
        self,
        producer_id: int,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        coordinator_epoch: int = NO_COORDINATOR_EPOCH,
        last_timestamp: int = -1,
        current_txn_first_offset: int | None = None,
        batches: deque[BatchMetadata] | None = None,
    ) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.coordinator_epoch = coordinator_epoch
        self.last_timestamp = last_timestamp
        self.current_txn_first_offset = current_txn_first_offset
        self.batches: deque[BatchMetadata] = batches if batches is not None else deque()

    def __repr__(self) -> str:
        return (
            f"ProducerStateEntry(pid={self.producer_id}, epoch={self.producer_epoch}, "
            f"coordinator_epoch={self.coordinator_epoch}, txn_first={self.current_txn_first_offset}, "
            f"batches={list(self.batches)})"
        )

    @property
    def is_empty(self) -> bool:
        return not self.batches

    @property
    def first_seq(self) -> int:
        return self.batches[0].first_seq if self.batches else NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate_batch(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.producer_epoch:
            return None
        for b in self.batches:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return b
        return None

    def check_duplicate_in_open_txn(self, dup: BatchMetadata, is_transactional: bool) -> None:
        """Refuse a transactional duplicate of a batch of a transaction that has already ended.

        A transactional batch is a retry only while its transaction is open on this partition: the original
        then lies at or after `current_txn_first_offset`. A match before it (or with no transaction open)
        belongs to a transaction whose COMMIT/ABORT marker is already written, so it is not a retry but a
        reused sequence (librdkafka 2.16 reuses the sequence of a possibly persisted batch it purged in
        abort_transaction, without the KIP-360 epoch bump). Answering it with the old batch's offset would
        acknowledge a record that is not in the log; OUT_OF_ORDER_SEQUENCE_NUMBER is what Kafka answers for
        a sequence that does not follow the last one, and makes the client abort and bump its epoch."""
        if not is_transactional:
            return
        txn_first = self.current_txn_first_offset
        if txn_first is None or dup.first_offset < txn_first:
            raise KafkaError(
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"sequence {dup.first_seq}..{dup.last_seq} of producer {self.producer_id} epoch "
                f"{self.producer_epoch} reused: its batch at offset {dup.first_offset} belongs to a "
                f"transaction that has ended (last sequence {self.last_seq})",
            )

    def maybe_update_producer_epoch(self, epoch: int) -> None:
        if self.producer_epoch != epoch:
            self.batches.clear()
            self.producer_epoch = epoch

    def add_batch(
        self, epoch: int, last_seq: int, last_offset: int, offset_delta: int, timestamp: int
    ) -> None:
        self.maybe_update_producer_epoch(epoch)
        self.batches.append(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        while len(self.batches) > NUM_BATCHES_TO_RETAIN:
            self.batches.popleft()
        self.last_timestamp = timestamp

    def apply(self, nxt: ProducerStateEntry) -> None:
        """Fold the outcome of one append (`ProducerStateEntry.update`)."""
        self.maybe_update_producer_epoch(nxt.producer_epoch)
        for b in nxt.batches:
            self.batches.append(b)
            if len(self.batches) > NUM_BATCHES_TO_RETAIN:
                self.batches.popleft()
        self.coordinator_epoch = nxt.coordinator_epoch
        self.current_txn_first_offset = nxt.current_txn_first_offset
        self.last_timestamp = nxt.last_timestamp

    def to_snapshot(self) -> SnapshotEntry:
        return SnapshotEntry(
            self.producer_id,
            self.producer_epoch,
            self.coordinator_epoch,
            -1 if self.current_txn_first_offset is None else self.current_txn_first_offset,
            self.last_timestamp,
            tuple(
                SnapshotBatch(b.last_seq, b.last_offset, b.offset_delta, b.timestamp) for b in self.batches
            ),
        )

    @classmethod
    def from_snapshot(cls, e: SnapshotEntry) -> ProducerStateEntry:
        return cls(
            e.producer_id,
            e.producer_epoch,
            e.coordinator_epoch,
            e.last_timestamp,
            None if e.current_txn_first_offset < 0 else e.current_txn_first_offset,
            deque(
                BatchMetadata(b.last_sequence, b.last_offset, b.offset_delta, b.timestamp) for b in e.batches
            ),
        )


@dataclass(frozen=True, slots=True)
class ProducerInfo:
    """A read-only view of one producer for DescribeProducers."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int  # -1 when none


class ProducerAppendInfo:
    """Validates the batches of one append by one producer before they are written (prepare step)."""

    __slots__ = ("current", "origin", "producer_id", "started_transactions", "updated")

    def __init__(self, producer_id: int, current: ProducerStateEntry, origin: AppendOrigin) -> None:
        self.producer_id = producer_id
        self.current = current
        self.origin = origin
        # As Kafka: the updated entry starts with no batches; `update` appends them to the current ones.
        self.updated = ProducerStateEntry(
            producer_id,
            current.producer_epoch,
            current.coordinator_epoch,
            current.last_timestamp,
            current.current_txn_first_offset,
        )
        self.started_transactions: list[TxnMetadata] = []

    def _check_producer_epoch(self, epoch: int, offset: int) -> None:
        if epoch < self.updated.producer_epoch and self.origin is not AppendOrigin.REPLICATION:
            raise KafkaError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"epoch of producer {self.producer_id} at offset {offset} is {epoch}, "
                f"smaller than the last seen epoch {self.updated.producer_epoch}",
            )

    def _check_sequence(self, epoch: int, first_seq: int, offset: int) -> None:
        if epoch != self.updated.producer_epoch:
            if first_seq != 0 and self.updated.producer_epoch != NO_PRODUCER_EPOCH:
                raise KafkaError(
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"invalid sequence number for new epoch of producer {self.producer_id} at offset "
                    f"{offset}: {epoch} (request epoch), {first_seq} (seq. number), "
                    f"{self.updated.producer_epoch} (current producer epoch)",
                )
            return
        if not self.updated.is_empty:
            current_last_seq = self.updated.last_seq
        elif epoch == self.current.producer_epoch:
            current_last_seq = self.current.last_seq
        else:
            current_last_seq = NO_SEQUENCE
        if not (self.current.producer_epoch == NO_PRODUCER_EPOCH or in_sequence(current_last_seq, first_seq)):
            raise KafkaError(
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"out of order sequence number for producer {self.producer_id} at offset {offset}: "
                f"{first_seq} (incoming seq. number), {current_last_seq} (current end sequence number)",
            )

    def append_data_batch(
        self,
        epoch: int,
        first_seq: int,
        last_seq: int,
        timestamp: int,
        first_offset: int,
        last_offset: int,
        is_transactional: bool,
    ) -> None:
        self._check_producer_epoch(epoch, first_offset)
        if self.origin is AppendOrigin.CLIENT:
            self._check_sequence(epoch, first_seq, first_offset)
        txn_first = self.updated.current_txn_first_offset
        if txn_first is not None and not is_transactional:
            raise KafkaError(
                ErrorCode.INVALID_TXN_STATE,
                f"non-transactional batch from producer {self.producer_id} at offset {first_offset} "
                f"while its transaction starting at {txn_first} is open",
            )
        self.updated.add_batch(epoch, last_seq, last_offset, last_offset - first_offset, timestamp)
        if txn_first is None and is_transactional:
            self.updated.current_txn_first_offset = first_offset
            self.started_transactions.append(TxnMetadata(self.producer_id, first_offset))

    def append_end_txn_marker(
        self, marker: EndTxnMarker, epoch: int, offset: int, timestamp: int
    ) -> CompletedTxn | None:
        self._check_producer_epoch(epoch, offset)
        if (
            self.updated.coordinator_epoch > marker.coordinator_epoch
            and self.origin is not AppendOrigin.REPLICATION
        ):
            raise KafkaError(
                ErrorCode.TRANSACTION_COORDINATOR_FENCED,
                f"marker for producer {self.producer_id} at offset {offset} has coordinator epoch "
                f"{marker.coordinator_epoch}, lower than the last seen {self.updated.coordinator_epoch}",
            )
        txn_first = self.updated.current_txn_first_offset
        completed = (
            CompletedTxn(self.producer_id, txn_first, offset, marker.type is ControlRecordType.ABORT)
            if txn_first is not None
            else None
        )
        self.updated.maybe_update_producer_epoch(epoch)
        self.updated.coordinator_epoch = marker.coordinator_epoch
        self.updated.current_txn_first_offset = None
        self.updated.last_timestamp = timestamp
        return completed


class ProducerStateManager:
    """All producer entries of one partition, its ongoing transactions, and its snapshot files."""

    def __init__(self, directory: Path | None, producer_id_expiration_ms: int, name: str = "") -> None:
        self.directory = directory
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self._producers: dict[int, ProducerStateEntry] = {}
        self._ongoing: dict[int, TxnMetadata] = {}  # first offset -> txn (kept sorted by insertion/sort)
        self._unreplicated: dict[int, CompletedTxn] = {}  # first offset -> completed txn above the HW
        self.map_end_offset = 0
        self._log_prefix = f"[ProducerStateManager {name}] "
        # Offsets of the snapshot files, sorted: read from the directory once, then kept up to date by
        # take_snapshot and _delete_snapshot (listing the directory each time cost ~25 us x 4 per close).
        self._snapshots: list[int] | None = None

    # -- queries ------------------------------------------------------------------------------------------

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self._producers.get(producer_id)

    @property
    def producers(self) -> dict[int, ProducerStateEntry]:
        return self._producers

    def producer_infos(self) -> list[ProducerInfo]:
        return [
            ProducerInfo(
                e.producer_id,
                e.producer_epoch,
                e.last_seq,
                e.last_timestamp,
                e.coordinator_epoch,
                -1 if e.current_txn_first_offset is None else e.current_txn_first_offset,
            )
            for e in self._producers.values()
        ]

    def ongoing_transactions(self) -> list[TxnMetadata]:
        return [self._ongoing[k] for k in sorted(self._ongoing)]

    @property
    def first_unstable_offset(self) -> int | None:
        # Read for every partition of every fetch (the LSO): nearly always no transaction is open
        if not self._ongoing:
            return min(self._unreplicated) if self._unreplicated else None
        if not self._unreplicated:
            return min(self._ongoing)
        return min(min(self._ongoing), min(self._unreplicated))

    def last_stable_offset(self, completed: CompletedTxn) -> int:
        """The LSO right after `completed` finishes (stored in the aborted-transaction index)."""
        for first in sorted(self._ongoing):
            if self._ongoing[first].producer_id != completed.producer_id:
                return first
        return completed.last_offset + 1

    # -- the append cycle ---------------------------------------------------------------------------------

    def prepare_update(self, producer_id: int, origin: AppendOrigin) -> ProducerAppendInfo:
        current = self._producers.get(producer_id) or ProducerStateEntry(producer_id)
        return ProducerAppendInfo(producer_id, current, origin)

    def update(self, info: ProducerAppendInfo) -> None:
        entry = self._producers.get(info.producer_id)
        if entry is None:
            entry = ProducerStateEntry(info.producer_id)
            self._producers[info.producer_id] = entry
        entry.apply(info.updated)
        for txn in info.started_transactions:
            self._ongoing[txn.first_offset] = txn

    def complete_txn(self, completed: CompletedTxn, high_watermark: int) -> None:
        txn = self._ongoing.pop(completed.first_offset, None)
        if txn is None or txn.producer_id != completed.producer_id:
            raise RuntimeError(f"{self._log_prefix}no ongoing transaction for {completed}")
        if completed.last_offset >= high_watermark:
            self._unreplicated[completed.first_offset] = completed

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        if self._unreplicated:
            for first in [f for f, t in self._unreplicated.items() if t.last_offset < high_watermark]:
                del self._unreplicated[first]

    def drop_transactions_below(self, log_start_offset: int) -> list[int]:
        """Forget open transactions whose every batch lies below the log start; returns their first offsets.

        A live log never has one: the log start cannot pass the LSO. After a crash it can: the marker was
        not flushed while the new log start was checkpointed. Kafka drops such a producer at load (its
        last data offset is below the log start); its records cannot be read any more, and keeping the
        transaction open would pin the LSO at the log start until a marker that may never come.
        """
        dropped = []
        for first, txn in list(self._ongoing.items()):
            entry = self._producers.get(txn.producer_id)
            if first < log_start_offset and (entry is None or entry.last_data_offset < log_start_offset):
                del self._ongoing[first]
                if entry is not None:
                    entry.current_txn_first_offset = None
                dropped.append(first)
        if dropped:
            log.warning(
                "%sdropped open transactions at %s: their records are all below the log start %d",
                self._log_prefix,
                dropped,
                log_start_offset,
            )
        return dropped

    def update_map_end_offset(self, offset: int) -> None:
        self.map_end_offset = offset

    # -- expiry, truncation -------------------------------------------------------------------------------

    def is_expired(self, entry: ProducerStateEntry, now_ms: int) -> bool:
        return (
            entry.current_txn_first_offset is None
            and now_ms - entry.last_timestamp >= self.producer_id_expiration_ms
        )

    def remove_expired_producers(self, now_ms: int) -> list[int]:
        expired = [pid for pid, e in self._producers.items() if self.is_expired(e, now_ms)]
        for pid in expired:
            del self._producers[pid]
        return expired

    def clear(self, start_offset: int) -> None:
        self._producers.clear()
        self._ongoing.clear()
        self._unreplicated.clear()
        self.map_end_offset = start_offset

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self.clear(offset)
        for snap in self.snapshot_offsets():
            self._delete_snapshot(snap)

    # -- snapshots ----------------------------------------------------------------------------------------

    def snapshot_offsets(self) -> list[int]:
        if self.directory is None:
            return []
        if self._snapshots is None:
            found = []
            for name in os.listdir(self.directory):
                if name.endswith(files.SNAPSHOT_SUFFIX):
                    off = files.offset_from_name(name)
                    if off is not None:
                        found.append(off)
            self._snapshots = sorted(found)
        return list(self._snapshots)

    def latest_snapshot_offset(self) -> int | None:
        offs = self.snapshot_offsets()
        return offs[-1] if offs else None

    def take_snapshot(self) -> int | None:
        """Write `<map_end_offset>.snapshot` (durably) unless it already exists; return its offset."""
        if self.directory is None:
            return None
        if self.map_end_offset not in self.snapshot_offsets():
            path = files.snapshot_file(self.directory, self.map_end_offset)
            write_snapshot(path, (e.to_snapshot() for e in self._producers.values()))
            assert self._snapshots is not None
            bisect.insort(self._snapshots, self.map_end_offset)
        return self.map_end_offset

    def delete_snapshots_before(self, offset: int) -> None:
        for snap in self.snapshot_offsets():
            if snap < offset:
                self._delete_snapshot(snap)

    def delete_snapshots_after(self, offset: int) -> None:
        for snap in self.snapshot_offsets():
            if snap > offset:
                self._delete_snapshot(snap)

    def _delete_snapshot(self, offset: int) -> None:
        assert self.directory is not None
        with contextlib.suppress(FileNotFoundError):
            files.unlink(files.snapshot_file(self.directory, offset))
        if self._snapshots is not None and offset in self._snapshots:
            self._snapshots.remove(offset)

    def truncate_and_reload(
        self, log_start_offset: int, log_end_offset: int, now_ms: int, *, keep_later: bool = False
    ) -> int | None:
        """Drop out-of-range snapshots and load the newest valid one at or below the log end.

        Returns the loaded snapshot's offset (the caller replays the log from there), or None when no
        snapshot could be loaded (the state is then empty and the caller replays from the first segment).
        With `keep_later`, snapshots past `log_end_offset` are ignored but kept: start-up recovery replays
        from a segment's start and deletes afterwards only those past the recovered log end (a snapshot at
        or below it still describes the log: deleting and rewriting it cost two file operations apiece).
        """
        if self.directory is not None:
            for snap in self.snapshot_offsets():
                if (snap > log_end_offset and not keep_later) or snap < log_start_offset:
                    self._delete_snapshot(snap)
        self.clear(log_start_offset)
        for snap in reversed(self.snapshot_offsets()):
            if snap > log_end_offset:
                continue
            assert self.directory is not None
            try:
                entries = read_snapshot(files.snapshot_file(self.directory, snap))
            except CorruptSnapshotError as e:
                log.warning("%sdeleting corrupt snapshot %d: %s", self._log_prefix, snap, e)
                self._delete_snapshot(snap)
                continue
            for se in entries:
                entry = ProducerStateEntry.from_snapshot(se)
                if self.is_expired(entry, now_ms):
                    continue
                self._producers[entry.producer_id] = entry
                if entry.current_txn_first_offset is not None:
                    first = entry.current_txn_first_offset
                    self._ongoing[first] = TxnMetadata(entry.producer_id, first)
            self.map_end_offset = snap
            return snap
        return None
