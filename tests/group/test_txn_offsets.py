"""TxnOffsetCommit on the group coordinator: KIP-447 fencing, a transactional batch of the producer, and
offsets that stay pending until the producer's COMMIT marker (dropped on ABORT)."""

from __future__ import annotations

from typing import Any

from exactly.errors import ErrorCode
from exactly.group import GroupConfig, Result
from exactly.group.classic.state import ClassicGroupState
from exactly.group.records import OffsetCommitKey, OffsetCommitValue
from exactly.protocol.messages.offset_delete import (
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
)
from exactly.protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
    TxnOffsetCommitResponse,
)
from tests.group.helpers import Harness, stable_group

E = ErrorCode
S = ClassicGroupState
PID = 7000


def txn_request(
    group: str,
    offsets: dict[tuple[str, int], int],
    *,
    producer_id: int = PID,
    epoch: int = 3,
    member_id: str = "",
    generation: int = -1,
    instance_id: str | None = None,
    metadata: str = "",
) -> TxnOffsetCommitRequest:
    topics: dict[str, list[TxnOffsetCommitRequestPartition]] = {}
    for (topic, partition), offset in offsets.items():
        topics.setdefault(topic, []).append(TxnOffsetCommitRequestPartition(partition, offset, 4, metadata))
    return TxnOffsetCommitRequest(
        "tx", group, producer_id, epoch, generation, member_id, instance_id,
        [TxnOffsetCommitRequestTopic(t, ps) for t, ps in topics.items()],
    )  # fmt: skip


def prepare(
    h: Harness, group: str, offsets: dict[tuple[str, int], int], **kwargs: Any
) -> Result[TxnOffsetCommitResponse]:
    """The coordinator's result, not applied yet ("missing" is a topic that does not exist)."""
    request = txn_request(group, offsets, **kwargs)
    return h.coordinator.commit_transactional_offsets(request, lambda topic, _: topic != "missing")


def txn_commit(
    h: Harness, group: str, offsets: dict[tuple[str, int], int], **kwargs: Any
) -> dict[tuple[str, int], int]:
    """Send a TxnOffsetCommit and apply it as the broker does; the per-partition codes."""
    result = prepare(h, group, offsets, **kwargs)
    response = h.apply(result)
    assert isinstance(response, TxnOffsetCommitResponse)
    return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}


def stable(h: Harness, group: str, topic: str, partition: int) -> tuple[int, int]:
    """OffsetFetch with require_stable (KIP-447): (error code, offset)."""
    fetched = h.coordinator.fetch_offsets(group, [(topic, [partition])], require_stable=True)
    p = fetched.topics[0].partitions[0]
    return p.error_code, p.committed_offset


# --- pending until the marker ---------------------------------------------------------------------------


def test_result_is_one_transactional_batch_of_the_producer() -> None:
    h = Harness()
    h.clock.advance(1234)
    result = prepare(h, "copiers", {("in", 0): 10, ("in", 1): 20}, producer_id=PID, epoch=3, metadata="m")
    assert (result.producer_id, result.producer_epoch, result.group_id) == (PID, 3, "copiers")
    now = 1_700_000_001_234
    assert [(r.key, r.value) for r in result.records] == [
        (OffsetCommitKey("copiers", "in", 0), OffsetCommitValue(10, 4, "m", now, -1)),
        (OffsetCommitKey("copiers", "in", 1), OffsetCommitValue(20, 4, "m", now, -1)),
    ]
    h.apply(result)
    assert [(off, pid) for off, pid, _ in h.log] == [(0, PID), (1, PID)]


def test_pending_until_commit_marker() -> None:
    h = Harness()
    assert txn_commit(h, "copiers", {("in", 0): 10, ("in", 1): 20}) == {("in", 0): E.NONE, ("in", 1): E.NONE}
    assert h.committed("copiers", "in", 0) == -1  # invisible while pending
    assert h.committed("copiers", "in", 1) == -1
    assert stable(h, "copiers", "in", 0) == (E.UNSTABLE_OFFSET_COMMIT, -1)
    assert stable(h, "copiers", "in", 2) == (E.NONE, -1)  # only the pending partitions are unstable
    assert h.coordinator.offsets.pending_snapshot() == {PID: {"copiers": {("in", 0): 10, ("in", 1): 20}}}
    h.coordinator.replay_end_txn_marker(PID, committed=True)
    assert (h.committed("copiers", "in", 0), h.committed("copiers", "in", 1)) == (10, 20)
    assert stable(h, "copiers", "in", 0) == (E.NONE, 10)
    assert h.coordinator.offsets.pending_snapshot() == {}
    assert h.coordinator.offsets.snapshot() == {"copiers": {("in", 0): (10, 4, ""), ("in", 1): (20, 4, "")}}


def test_aborted_offsets_are_dropped() -> None:
    h = Harness()
    h.commit("copiers", {("in", 0): 5})
    txn_commit(h, "copiers", {("in", 0): 50, ("in", 1): 60})
    assert stable(h, "copiers", "in", 0) == (E.UNSTABLE_OFFSET_COMMIT, -1)
    assert h.committed("copiers", "in", 0) == 5  # without require_stable: the last committed offset
    h.coordinator.replay_end_txn_marker(PID, committed=False)
    assert h.committed("copiers", "in", 0) == 5
    assert h.committed("copiers", "in", 1) == -1
    assert stable(h, "copiers", "in", 0) == (E.NONE, 5)
    assert h.coordinator.offsets.pending_snapshot() == {}


def test_two_producers_end_independently() -> None:
    h = Harness()
    txn_commit(h, "g", {("in", 0): 10}, producer_id=1)
    txn_commit(h, "g", {("in", 0): 20, ("in", 1): 21}, producer_id=2)
    h.coordinator.replay_end_txn_marker(2, committed=False)
    assert stable(h, "g", "in", 0) == (E.UNSTABLE_OFFSET_COMMIT, -1)  # producer 1 is still open
    assert stable(h, "g", "in", 1) == (E.NONE, -1)
    h.coordinator.replay_end_txn_marker(1, committed=True)
    assert stable(h, "g", "in", 0) == (E.NONE, 10)
    h.coordinator.replay_end_txn_marker(1, committed=True)  # a marker of a producer with nothing pending
    assert h.committed("g", "in", 0) == 10


def test_pending_offsets_survive_a_restart() -> None:
    h = Harness()
    h.commit("g", {("in", 0): 1})
    txn_commit(h, "g", {("in", 0): 2})
    fresh = h.rebuilt()
    assert fresh.offsets.pending_snapshot() == {PID: {"g": {("in", 0): 2}}}
    assert fresh.fetch_offsets("g", [("in", [0])], require_stable=True).topics[0].partitions[
        0
    ].error_code == (E.UNSTABLE_OFFSET_COMMIT)
    fresh.replay_end_txn_marker(PID, committed=True)
    assert fresh.offsets.snapshot() == {"g": {("in", 0): (2, 4, "")}}


# --- ordering with plain commits (the later record wins) ------------------------------------------------


def test_plain_commit_after_a_pending_one_wins() -> None:
    """Kafka keeps the offset whose record is later in the log: compaction could otherwise bring back an
    older one. A plain commit written after the transactional one survives its COMMIT marker."""
    h = Harness()
    txn_commit(h, "g", {("in", 0): 10, ("in", 1): 11})
    assert h.commit("g", {("in", 0): 99}) == {("in", 0): E.NONE}
    assert h.committed("g", "in", 0) == 99  # visible at once
    assert stable(h, "g", "in", 0) == (E.UNSTABLE_OFFSET_COMMIT, -1)  # the transaction is still open
    h.coordinator.replay_end_txn_marker(PID, committed=True)
    assert (h.committed("g", "in", 0), h.committed("g", "in", 1)) == (99, 11)


def test_transactional_commit_after_a_plain_one_replaces_it() -> None:
    h = Harness()
    h.commit("g", {("in", 0): 5})
    txn_commit(h, "g", {("in", 0): 50})
    assert h.committed("g", "in", 0) == 5
    h.coordinator.replay_end_txn_marker(PID, committed=True)
    assert h.committed("g", "in", 0) == 50


def test_offset_delete_removes_pending_offsets() -> None:
    h = Harness()
    txn_commit(h, "g", {("in", 0): 10, ("in", 1): 11})
    request = OffsetDeleteRequest("g", [OffsetDeleteRequestTopic("in", [OffsetDeleteRequestPartition(0)])])
    h.apply(h.coordinator.delete_offsets(request))
    assert stable(h, "g", "in", 0) == (E.NONE, -1)
    h.coordinator.replay_end_txn_marker(PID, committed=True)
    assert h.coordinator.offsets.snapshot() == {"g": {("in", 1): (11, 4, "")}}


# --- validation -----------------------------------------------------------------------------------------


def test_kip447_generation_and_member_fencing() -> None:
    h = Harness()
    ids, generation, _ = stable_group(h, "g", 2)
    ok = txn_commit(h, "g", {("in", 0): 1}, member_id=ids[0], generation=generation)
    assert ok == {("in", 0): E.NONE}
    stale = txn_commit(h, "g", {("in", 0): 2}, member_id=ids[0], generation=generation - 1)
    assert stale == {("in", 0): E.ILLEGAL_GENERATION}
    stranger = txn_commit(h, "g", {("in", 0): 3}, member_id="nobody", generation=generation)
    assert stranger == {("in", 0): E.UNKNOWN_MEMBER_ID}
    assert [pid for _, pid, _ in h.log] == [-1, PID]  # the stored generation, then only the accepted commit
    h.coordinator.replay_end_txn_marker(PID, committed=True)
    assert h.committed("g", "in", 0) == 1


def test_kip447_static_member_fencing() -> None:
    h = Harness()
    a = h.join("g", instance_id="a")
    b = h.join("g", instance_id="b")
    h.advance(0)
    ra, rb = h.resolve(a), h.resolve(b)
    generation = ra.generation_id
    h.sync("g", rb.member_id, generation, instance_id="b")
    h.sync("g", ra.member_id, generation, {ra.member_id: b"A", rb.member_id: b"B"}, instance_id="a")
    assert h.coordinator.groups["g"].state is S.STABLE
    # b's instance id with a's member id: an old instance of "b" (or a confused one) is fenced
    fenced = txn_commit(
        h, "g", {("in", 0): 1}, member_id=ra.member_id, generation=generation, instance_id="b"
    )
    assert fenced == {("in", 0): E.FENCED_INSTANCE_ID}
    ok = txn_commit(h, "g", {("in", 0): 2}, member_id=rb.member_id, generation=generation, instance_id="b")
    assert ok == {("in", 0): E.NONE}
    assert [pid for _, pid, _ in h.log] == [-1, PID]


def test_v0_commit_without_member_is_accepted_by_a_group_with_members() -> None:
    """v0-2 carry no member or generation: unlike a plain commit, a transactional one is accepted from a
    group that has members (Kafka's `validateOffsetCommit(..., isTransactional=true)`)."""
    h = Harness()
    stable_group(h, "g", 2)
    assert h.commit("g", {("in", 0): 1}) == {("in", 0): E.UNKNOWN_MEMBER_ID}
    assert txn_commit(h, "g", {("in", 0): 2}) == {("in", 0): E.NONE}


def test_accepted_while_completing_rebalance() -> None:
    h = Harness()
    member, parked = h.join_new("g")
    h.advance(0)
    generation = h.resolve(parked).generation_id
    assert h.coordinator.groups["g"].state is S.COMPLETING_REBALANCE
    plain = h.commit("g", {("in", 0): 1}, member_id=member, generation=generation)
    assert plain == {("in", 0): E.REBALANCE_IN_PROGRESS}
    assert txn_commit(h, "g", {("in", 0): 2}, member_id=member, generation=generation) == {("in", 0): E.NONE}


def test_missing_group() -> None:
    """v0-2 requests (aiokafka, old clients) carry generation -1: accepted, and the "simple" group
    exists once the record is replayed. A generation for a group that does not exist is stale."""
    h = Harness()
    result = prepare(h, "simple", {("in", 0): 4})
    assert "simple" not in h.coordinator.groups  # only the replay creates it
    h.apply(result)
    assert h.coordinator.groups["simple"].state is S.EMPTY
    ghost = txn_commit(h, "ghost", {("in", 0): 4}, generation=3, member_id="m")
    assert ghost == {("in", 0): E.ILLEGAL_GENERATION}
    assert "ghost" not in h.coordinator.groups
    assert [(r.key.group, pid) for _, pid, r in h.log] == [("simple", PID)]


def test_per_partition_errors() -> None:
    h = Harness()
    codes = txn_commit(h, "g", {("in", 0): 1, ("missing", 0): 1})
    assert codes == {("in", 0): E.NONE, ("missing", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
    too_large = txn_commit(h, "g", {("in", 1): 1, ("in", 2): 1}, metadata="x" * 5000)
    assert too_large == {("in", 1): E.OFFSET_METADATA_TOO_LARGE, ("in", 2): E.OFFSET_METADATA_TOO_LARGE}
    assert txn_commit(h, "", {("in", 0): 1, ("missing", 0): 1}) == {
        ("in", 0): E.INVALID_GROUP_ID,
        ("missing", 0): E.UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert [r.key for _, _, r in h.log] == [OffsetCommitKey("g", "in", 0)]


def test_no_producer_id_is_refused() -> None:
    """Without a producer the records would be a plain commit that no transaction controls."""
    h = Harness()
    result = prepare(h, "g", {("in", 0): 1}, producer_id=-1, epoch=-1)
    assert result.records == []
    assert h.apply(result).topics[0].partitions[0].error_code == E.INVALID_PRODUCER_ID_MAPPING


def test_failed_append_does_not_rebalance() -> None:
    """A transactional commit whose append fails (e.g. KIP-890 verification) changed nothing, even one
    accepted during CompletingRebalance."""
    h = Harness()
    member, parked = h.join_new("g")
    h.advance(0)
    generation = h.resolve(parked).generation_id
    result = prepare(h, "g", {("in", 0): 1}, member_id=member, generation=generation)
    assert result.records
    h.apply(h.coordinator.on_append_failed(result))
    assert h.coordinator.groups["g"].state is S.COMPLETING_REBALANCE
    assert h.coordinator.offsets.pending_snapshot() == {}
    assert txn_commit(h, "g", {("in", 0): 2}, member_id=member, generation=generation) == {("in", 0): E.NONE}


# --- leadership moves -----------------------------------------------------------------------------------


def test_unloading_a_partition_forgets_its_groups_deadlines_and_offsets_only() -> None:
    h = Harness(GroupConfig(num_partitions=4, initial_rebalance_delay_ms=0))
    names = [f"g{i}" for i in range(12)]
    for name in names:
        _, generation, leader = stable_group(h, name, 1)
        assert h.commit(name, {("t", 0): 7}, member_id=leader, generation=generation) == {("t", 0): 0}
        codes = txn_commit(h, name, {("t", 1): 9}, member_id=leader, generation=generation)
        assert codes == {("t", 1): 0}
    moved = h.coordinator.partition_for(names[0])
    staying = {n for n in names if h.coordinator.partition_for(n) != moved}
    assert staying
    assert len(staying) < len(names)

    h.coordinator.unload_partition(moved)

    assert set(h.coordinator.groups) == staying
    scheduled = h.coordinator.timers.keys()
    assert {d.group_id for d in scheduled} == staying  # the sessions of the others only
    assert set(h.coordinator.offsets.snapshot()) == staying
    assert set(h.coordinator.offsets.pending_snapshot()[PID]) == staying
    h.coordinator.replay_end_txn_marker(PID, True)
    assert {g for g, offsets in h.coordinator.offsets.snapshot().items() if ("t", 1) in offsets} == staying
