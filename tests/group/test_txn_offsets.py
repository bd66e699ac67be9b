"""TxnOffsetCommit on the group coordinator: KIP-447 fencing, a transactional batch of the producer, and
offsets that stay pending until the producer's COMMIT marker (dropped on ABORT)."""

from __future__ import annotations

from exactly.errors import ErrorCode
from exactly.protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from tests.group.helpers import Harness, stable_group

E = ErrorCode


def txn_commit(
    h: Harness,
    group: str,
    offsets: dict[tuple[str, int], int],
    *,
    producer_id: int = 7000,
    epoch: int = 3,
    member_id: str = "",
    generation: int = -1,
    instance_id: str | None = None,
    metadata: str = "",
) -> dict[tuple[str, int], int]:
    topics: dict[str, list[TxnOffsetCommitRequestPartition]] = {}
    for (topic, partition), offset in offsets.items():
        topics.setdefault(topic, []).append(TxnOffsetCommitRequestPartition(partition, offset, -1, metadata))
    request = TxnOffsetCommitRequest(
        "tx", group, producer_id, epoch, generation, member_id, instance_id,
        [TxnOffsetCommitRequestTopic(t, ps) for t, ps in topics.items()],
    )  # fmt: skip
    result = h.coordinator.commit_transactional_offsets(request, lambda t, p: t != "missing")
    assert (result.producer_id, result.producer_epoch) == (producer_id, epoch)
    response = h.apply(result)
    return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}


def stable(h: Harness, group: str, topic: str, partition: int) -> tuple[int, int]:
    fetched = h.coordinator.fetch_offsets(group, [(topic, [partition])], require_stable=True)
    p = fetched.topics[0].partitions[0]
    return p.error_code, p.committed_offset


def test_pending_until_commit_marker() -> None:
    h = Harness()
    assert txn_commit(h, "copiers", {("in", 0): 10, ("in", 1): 20}) == {("in", 0): E.NONE, ("in", 1): E.NONE}
    assert [pid for _, pid, _ in h.log] == [7000, 7000]  # one transactional batch of the producer
    assert h.committed("copiers", "in", 0) == -1  # invisible while pending
    assert stable(h, "copiers", "in", 0) == (E.UNSTABLE_OFFSET_COMMIT, -1)
    h.coordinator.replay_end_txn_marker(7000, committed=True)
    assert (h.committed("copiers", "in", 0), h.committed("copiers", "in", 1)) == (10, 20)
    assert stable(h, "copiers", "in", 0) == (E.NONE, 10)


def test_aborted_offsets_are_dropped() -> None:
    h = Harness()
    h.commit("copiers", {("in", 0): 5})
    txn_commit(h, "copiers", {("in", 0): 50})
    h.coordinator.replay_end_txn_marker(7000, committed=False)
    assert h.committed("copiers", "in", 0) == 5
    assert stable(h, "copiers", "in", 0) == (E.NONE, 5)


def test_kip447_generation_member_and_instance_fencing() -> None:
    h = Harness()
    ids, generation, _ = stable_group(h, "g", 2)
    ok = txn_commit(h, "g", {("in", 0): 1}, member_id=ids[0], generation=generation)
    assert ok == {("in", 0): E.NONE}
    stale = txn_commit(h, "g", {("in", 0): 2}, member_id=ids[0], generation=generation - 1)
    assert stale == {("in", 0): E.ILLEGAL_GENERATION}
    stranger = txn_commit(h, "g", {("in", 0): 3}, member_id="nobody", generation=generation)
    assert stranger == {("in", 0): E.UNKNOWN_MEMBER_ID}
    assert [pid for _, pid, _ in h.log] == [-1, 7000]  # the stored generation, then only the accepted commit


def test_commits_without_group_management() -> None:
    """v0-2 requests (aiokafka) carry no member or generation: accepted, a simple group is created."""
    h = Harness()
    assert txn_commit(h, "simple", {("in", 0): 4}) == {("in", 0): E.NONE}
    assert "simple" in h.coordinator.groups
    assert txn_commit(h, "ghost", {("in", 0): 4}, generation=3, member_id="m") == {
        ("in", 0): E.ILLEGAL_GENERATION
    }
    assert "ghost" not in h.coordinator.groups


def test_per_partition_errors() -> None:
    h = Harness()
    codes = txn_commit(h, "g", {("in", 0): 1, ("missing", 0): 1})
    assert codes == {("in", 0): E.NONE, ("missing", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
    assert txn_commit(h, "g", {("in", 1): 1}, metadata="x" * 5000) == {("in", 1): E.OFFSET_METADATA_TOO_LARGE}
    assert txn_commit(h, "", {("in", 0): 1}) == {("in", 0): E.INVALID_GROUP_ID}
