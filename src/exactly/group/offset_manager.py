"""Committed offsets as a sans-IO manager (Kafka's `OffsetMetadataManager`): OffsetCommit,
TxnOffsetCommit, OffsetFetch, OffsetDelete, retention, and the replay of OffsetCommit records and
COMMIT/ABORT markers into the `OffsetStore`.

Like the group side, an operation only validates and returns the records to append; `replay` is the
only place the offsets change. What it needs of the groups — whether a group exists, its fencing and
subscription checks, its retention rule — goes through `GroupDirectory` and the `group.Group`
interface, so any group type's offsets work the same way.

Transactions: `commit_transactional_offsets` returns OffsetCommit records with the producer in
`Result.producer_id`/`producer_epoch`; the driver appends them as one transactional batch of that
producer and replays them with that producer id, which keeps them pending until the transaction's
marker reaches the partition (`replay_end_txn_marker`): COMMIT materializes them, ABORT drops them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Protocol

from exactly.clock import Clock
from exactly.errors import ErrorCode
from exactly.group.client import ClientInfo
from exactly.group.config import GroupConfig
from exactly.group.group import Group, GroupType
from exactly.group.offsets import OffsetStore, TopicPartition
from exactly.group.records import CoordinatorRecord, OffsetCommitKey, OffsetCommitValue
from exactly.group.result import Result
from exactly.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from exactly.protocol.messages.offset_delete import (
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
)
from exactly.protocol.messages.offset_fetch import (
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartitions,
    OffsetFetchResponseTopics,
)
from exactly.protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitResponse,
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)

__all__ = ["GroupDirectory", "OffsetManager", "PartitionExists"]

_NO_OFFSET = -1
_CONSUMER_PROTOCOL_COMMIT_VERSION = 9
_CommitPartition = OffsetCommitRequestPartition | TxnOffsetCommitRequestPartition
PartitionExists = Callable[[str, int], bool]


class GroupDirectory(Protocol):
    """What the offset manager needs of the group managers."""

    def group(self, group_id: str) -> Group | None: ...

    def ensure_group(self, group_id: str) -> None:
        """A committed offset was replayed: its group exists (an Empty "simple" group if nothing else)."""
        ...

    def offset_commit_accepted(self, group_id: str, member_id: str) -> None:
        """A member's OffsetCommit passed validation (a classic member's session counts it as a
        heartbeat)."""
        ...


class OffsetManager:
    def __init__(self, config: GroupConfig, clock: Clock, groups: GroupDirectory) -> None:
        self.config = config
        self.clock = clock
        self.groups = groups
        self.store = OffsetStore()

    # --- OffsetCommit and TxnOffsetCommit ----------------------------------------------------------------

    def commit_offsets(
        self,
        client: ClientInfo,
        request: OffsetCommitRequest,
        partition_exists: PartitionExists | None = None,
    ) -> Result[OffsetCommitResponse]:
        group_id = request.group_id
        generation = request.generation_id_or_member_epoch
        error = self._validate_commit(
            group_id, request.member_id, request.group_instance_id, generation, transactional=False
        )
        group = self.groups.group(group_id)
        if error is ErrorCode.ILLEGAL_GENERATION and group is None and client.api_version >= 9:
            error = ErrorCode.GROUP_ID_NOT_FOUND  # Kafka's OffsetMetadataManager, OffsetCommit v9+
        if (
            not error
            and group is not None
            and group.group_type is GroupType.CONSUMER
            and client.api_version < _CONSUMER_PROTOCOL_COMMIT_VERSION
            and not (generation < 0 and group.is_empty)
        ):
            error = ErrorCode.UNSUPPORTED_VERSION  # a KIP-848 member commits with v9+ (member epochs)
        if not error and group is not None:
            self.groups.offset_commit_accepted(group_id, request.member_id)
        now = self.clock.milliseconds()
        expire = now + request.retention_time_ms if request.retention_time_ms >= 0 else -1
        records: list[CoordinatorRecord] = []
        topics = [
            OffsetCommitResponseTopic(
                topic.name,
                topic.topic_id,
                [
                    OffsetCommitResponsePartition(p.partition_index, code)
                    for p, code in self._offset_records(
                        group_id, topic.name, topic.partitions, error, now, expire, partition_exists, records
                    )
                ],
            )
            for topic in request.topics
        ]
        return Result(OffsetCommitResponse(topics=topics), group_id, records)

    def commit_transactional_offsets(
        self,
        request: TxnOffsetCommitRequest,
        partition_exists: PartitionExists | None = None,
    ) -> Result[TxnOffsetCommitResponse]:
        """TxnOffsetCommit (Kafka's `OffsetMetadataManager.commitTransactionalOffset`): the offsets are
        appended as one transactional batch of the producer (`Result.producer_id`/`producer_epoch`) and
        stay pending until its COMMIT marker (`replay_end_txn_marker`); ABORT drops them.

        Validation: an empty group id is INVALID_GROUP_ID; a missing group accepts only generation < 0
        (v0-2 requests carry none; the "simple" group comes into existence on replay), else
        ILLEGAL_GENERATION; an existing group gets the KIP-447 check (v3 member/generation/instance:
        UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, ILLEGAL_GENERATION), which, unlike a plain commit, accepts
        a commit without member/generation from a non-empty group and one during CompletingRebalance.
        Per partition: UNKNOWN_TOPIC_OR_PARTITION, OFFSET_METADATA_TOO_LARGE. Unlike a plain commit it
        does not count as the member's heartbeat and has no retention time (the API never carried one)."""
        group_id = request.group_id
        if group_id and request.producer_id < 0:
            # Without a producer the records would be a plain commit that no transaction controls
            # (the partition's KIP-890 check only runs for transactional batches).
            error = ErrorCode.INVALID_PRODUCER_ID_MAPPING
        else:
            error = self._validate_commit(
                group_id,
                request.member_id,
                request.group_instance_id,
                request.generation_id,
                transactional=True,
            )
        now = self.clock.milliseconds()
        records: list[CoordinatorRecord] = []
        topics = [
            TxnOffsetCommitResponseTopic(
                topic.name,
                [
                    TxnOffsetCommitResponsePartition(p.partition_index, code)
                    for p, code in self._offset_records(
                        group_id, topic.name, topic.partitions, error, now, -1, partition_exists, records
                    )
                ],
            )
            for topic in request.topics
        ]
        return Result(
            TxnOffsetCommitResponse(topics=topics),
            group_id,
            records,
            producer_id=request.producer_id,
            producer_epoch=request.producer_epoch,
        )

    def _validate_commit(
        self, group_id: str, member_id: str, instance_id: str | None, generation: int, *, transactional: bool
    ) -> ErrorCode:
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        group = self.groups.group(group_id)
        if group is None:
            # No group: only a commit outside group management (generation -1) creates a "simple" group
            # (when its record is replayed).
            return ErrorCode.ILLEGAL_GENERATION if generation >= 0 else ErrorCode.NONE
        return group.validate_offset_commit(member_id, instance_id, generation, transactional=transactional)

    def _offset_records(
        self,
        group_id: str,
        topic: str,
        partitions: Sequence[_CommitPartition],
        error: ErrorCode,
        now: int,
        expire: int,
        partition_exists: PartitionExists | None,
        records: list[CoordinatorRecord],
    ) -> Iterator[tuple[_CommitPartition, ErrorCode]]:
        """Each partition's code; the OffsetCommit records of the accepted ones go to `records`."""
        for p in partitions:
            code = error
            metadata = p.committed_metadata or ""
            if partition_exists is not None and not partition_exists(topic, p.partition_index):
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif not code and len(metadata) > self.config.max_metadata_bytes:
                code = ErrorCode.OFFSET_METADATA_TOO_LARGE
            elif not code:
                records.append(
                    CoordinatorRecord(
                        OffsetCommitKey(group_id, topic, p.partition_index),
                        OffsetCommitValue(
                            p.committed_offset, p.committed_leader_epoch, metadata, now, expire
                        ),
                    )
                )
            yield p, code

    # --- OffsetFetch -------------------------------------------------------------------------------------

    def fetch_offsets(
        self, group_id: str, topics: list[tuple[str, list[int]]] | None, require_stable: bool = False
    ) -> OffsetFetchResponseGroup:
        """OffsetFetch for one group: the requested partitions, or every committed one (`topics` None).

        With `require_stable` (KIP-447) a partition with a pending transactional offset answers
        UNSTABLE_OFFSET_COMMIT (retriable) instead of an offset that may be about to change.
        """
        if not group_id:
            return OffsetFetchResponseGroup(group_id, [], ErrorCode.INVALID_GROUP_ID)
        store = self.store
        committed = store.group_offsets(group_id) if self.groups.group(group_id) is not None else {}
        out: dict[str, list[OffsetFetchResponsePartitions]] = {}
        if topics is None:
            wanted: list[TopicPartition] = sorted(committed)
        else:
            wanted = [(name, p) for name, partitions in topics for p in partitions]
            for name, _ in topics:
                out.setdefault(name, [])
        for tp in wanted:
            entry = committed.get(tp)
            if require_stable and store.has_pending(group_id, tp):
                partition = OffsetFetchResponsePartitions(
                    tp[1], _NO_OFFSET, -1, "", ErrorCode.UNSTABLE_OFFSET_COMMIT
                )
            elif entry is None:
                partition = OffsetFetchResponsePartitions(tp[1], _NO_OFFSET, -1, "", ErrorCode.NONE)
            else:
                partition = OffsetFetchResponsePartitions(
                    tp[1], entry.offset, entry.leader_epoch, entry.metadata, ErrorCode.NONE
                )
            out.setdefault(tp[0], []).append(partition)
        return OffsetFetchResponseGroup(
            group_id, [OffsetFetchResponseTopics(name, partitions=parts) for name, parts in out.items()]
        )

    # --- OffsetDelete, group deletion and retention ------------------------------------------------------

    def delete_offsets(self, request: OffsetDeleteRequest) -> Result[OffsetDeleteResponse]:
        group_id = request.group_id
        if not group_id:
            return Result(OffsetDeleteResponse(error_code=ErrorCode.INVALID_GROUP_ID), group_id)
        group = self.groups.group(group_id)
        if group is None:
            return Result(OffsetDeleteResponse(error_code=ErrorCode.GROUP_ID_NOT_FOUND), group_id)
        error = group.validate_offset_delete()
        if error:
            return Result(OffsetDeleteResponse(error_code=error), group_id)
        records: list[CoordinatorRecord] = []
        topics: list[OffsetDeleteResponseTopic] = []
        for topic in request.topics:
            subscribed = group.is_subscribed_to_topic(topic.name)
            partitions = []
            for p in topic.partitions:
                if subscribed:
                    partitions.append(
                        OffsetDeleteResponsePartition(p.partition_index, ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC)
                    )
                    continue
                tp = (topic.name, p.partition_index)
                if self.store.get(group_id, tp) is not None or self.store.has_pending(group_id, tp):
                    records.append(CoordinatorRecord(OffsetCommitKey(group_id, *tp), None))
                partitions.append(OffsetDeleteResponsePartition(p.partition_index, ErrorCode.NONE))
            topics.append(OffsetDeleteResponseTopic(topic.name, partitions))
        return Result(OffsetDeleteResponse(topics=topics), group_id, records)

    def delete_all_offsets(self, group_id: str) -> list[CoordinatorRecord]:
        """Tombstones for every committed and pending offset of a group that is being deleted."""
        store = self.store
        partitions = set(store.group_offsets(group_id)) | store.pending_partitions(group_id)
        return [CoordinatorRecord(OffsetCommitKey(group_id, t, p), None) for t, p in sorted(partitions)]

    def cleanup_expired_offsets(self, group: Group, now: int, records: list[CoordinatorRecord]) -> bool:
        """offsets.retention.minutes (KIP-211): tombstones for the group's expired offsets go to
        `records`; True when none is left afterwards (nor any open transaction's)."""
        group_id = group.group_id
        store = self.store
        offsets = store.group_offsets(group_id)
        if not offsets:
            return not store.has_open_transactions(group_id)
        base = group.offset_expiration_base()
        if base is None:
            return False
        retention = self.config.offsets_retention_ms
        all_expired = True
        for tp, entry in sorted(offsets.items()):
            if group.is_subscribed_to_topic(tp[0]):
                all_expired = False
                continue
            if entry.expire_timestamp >= 0:
                expired = now >= entry.expire_timestamp
            else:
                expired = now - base(entry) >= retention
            if expired and not store.has_pending(group_id, tp):
                records.append(CoordinatorRecord(OffsetCommitKey(group_id, *tp), None))
            else:
                all_expired = False
        return all_expired and not store.has_open_transactions(group_id)

    def holds_offsets(self, group_id: str) -> bool:
        """Committed offsets, or an open transaction's, keep a group alive."""
        return self.store.has_offsets(group_id) or self.store.has_open_transactions(group_id)

    # --- replay ------------------------------------------------------------------------------------------

    def replay(
        self, record_offset: int, producer_id: int, key: OffsetCommitKey, value: OffsetCommitValue | None
    ) -> None:
        """Apply one OffsetCommit record of `__consumer_offsets` (pending when `producer_id` >= 0)."""
        if value is not None:
            # A commit without group management: the group exists as an empty "simple" group.
            self.groups.ensure_group(key.group)
        self.store.replay(record_offset, producer_id, key, value)

    def replay_end_txn_marker(
        self, producer_id: int, committed: bool, only: Callable[[str], bool] | None = None
    ) -> None:
        """A COMMIT/ABORT marker reached a partition: materialize or drop the pending offsets (of the
        groups `only` names: that partition's)."""
        self.store.replay_end_txn_marker(producer_id, committed, only)

    def forget_group(self, group_id: str) -> None:
        """The group was deleted (its offsets' tombstones were replayed before its own)."""
        self.store.forget_group(group_id)
