"""Loading `__consumer_offsets` from a real partition log at start-up (the broker's `load_partition`):
the loader's fast path gives what `replay` gives, transactional offsets follow their markers, and
records that are not classic group records are skipped."""

from __future__ import annotations

import struct
from pathlib import Path

from exactly.broker.groups import load_partition
from exactly.clock import ManualClock
from exactly.group import GroupConfig, GroupCoordinator
from exactly.group.records import (
    CoordinatorRecord,
    GroupMetadataKey,
    OffsetCommitKey,
    OffsetCommitValue,
    build_batch,
)
from exactly.records.builder import BatchBuilder
from exactly.records.control import ControlRecordType, EndTxnMarker
from exactly.storage.cleaner import clean_log
from exactly.storage.config import CleanupPolicy, LogConfig
from exactly.storage.log import PartitionLog
from exactly.storage.log_manager import LogManager
from exactly.storage.producer_state import AppendOrigin
from tests.group.helpers import Harness, stable_group
from tests.storage.helpers import leader_append, leader_append_marker


def _log(tmp_path: Path, clock: ManualClock) -> tuple[LogManager, PartitionLog]:
    manager = LogManager(tmp_path, LogConfig(cleanup_policy=CleanupPolicy.COMPACT), clock)
    manager.startup()
    return manager, manager.get_or_create_log("__consumer_offsets", 0)


def test_load_equals_replay(tmp_path: Path) -> None:
    h = Harness()
    ids, generation, leader = stable_group(h, "g", 3)
    h.commit("g", {("t", 0): 5, ("t", 1): 6, ("u", 0): 7}, member_id=leader, generation=generation)
    h.commit("simple", {("x", 0): 1}, metadata="meta")
    h.commit("simple", {("x", 1): 2}, retention_ms=60_000)  # stored as value v1
    h.commit("doomed", {("x", 0): 1})
    h.leave("g", (ids[2], None))
    h.apply(h.coordinator.delete_group("doomed"))
    records = [r for _, _, r in h.log]
    manager, plog = _log(tmp_path, h.clock)
    for i in range(0, len(records), 4):  # batch boundaries do not matter
        leader_append(plog, build_batch(records[i : i + 4], 1), origin=AppendOrigin.COORDINATOR)
    # a record of a KIP-932 share group (ShareGroupMetadata, record type 11) is skipped
    foreign = BatchBuilder()
    foreign.append(1, struct.pack(">h", 11) + struct.pack(">h", 1) + b"z", b"\x00\x00")
    leader_append(plog, foreign.build(), origin=AppendOrigin.COORDINATOR)

    loaded = GroupCoordinator(h.config, h.clock)
    assert load_partition(loaded, plog) == len(records)
    replayed = h.rebuilt()
    assert loaded.offsets.snapshot() == replayed.offsets.snapshot() == h.coordinator.offsets.snapshot()
    assert set(loaded.groups) == set(replayed.groups) == {"g", "simple"}
    for name in loaded.groups:
        assert loaded.groups[name].stored_view() == replayed.groups[name].stored_view()
    assert loaded.offsets.get("simple", ("x", 1)) is not None
    assert loaded.offsets.get("simple", ("x", 1)).expire_timestamp >= 0  # type: ignore[union-attr]
    manager.close()


def test_load_applies_transaction_markers(tmp_path: Path) -> None:
    clock = ManualClock()
    manager, plog = _log(tmp_path, clock)

    def txn_commit(producer_id: int, offset: int) -> None:
        record = CoordinatorRecord(OffsetCommitKey("g", "t", 0), OffsetCommitValue(offset, -1, "", 1))
        batch = build_batch(
            [record], 1, producer_id=producer_id, producer_epoch=0, base_sequence=0, transactional=True
        )
        leader_append(plog, batch, origin=AppendOrigin.COORDINATOR)

    plain = CoordinatorRecord(OffsetCommitKey("g", "t", 1), OffsetCommitValue(3, -1, "", 1))
    leader_append(plog, build_batch([plain], 1), origin=AppendOrigin.COORDINATOR)
    txn_commit(100, 10)
    leader_append_marker(plog, 100, 0, EndTxnMarker(ControlRecordType.COMMIT, 0))
    txn_commit(200, 20)
    leader_append_marker(plog, 200, 0, EndTxnMarker(ControlRecordType.ABORT, 0))
    txn_commit(300, 30)  # still open at the "crash"

    loaded = GroupCoordinator(GroupConfig(), clock)
    load_partition(loaded, plog)
    assert loaded.offsets.snapshot() == {"g": {("t", 0): (10, -1, ""), ("t", 1): (3, -1, "")}}
    assert loaded.offsets.pending_snapshot() == {300: {"g": {("t", 0): 30}}}
    unstable = loaded.fetch_offsets("g", [("t", [0])], require_stable=True)
    assert unstable.topics[0].partitions[0].error_code == 88  # UNSTABLE_OFFSET_COMMIT
    manager.close()


def test_group_tombstone_then_new_generation(tmp_path: Path) -> None:
    """A group deleted and created again: the loader ends with the new one."""
    h = Harness()
    ids, _, _ = stable_group(h, "g", 1)
    h.leave("g", (ids[0], None))
    h.apply(h.coordinator.delete_group("g"))
    stable_group(h, "g", 2)
    manager, plog = _log(tmp_path, h.clock)
    leader_append(plog, build_batch([r for _, _, r in h.log], 1), origin=AppendOrigin.COORDINATOR)
    loaded = GroupCoordinator(h.config, h.clock)
    load_partition(loaded, plog)
    assert loaded.groups["g"].stored_view() == h.coordinator.groups["g"].stored_view()
    assert loaded.groups["g"].generation == 1
    assert [r.key for _, _, r in h.log].count(GroupMetadataKey("g")) == 4
    manager.close()


def test_compacted_log_loads_the_same_state(tmp_path: Path) -> None:
    """After the cleaner compacts `__consumer_offsets`, loading it gives the same groups and offsets."""
    h = Harness()
    for round_ in range(20):
        ids, generation, leader = stable_group(h, f"g{round_ % 3}", 2)
        h.commit(
            f"g{round_ % 3}",
            {("t", p): round_ * 10 + p for p in range(4)},
            member_id=leader,
            generation=generation,
        )
        h.commit("simple", {("x", round_ % 5): round_})
        for member in ids:
            h.leave(f"g{round_ % 3}", (member, None))
    h.apply(h.coordinator.delete_group("g0"))
    config = LogConfig(cleanup_policy=CleanupPolicy.COMPACT, segment_bytes=2048, delete_retention_ms=0)
    manager = LogManager(tmp_path, config, h.clock)
    manager.startup()
    plog = manager.get_or_create_log("__consumer_offsets", 0, config)
    for _, _, record in h.log:
        leader_append(plog, build_batch([record], h.clock.milliseconds()), origin=AppendOrigin.COORDINATOR)
    plog.roll()
    plog.flush()
    before = plog.size_in_bytes
    h.clock.advance(1)
    assert clean_log(plog, h.clock.milliseconds()) > 0
    assert plog.size_in_bytes < before / 3
    loaded = GroupCoordinator(h.config, h.clock)
    load_partition(loaded, plog)
    assert loaded.offsets.snapshot() == h.coordinator.offsets.snapshot()
    assert set(loaded.groups) == set(h.coordinator.groups) == {"g1", "g2", "simple"}
    for name, group in h.coordinator.groups.items():
        assert loaded.groups[name].stored_view() == group.stored_view()
    manager.close()
