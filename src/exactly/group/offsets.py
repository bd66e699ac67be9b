"""Committed offsets and pending transactional offsets (Kafka's `OffsetMetadataManager` state).

Only `replay` and `replay_end_txn_marker` change anything here; both are called with records that are
already in `__consumer_offsets`, in log order (on the live path right after the append, at start-up
while loading).

* An OffsetCommit record written outside a transaction (producer id -1) sets the committed offset of
  (group, topic, partition); a tombstone deletes it, together with any pending transactional offset of
  that partition.
* A record written inside a transaction (TxnOffsetCommit, the next issue) is *pending* under its
  producer id until the transaction's marker reaches this partition: COMMIT moves it into the committed
  offsets unless a later plain commit already replaced it (the higher record offset wins, as in Kafka,
  so that compaction of the topic can never resurrect an older offset); ABORT drops it.
* `has_pending` is what OffsetFetch `require_stable` (KIP-447) and offset expiry look at.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import NamedTuple

from exactly.group.records import OffsetCommitKey, OffsetCommitValue

__all__ = ["OffsetAndMetadata", "OffsetStore", "TopicPartition"]

TopicPartition = tuple[str, int]


class OffsetAndMetadata(NamedTuple):
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int  # -1: offsets.retention.minutes applies
    record_offset: int  # where the record is in __consumer_offsets

    @classmethod
    def from_record(cls, record_offset: int, value: OffsetCommitValue) -> OffsetAndMetadata:
        return cls(
            value.offset,
            value.leader_epoch,
            value.metadata,
            value.commit_timestamp,
            value.expire_timestamp,
            record_offset,
        )


GroupOffsets = dict[TopicPartition, OffsetAndMetadata]


class OffsetStore:
    def __init__(self) -> None:
        self._committed: dict[str, GroupOffsets] = {}
        self._pending: dict[int, dict[str, GroupOffsets]] = {}  # producer id -> group -> offsets
        self._open_by_group: dict[str, set[int]] = {}  # group -> producer ids with pending offsets

    # --- reads -------------------------------------------------------------------------------------------

    def get(self, group: str, tp: TopicPartition) -> OffsetAndMetadata | None:
        offsets = self._committed.get(group)
        return None if offsets is None else offsets.get(tp)

    def group_offsets(self, group: str) -> GroupOffsets:
        """The committed offsets of `group` (do not modify)."""
        return self._committed.get(group, {})

    def groups(self) -> Iterator[str]:
        return iter(list(self._committed))

    def offset_count(self) -> int:
        """Committed offsets of every group (Kafka's NumOffsets)."""
        return sum(len(offsets) for offsets in self._committed.values())

    def has_offsets(self, group: str) -> bool:
        return bool(self._committed.get(group))

    def has_pending(self, group: str, tp: TopicPartition) -> bool:
        for producer_id in self._open_by_group.get(group, ()):
            if tp in self._pending.get(producer_id, {}).get(group, {}):
                return True
        return False

    def has_open_transactions(self, group: str) -> bool:
        return bool(self._open_by_group.get(group))

    def pending_partitions(self, group: str) -> set[TopicPartition]:
        out: set[TopicPartition] = set()
        for producer_id in self._open_by_group.get(group, ()):
            out.update(self._pending.get(producer_id, {}).get(group, {}))
        return out

    def snapshot(self) -> dict[str, dict[TopicPartition, tuple[int, int, str]]]:
        """Committed (offset, leader epoch, metadata) per group, for tests and tools."""
        return {
            group: {tp: (o.offset, o.leader_epoch, o.metadata) for tp, o in offsets.items()}
            for group, offsets in self._committed.items()
            if offsets
        }

    def pending_snapshot(self) -> dict[int, dict[str, dict[TopicPartition, int]]]:
        return {
            pid: {g: {tp: o.offset for tp, o in offs.items()} for g, offs in groups.items()}
            for pid, groups in self._pending.items()
        }

    # --- replay ------------------------------------------------------------------------------------------

    def replay(
        self, record_offset: int, producer_id: int, key: OffsetCommitKey, value: OffsetCommitValue | None
    ) -> None:
        tp = (key.topic, key.partition)
        group = key.group
        if value is not None:
            entry = OffsetAndMetadata(
                value.offset,
                value.leader_epoch,
                value.metadata,
                value.commit_timestamp,
                value.expire_timestamp,
                record_offset,
            )
            if producer_id < 0:
                self._committed.setdefault(group, {})[tp] = entry
            else:
                self._pending.setdefault(producer_id, {}).setdefault(group, {})[tp] = entry
                self._open_by_group.setdefault(group, set()).add(producer_id)
            return
        offsets = self._committed.get(group)
        if offsets is not None:
            offsets.pop(tp, None)
            if not offsets:
                del self._committed[group]
        for pid in self._open_by_group.get(group, ()):
            self._pending.get(pid, {}).get(group, {}).pop(tp, None)

    def put_committed(self, group: str, tp: TopicPartition, entry: OffsetAndMetadata) -> None:
        """`replay` of a plain commit, for the loader's fast path."""
        offsets = self._committed.get(group)
        if offsets is None:
            offsets = self._committed[group] = {}
        offsets[tp] = entry

    def replay_end_txn_marker(
        self, producer_id: int, committed: bool, only: Callable[[str], bool] | None = None
    ) -> None:
        """The producer's transaction ended: its pending offsets become committed (or are dropped) —
        those of the groups `only` names (the groups of the partition the marker reached; a transaction
        may commit offsets of groups in several partitions, each decided by its own marker)."""
        pending = self._pending.pop(producer_id, None)
        if pending is None:
            return
        if only is not None:
            kept = {g: offsets for g, offsets in pending.items() if not only(g)}
            if kept:
                self._pending[producer_id] = kept
                pending = {g: offsets for g, offsets in pending.items() if only(g)}
        for group in pending:
            open_txns = self._open_by_group.get(group)
            if open_txns is not None:
                open_txns.discard(producer_id)
                if not open_txns:
                    del self._open_by_group[group]
        if not committed:
            return
        for group, offsets in pending.items():
            target = self._committed.setdefault(group, {})
            for tp, entry in offsets.items():
                existing = target.get(tp)
                if existing is None or entry.record_offset > existing.record_offset:
                    target[tp] = entry
            if not target:
                del self._committed[group]

    def forget_groups(self, leaving: Callable[[str], bool]) -> None:
        """Drop the committed and pending offsets of every group `leaving` names (their partition of
        `__consumer_offsets` moved to another coordinator)."""
        for group in [g for g in self._committed if leaving(g)]:
            del self._committed[group]
        for pid in list(self._pending):
            groups = self._pending[pid]
            for group in [g for g in groups if leaving(g)]:
                del groups[group]
            if not groups:
                del self._pending[pid]
        for group in [g for g in self._open_by_group if leaving(g)]:
            del self._open_by_group[group]

    def forget_group(self, group: str) -> None:
        """Drop whatever is left of a deleted group (its tombstones were already replayed)."""
        self._committed.pop(group, None)
