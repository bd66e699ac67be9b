"""`OffsetManager` driven directly, on a ManualClock, with a stand-in group type (`FakeGroup`): the
offsets work for any group that implements `exactly.group.group.Group`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from exactly.clock import ManualClock
from exactly.errors import ErrorCode
from exactly.group.client import ClientInfo
from exactly.group.config import GroupConfig
from exactly.group.group import Group, GroupType, OffsetExpirationBase
from exactly.group.offset_manager import OffsetManager
from exactly.group.offsets import OffsetAndMetadata
from exactly.group.records import CoordinatorRecord, GroupMetadataKey, OffsetCommitKey, OffsetCommitValue
from exactly.group.result import Result
from exactly.protocol.messages.describe_groups import DescribedGroup
from exactly.protocol.messages.list_groups import ListedGroup
from exactly.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from exactly.protocol.messages.offset_delete import (
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
)
from exactly.protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)

DAY = 86_400_000
PID = 4000


@dataclass(eq=False)
class FakeGroup:
    group_id: str
    is_empty: bool = True
    commit_error: ErrorCode = ErrorCode.NONE
    delete_error: ErrorCode = ErrorCode.NONE
    subscribed: set[str] = field(default_factory=set)
    expiration: OffsetExpirationBase | None = lambda o: o.commit_timestamp

    @property
    def group_type(self) -> GroupType:
        return GroupType.CLASSIC

    def validate_offset_commit(
        self, member_id: str, group_instance_id: str | None, generation: int, *, transactional: bool
    ) -> ErrorCode:
        return self.commit_error

    def validate_offset_delete(self) -> ErrorCode:
        return self.delete_error

    def validate_delete_group(self) -> ErrorCode:
        return ErrorCode.NONE

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return topic in self.subscribed

    def offset_expiration_base(self) -> OffsetExpirationBase | None:
        return self.expiration

    def as_listed_group(self) -> ListedGroup:
        return ListedGroup(self.group_id, "", "Empty", "classic")

    def describe(self) -> DescribedGroup:
        return DescribedGroup(group_id=self.group_id)

    def tombstones(self) -> list[CoordinatorRecord]:
        return [CoordinatorRecord(GroupMetadataKey(self.group_id), None)]


@dataclass
class Directory:
    groups: dict[str, FakeGroup] = field(default_factory=dict)
    accepted: list[tuple[str, str]] = field(default_factory=list)

    def group(self, group_id: str) -> Group | None:
        return self.groups.get(group_id)

    def ensure_group(self, group_id: str) -> None:
        self.groups.setdefault(group_id, FakeGroup(group_id))

    def offset_commit_accepted(self, group_id: str, member_id: str) -> None:
        self.accepted.append((group_id, member_id))


class Offsets:
    """An `OffsetManager` with its log: results are replayed at once, as the coordinator's driver does."""

    def __init__(self, config: GroupConfig | None = None) -> None:
        self.clock = ManualClock()
        self.directory = Directory()
        self.manager = OffsetManager(config or GroupConfig(), self.clock, self.directory)
        self.log: list[tuple[int, CoordinatorRecord]] = []

    def apply(self, result: Result[Any]) -> Any:
        self.replay(result.records, result.producer_id)
        return result.response

    def replay(self, records: list[CoordinatorRecord], producer_id: int = -1) -> None:
        for record in records:
            assert isinstance(record.key, OffsetCommitKey)
            assert record.value is None or isinstance(record.value, OffsetCommitValue)
            self.manager.replay(len(self.log), producer_id, record.key, record.value)
            self.log.append((producer_id, record))

    def commit(
        self, group: str, offsets: dict[tuple[str, int], int], *, version: int = 8, **kwargs: Any
    ) -> dict[tuple[str, int], ErrorCode]:
        topics: dict[str, list[OffsetCommitRequestPartition]] = {}
        for (topic, partition), offset in offsets.items():
            topics.setdefault(topic, []).append(
                OffsetCommitRequestPartition(partition, offset, 3, -1, kwargs.pop("metadata", ""))
            )
        request = OffsetCommitRequest(
            group, topics=[OffsetCommitRequestTopic(t, partitions=ps) for t, ps in topics.items()], **kwargs
        )
        response = self.apply(self.manager.commit_offsets(ClientInfo(api_version=version), request))
        return {
            (t.name, p.partition_index): ErrorCode(p.error_code)
            for t in response.topics
            for p in t.partitions
        }

    def txn_commit(
        self, group: str, offsets: dict[tuple[str, int], int], producer_id: int = PID
    ) -> list[int]:
        topics: dict[str, list[TxnOffsetCommitRequestPartition]] = {}
        for (topic, partition), offset in offsets.items():
            topics.setdefault(topic, []).append(TxnOffsetCommitRequestPartition(partition, offset, 3))
        request = TxnOffsetCommitRequest(
            "txn",
            group,
            producer_id,
            7,
            topics=[TxnOffsetCommitRequestTopic(t, ps) for t, ps in topics.items()],
        )
        result = self.manager.commit_transactional_offsets(request)
        assert (result.producer_id, result.producer_epoch) == (producer_id, 7)
        response = self.apply(result)
        return [p.error_code for t in response.topics for p in t.partitions]

    def fetch(self, group: str, topic: str, partition: int, require_stable: bool = False) -> tuple[int, int]:
        response = self.manager.fetch_offsets(group, [(topic, [partition])], require_stable)
        p = response.topics[0].partitions[0]
        return p.committed_offset, p.error_code

    def expire(self, group: str) -> tuple[bool, list[tuple[str, int]]]:
        records: list[CoordinatorRecord] = []
        all_gone = self.manager.cleanup_expired_offsets(
            self.directory.groups[group], self.clock.milliseconds(), records
        )
        keys = [r.key for r in records]
        assert all(isinstance(k, OffsetCommitKey) for k in keys)
        assert all(r.value is None for r in records)
        self.replay(records)
        return all_gone, [(k.topic, k.partition) for k in keys if isinstance(k, OffsetCommitKey)]


# --- OffsetCommit ---------------------------------------------------------------------------------------


def test_commit_without_a_group_creates_it_on_replay_only() -> None:
    o = Offsets()
    result = o.manager.commit_offsets(
        ClientInfo(),
        OffsetCommitRequest(
            "simple", topics=[OffsetCommitRequestTopic("t", partitions=[OffsetCommitRequestPartition(0, 5)])]
        ),
    )
    assert "simple" not in o.directory.groups  # validation changes nothing
    assert [r.key for r in result.records] == [OffsetCommitKey("simple", "t", 0)]
    o.apply(result)
    assert "simple" in o.directory.groups
    assert o.fetch("simple", "t", 0) == (5, ErrorCode.NONE)
    assert o.manager.store.snapshot() == {"simple": {("t", 0): (5, -1, "")}}


def test_commit_stores_the_wall_clock_and_the_retention_time() -> None:
    o = Offsets()
    o.commit("g", {("t", 0): 1}, retention_time_ms=DAY)
    _, record = o.log[-1]
    assert record.value == OffsetCommitValue(1, 3, "", o.clock.milliseconds(), o.clock.milliseconds() + DAY)


def test_commit_with_a_generation_to_a_missing_group() -> None:
    o = Offsets()
    assert o.commit("g", {("t", 0): 1}, generation_id_or_member_epoch=2) == {
        ("t", 0): ErrorCode.ILLEGAL_GENERATION
    }
    assert o.commit("g", {("t", 0): 1}, generation_id_or_member_epoch=2, version=9) == {
        ("t", 0): ErrorCode.GROUP_ID_NOT_FOUND
    }
    assert o.log == []
    assert o.directory.groups == {}


def test_the_group_validates_a_commit_and_hears_of_an_accepted_one() -> None:
    o = Offsets()
    o.directory.groups["g"] = FakeGroup("g", commit_error=ErrorCode.REBALANCE_IN_PROGRESS)
    assert o.commit("g", {("t", 0): 1}, member_id="m") == {("t", 0): ErrorCode.REBALANCE_IN_PROGRESS}
    assert o.directory.accepted == []
    assert o.log == []
    o.directory.groups["g"].commit_error = ErrorCode.NONE
    assert o.commit("g", {("t", 0): 1}, member_id="m") == {("t", 0): ErrorCode.NONE}
    assert o.directory.accepted == [("g", "m")]


def test_commit_per_partition_errors() -> None:
    o = Offsets(GroupConfig(max_metadata_bytes=3))
    request = OffsetCommitRequest(
        "g",
        topics=[
            OffsetCommitRequestTopic(
                "t",
                partitions=[
                    OffsetCommitRequestPartition(0, 1, committed_metadata="abc"),
                    OffsetCommitRequestPartition(1, 1, committed_metadata="abcd"),
                    OffsetCommitRequestPartition(9, 1),
                ],
            )
        ],
    )
    result = o.manager.commit_offsets(ClientInfo(), request, lambda topic, p: p < 2)
    codes = [p.error_code for p in result.response.topics[0].partitions]  # type: ignore[union-attr]
    assert codes == [
        ErrorCode.NONE,
        ErrorCode.OFFSET_METADATA_TOO_LARGE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ]
    assert [r.key for r in result.records] == [OffsetCommitKey("g", "t", 0)]
    assert o.manager.fetch_offsets("", None).error_code == ErrorCode.INVALID_GROUP_ID


# --- TxnOffsetCommit and markers ------------------------------------------------------------------------


def test_transactional_offsets_are_pending_until_commit() -> None:
    o = Offsets()
    o.commit("g", {("t", 0): 1})
    assert o.txn_commit("g", {("t", 0): 10, ("t", 1): 11}) == [0, 0]
    assert o.fetch("g", "t", 0) == (1, ErrorCode.NONE)
    assert o.fetch("g", "t", 0, require_stable=True) == (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT)
    assert o.manager.holds_offsets("g")
    o.manager.replay_end_txn_marker(PID, committed=True)
    assert o.fetch("g", "t", 0, require_stable=True) == (10, ErrorCode.NONE)
    assert o.fetch("g", "t", 1) == (11, ErrorCode.NONE)


def test_aborted_transactional_offsets_vanish() -> None:
    o = Offsets()
    o.txn_commit("g", {("t", 0): 10})
    assert o.manager.store.pending_snapshot() == {PID: {"g": {("t", 0): 10}}}
    o.manager.replay_end_txn_marker(PID, committed=False)
    assert o.manager.store.pending_snapshot() == {}
    assert o.fetch("g", "t", 0) == (-1, ErrorCode.NONE)
    assert not o.manager.holds_offsets("g")  # the simple group replay created holds nothing now


def test_a_later_plain_commit_wins_over_a_committed_transaction() -> None:
    o = Offsets()
    o.txn_commit("g", {("t", 0): 10})
    o.commit("g", {("t", 0): 20})  # a higher record offset than the transactional one
    o.manager.replay_end_txn_marker(PID, committed=True)
    assert o.fetch("g", "t", 0) == (20, ErrorCode.NONE)


def test_transactional_commit_needs_a_producer() -> None:
    o = Offsets()
    assert o.txn_commit("g", {("t", 0): 10}, producer_id=-1) == [ErrorCode.INVALID_PRODUCER_ID_MAPPING]
    assert o.log == []


# --- OffsetDelete and group deletion ----------------------------------------------------------------------


def test_delete_offsets() -> None:
    o = Offsets()
    o.commit("g", {("t", 0): 1, ("u", 0): 2})
    o.txn_commit("g", {("t", 1): 3})

    def delete(*partitions: tuple[str, int]) -> Any:
        topics: dict[str, list[OffsetDeleteRequestPartition]] = {}
        for topic, p in partitions:
            topics.setdefault(topic, []).append(OffsetDeleteRequestPartition(p))
        request = OffsetDeleteRequest("g", [OffsetDeleteRequestTopic(t, ps) for t, ps in topics.items()])
        return o.apply(o.manager.delete_offsets(request))

    o.directory.groups["g"].delete_error = ErrorCode.NON_EMPTY_GROUP
    assert delete(("t", 0)).error_code == ErrorCode.NON_EMPTY_GROUP
    o.directory.groups["g"].delete_error = ErrorCode.NONE
    o.directory.groups["g"].subscribed = {"u"}
    response = delete(("t", 0), ("t", 1), ("t", 7), ("u", 0))
    assert [(t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in response.topics] == [
        ("t", [(0, 0), (1, 0), (7, 0)]),
        ("u", [(0, ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC)]),
    ]
    assert o.manager.store.snapshot() == {"g": {("u", 0): (2, 3, "")}}
    assert o.manager.store.pending_partitions("g") == set()  # the tombstone dropped the pending one too
    missing = o.manager.delete_offsets(OffsetDeleteRequest("nope", []))
    assert missing.response is not None
    assert missing.response.error_code == ErrorCode.GROUP_ID_NOT_FOUND


def test_delete_all_offsets_covers_pending_ones() -> None:
    o = Offsets()
    o.commit("g", {("t", 0): 1})
    o.txn_commit("g", {("t", 1): 3})
    records = o.manager.delete_all_offsets("g")
    assert [(r.key, r.value) for r in records] == [
        (OffsetCommitKey("g", "t", 0), None),
        (OffsetCommitKey("g", "t", 1), None),
    ]
    o.replay(records)
    o.manager.forget_group("g")
    assert o.manager.store.pending_partitions("g") == set()
    assert o.manager.store.snapshot() == {}


# --- retention ------------------------------------------------------------------------------------------


def test_offsets_expire_from_the_groups_base() -> None:
    o = Offsets(GroupConfig(offsets_retention_ms=DAY))
    o.commit("g", {("t", 0): 1, ("t", 1): 2})
    o.clock.advance(DAY - 1)
    o.commit("g", {("t", 1): 3})
    assert o.expire("g") == (False, [])
    o.clock.advance(1)
    assert o.expire("g") == (False, [("t", 0)])  # ("t", 1) was committed again later
    o.clock.advance(DAY)
    assert o.expire("g") == (True, [("t", 1)])
    assert o.manager.store.snapshot() == {}


def test_expiry_spares_subscribed_topics_pending_offsets_and_groups_without_a_base() -> None:
    o = Offsets(GroupConfig(offsets_retention_ms=DAY))
    o.commit("g", {("t", 0): 1, ("u", 0): 2, ("v", 0): 3})
    o.txn_commit("g", {("v", 0): 4})
    group = o.directory.groups["g"]
    group.subscribed = {"u"}
    o.clock.advance(2 * DAY)
    group.expiration = None
    assert o.expire("g") == (False, [])
    group.expiration = lambda _: o.clock.milliseconds() - DAY  # e.g. Empty since a day ago
    assert o.expire("g") == (False, [("t", 0)])
    o.manager.replay_end_txn_marker(PID, committed=False)
    group.subscribed = set()
    assert o.expire("g") == (True, [("u", 0), ("v", 0)])


def test_an_explicit_expire_timestamp_wins() -> None:
    o = Offsets(GroupConfig(offsets_retention_ms=DAY))
    o.commit("g", {("t", 0): 1}, retention_time_ms=1000)
    o.clock.advance(999)
    assert o.expire("g") == (False, [])
    o.clock.advance(1)
    assert o.expire("g") == (True, [("t", 0)])


def test_the_base_is_called_with_the_stored_offset() -> None:
    o = Offsets(GroupConfig(offsets_retention_ms=10))
    o.commit("g", {("t", 0): 1})
    seen: list[OffsetAndMetadata] = []

    def base(entry: OffsetAndMetadata) -> int:
        seen.append(entry)
        return entry.commit_timestamp

    o.directory.groups["g"].expiration = base
    o.clock.advance(10)
    assert o.expire("g") == (True, [("t", 0)])
    assert [(e.offset, e.record_offset) for e in seen] == [(1, 0)]
