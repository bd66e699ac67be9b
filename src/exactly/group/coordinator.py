"""The group coordinator (`__consumer_offsets`) as a sans-IO facade: what the broker calls.

It owns the groups, the timers and the offsets, and hands each operation to the manager it belongs to
(Kafka's `GroupCoordinatorShard` in front of `GroupMetadataManager` and `OffsetMetadataManager`):

* `classic/` — the classic group protocol (`ClassicGroupManager`: JoinGroup, SyncGroup, Heartbeat,
  LeaveGroup, rebalances, static members; `ClassicGroup` and its state machine).
* `consumer/` — the KIP-848 consumer group protocol (`ConsumerGroupManager`: ConsumerGroupHeartbeat,
  ConsumerGroupDescribe, server-side assignors, incremental reconciliation; `ConsumerGroup`). A group
  id is one type at a time: `self.groups` (classic) and `self.consumer_groups` never share an id. An
  empty classic group becomes a consumer group on the first consumer-protocol join, an empty consumer
  group a classic one on the first classic JoinGroup; a non-empty group of the other type answers
  GROUP_ID_NOT_FOUND (ConsumerGroupHeartbeat) or INCONSISTENT_GROUP_PROTOCOL (JoinGroup).
* `share/` — KIP-932 share groups (`ShareGroupManager`: ShareGroupHeartbeat, ShareGroupDescribe, the
  `simple` assignor; membership in memory, no records). A share group id is never also a classic or
  consumer group id: the other protocols' joins answer INCONSISTENT_GROUP_PROTOCOL / GROUP_ID_NOT_FOUND,
  and a share heartbeat for a non-empty group of another type GROUP_ID_NOT_FOUND.
* `offset_manager.py` — committed offsets (`OffsetManager`: OffsetCommit, TxnOffsetCommit,
  OffsetFetch, OffsetDelete, retention, replay of offset records and COMMIT/ABORT markers).
* here — ListGroups, DescribeGroups, DeleteGroups and offset expiry (group-type independent, through
  `group.Group`), the deadlines (`deadlines.py`: `tick` matches each one that passed to its action),
  and the routing of replayed records.

How it is driven (the broker's `broker/groups.py` is the only driver besides tests):

1. An operation (`join_group`, `sync_group`, `heartbeat`, `leave_group`, `commit_offsets`,
   `commit_transactional_offsets`, `delete_group`, `delete_offsets`, `expire_offsets`, `tick`)
   validates the request against the current state and returns a `Result`: the records to append
   to the group's partition of `__consumer_offsets` (`partition_for`), the caller's response — or
   `Parked(waiter)` when the request must wait (a JoinGroup until the rebalance completes, a
   follower's SyncGroup until the leader's assignment is stored) — and `completions`: responses for
   requests parked earlier.
2. The driver appends the records (one batch) and immediately calls `replay` for each, with its
   offset, before running any other operation (`_require_applied` enforces this). The stored state
   changes only there (see `classic/state.py` for what is stored and what is rendezvous).
3. The driver sends the responses and completions once the partition is durable up to its end.

`load_batch` replays a stored batch at start-up (data records and COMMIT/ABORT markers), which is the
same code path. `tick(now)` acts on session, join and sync deadlines one at a time (each result must be
applied before the next is asked for); `next_deadline()` says when to call it again.

Transactions: `commit_transactional_offsets` (TxnOffsetCommit) returns OffsetCommit records with the
producer in `Result.producer_id`/`producer_epoch`; the driver appends them as one transactional batch
of that producer (`records.build_batch(..., producer_id=..., transactional=True)`) and replays them
with that producer id, which keeps them pending (`OffsetStore`); the COMMIT/ABORT marker written to the
partition calls `replay_end_txn_marker`. `ClassicGroup.validate_offset_commit(..., transactional=True)`
is the KIP-447 fencing check.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any, TypeVar, assert_never

from exactly.clock import Clock
from exactly.errors import CorruptRecordError, ErrorCode
from exactly.group.classic.group import ClassicGroup
from exactly.group.classic.manager import ClassicGroupManager
from exactly.group.classic.responses import completions_summary
from exactly.group.classic.state import ClassicGroupState
from exactly.group.client import ClientInfo
from exactly.group.config import GroupConfig
from exactly.group.consumer.group import ConsumerGroup
from exactly.group.consumer.manager import ConsumerGroupManager, TopicImage
from exactly.group.deadlines import (
    ConsumerRebalanceDeadline,
    ConsumerSessionDeadline,
    Deadline,
    HeartbeatDeadline,
    RebalanceDeadline,
    ShareSessionDeadline,
    SyncDeadline,
)
from exactly.group.group import Group
from exactly.group.offset_manager import OffsetManager, PartitionExists
from exactly.group.offsets import OffsetAndMetadata
from exactly.group.partitioning import partition_for
from exactly.group.records import (
    CoordinatorRecord,
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    UnknownRecordError,
    decode_key,
    decode_value,
    offset_key_fields,
    offset_value_fields,
)
from exactly.group.result import Parked, Result
from exactly.group.share.group import SHARE_PROTOCOL_TYPE, ShareGroup
from exactly.group.share.manager import ShareGroupManager, ShareGroupSettings
from exactly.group.timers import Timers
from exactly.protocol.messages.consumer_group_describe import DescribedGroup as ConsumerDescribedGroup
from exactly.protocol.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from exactly.protocol.messages.delete_groups import DeletableGroupResult
from exactly.protocol.messages.describe_groups import DescribedGroup
from exactly.protocol.messages.heartbeat import HeartbeatRequest, HeartbeatResponse
from exactly.protocol.messages.join_group import JoinGroupRequest, JoinGroupResponse
from exactly.protocol.messages.leave_group import LeaveGroupResponse, MemberIdentity
from exactly.protocol.messages.list_groups import ListedGroup
from exactly.protocol.messages.offset_commit import OffsetCommitRequest, OffsetCommitResponse
from exactly.protocol.messages.offset_delete import OffsetDeleteRequest, OffsetDeleteResponse
from exactly.protocol.messages.offset_fetch import OffsetFetchResponseGroup
from exactly.protocol.messages.share_group_describe import DescribedGroup as ShareDescribedGroup
from exactly.protocol.messages.share_group_heartbeat import (
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
)
from exactly.protocol.messages.sync_group import SyncGroupRequest, SyncGroupResponse
from exactly.protocol.messages.txn_offset_commit import TxnOffsetCommitRequest, TxnOffsetCommitResponse
from exactly.records.batch import RecordBatch
from exactly.records.control import ControlRecordType, parse_end_txn_marker

__all__ = ["ClientInfo", "GroupCoordinator", "Parked", "Result"]

log = logging.getLogger(__name__)

T = TypeVar("T")

_KEY_CACHE_LIMIT = 100_000
_CONTROL = 0x20


class GroupCoordinator:
    def __init__(
        self,
        config: GroupConfig,
        clock: Clock,
        *,
        member_id_suffix: Callable[[], str] | None = None,
        topics: TopicImage | None = None,
        consumer_member_id: Callable[[], str] | None = None,
        share: ShareGroupSettings | None = None,
    ) -> None:
        self.config = config
        self.clock = clock
        self.groups: dict[str, ClassicGroup] = {}
        self.consumer_groups: dict[str, ConsumerGroup] = {}
        self.timers: Timers[Deadline] = Timers()
        self.classic = ClassicGroupManager(
            config,
            clock,
            self.groups,
            self.timers,
            holds_offsets=self._holds_offsets,
            member_id_suffix=member_id_suffix,
        )
        self.consumer = ConsumerGroupManager(
            config,
            clock,
            self.consumer_groups,
            self.groups,
            self.timers,
            topics,
            member_id_factory=consumer_member_id,
        )
        self.share_groups: dict[str, ShareGroup] = {}
        self.share = ShareGroupManager(
            share or ShareGroupSettings(), clock, self.share_groups, self.timers, topics
        )
        self.offset_manager = OffsetManager(config, clock, _Directory(self))
        self.offsets = self.offset_manager.store  # committed and pending offsets (read-only here)
        self._unapplied = 0  # records handed out and not replayed yet
        self.offset_commits = 0  # offsets to commit handed out (OffsetCommit, TxnOffsetCommit) since start

    # --- placement ---------------------------------------------------------------------------------------

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.config.num_partitions)

    def unload_partition(self, partition: int) -> None:
        """Another coordinator owns `partition` of `__consumer_offsets` now (Kafka's
        `GroupCoordinatorShard` unloading): forget its groups, their deadlines and their offsets."""

        def leaving(group_id: str) -> bool:
            return self.partition_for(group_id) == partition

        for group_id in [g for g in self.groups if leaving(g)]:
            del self.groups[group_id]
        for group_id in [g for g in self.consumer_groups if leaving(g)]:
            del self.consumer_groups[group_id]
        for group_id in [g for g in self.share_groups if leaving(g)]:
            del self.share_groups[group_id]
        scheduled = self.timers.keys()
        for deadline in scheduled:
            if leaving(deadline.group_id):
                self.timers.cancel(deadline)
        self.offset_manager.store.forget_groups(leaving)

    # --- helpers -----------------------------------------------------------------------------------------

    def _now(self) -> int:
        return self.clock.monotonic_ms()

    def _wall(self) -> int:
        return self.clock.milliseconds()

    def _require_applied(self) -> None:
        if self._unapplied:
            raise RuntimeError(f"{self._unapplied} records of the previous operation were not replayed")

    def _result(self, result: Result[T]) -> Result[T]:
        self._unapplied += len(result.records)
        return result

    def _holds_offsets(self, group_id: str) -> bool:
        return self.offset_manager.holds_offsets(group_id)

    # --- the classic protocol (`classic.manager.ClassicGroupManager`) -------------------------------------

    def join_group(self, client: ClientInfo, request: JoinGroupRequest) -> Result[JoinGroupResponse]:
        """JoinGroup. An empty consumer group of that id is replaced by the classic group (its tombstones
        come first; its offsets stay); a consumer group with members answers INCONSISTENT_GROUP_PROTOCOL
        (classic members inside a consumer group are not supported)."""
        self._require_applied()
        if request.group_id in self.share_groups:
            refused = JoinGroupResponse(
                error_code=ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id=request.member_id
            )
            return Result(refused, request.group_id)
        consumer = self.consumer_groups.get(request.group_id)
        if consumer is None:
            return self._result(self.classic.join_group(client, request))
        if not consumer.is_empty:
            refused = JoinGroupResponse(
                error_code=ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id=request.member_id
            )
            return Result(refused, request.group_id)
        tombstones = consumer.tombstones()
        result = self.classic.join_group(client, request)
        result.records[:0] = tombstones
        return self._result(result)

    def sync_group(self, client: ClientInfo, request: SyncGroupRequest) -> Result[SyncGroupResponse]:
        self._require_applied()
        return self._result(self.classic.sync_group(client, request))

    def heartbeat(self, client: ClientInfo, request: HeartbeatRequest) -> Result[HeartbeatResponse]:
        self._require_applied()
        return self._result(self.classic.heartbeat(client, request))

    def leave_group(
        self, client: ClientInfo, group_id: str, members: list[MemberIdentity]
    ) -> Result[LeaveGroupResponse]:
        """LeaveGroup (v3+ batched; older versions pass their one member id)."""
        self._require_applied()
        return self._result(self.classic.leave_group(client, group_id, members))

    # --- the consumer protocol (`consumer.manager.ConsumerGroupManager`) ----------------------------------

    def consumer_group_heartbeat(
        self, client: ClientInfo, request: ConsumerGroupHeartbeatRequest
    ) -> Result[ConsumerGroupHeartbeatResponse]:
        self._require_applied()
        if request.group_id in self.share_groups:
            message = f"Group {request.group_id} is not a consumer group."
            refused = ConsumerGroupHeartbeatResponse(
                error_code=ErrorCode.GROUP_ID_NOT_FOUND, error_message=message
            )
            return Result(refused, request.group_id)
        return self._result(self.consumer.heartbeat(client, request))

    def consumer_group_describe(self, group_ids: list[str]) -> list[ConsumerDescribedGroup]:
        return [self.consumer.describe(group_id) for group_id in group_ids]

    # --- share groups (`share.manager.ShareGroupManager`) ----------------------------------------------

    def share_group_heartbeat(
        self, client: ClientInfo, request: ShareGroupHeartbeatRequest
    ) -> Result[ShareGroupHeartbeatResponse]:
        self._require_applied()
        other = self._group(request.group_id)
        if other is not None and not other.is_empty:
            message = f"Group {request.group_id} is not a share group."
            refused = ShareGroupHeartbeatResponse(
                error_code=ErrorCode.GROUP_ID_NOT_FOUND, error_message=message
            )
            return Result(refused, request.group_id)
        return self._result(self.share.heartbeat(client, request))

    def share_group_describe(self, group_ids: list[str]) -> list[ShareDescribedGroup]:
        return [self.share.describe(group_id) for group_id in group_ids]

    def share_group_offsets_alterable(self, group_id: str) -> ErrorCode | None:
        """Whether Alter/DeleteShareGroupOffsets may change `group_id`'s share partitions (Kafka's
        `ShareGroup.validateOffsetsAlterable` / `validateDeleteGroup`): NONE for an empty share group,
        NON_EMPTY_GROUP for one with members, GROUP_ID_NOT_FOUND for a classic or consumer group; None
        when no group has this id here (the broker then asks the share partitions' stored state, which
        outlives the in-memory membership)."""
        share = self.share_groups.get(group_id)
        if share is not None:
            return ErrorCode.NON_EMPTY_GROUP if share.members else ErrorCode.NONE
        if self._group(group_id) is not None:
            return ErrorCode.GROUP_ID_NOT_FOUND
        return None

    # --- offsets (`offset_manager.OffsetManager`) ------------------------------------------------------

    def commit_offsets(
        self,
        client: ClientInfo,
        request: OffsetCommitRequest,
        partition_exists: PartitionExists | None = None,
    ) -> Result[OffsetCommitResponse]:
        self._require_applied()
        result = self._result(self.offset_manager.commit_offsets(client, request, partition_exists))
        self.offset_commits += len(result.records)
        return result

    def commit_transactional_offsets(
        self,
        request: TxnOffsetCommitRequest,
        partition_exists: PartitionExists | None = None,
    ) -> Result[TxnOffsetCommitResponse]:
        """TxnOffsetCommit: see `OffsetManager.commit_transactional_offsets`."""
        self._require_applied()
        result = self._result(self.offset_manager.commit_transactional_offsets(request, partition_exists))
        self.offset_commits += len(result.records)
        return result

    def fetch_offsets(
        self,
        group_id: str,
        topics: list[tuple[str, list[int]]] | None,
        require_stable: bool = False,
        member_id: str | None = None,
        member_epoch: int = -1,
    ) -> OffsetFetchResponseGroup:
        """OffsetFetch for one group: see `OffsetManager.fetch_offsets`. v9+ may name a member of a
        consumer group, which must exist (UNKNOWN_MEMBER_ID) at `member_epoch` (STALE_MEMBER_EPOCH)."""
        consumer = self.consumer_groups.get(group_id)
        if consumer is not None:
            error = consumer.validate_offset_fetch(member_id, member_epoch)
            if error:
                return OffsetFetchResponseGroup(group_id, [], error)
        return self.offset_manager.fetch_offsets(group_id, topics, require_stable)

    def delete_offsets(self, request: OffsetDeleteRequest) -> Result[OffsetDeleteResponse]:
        self._require_applied()
        return self._result(self.offset_manager.delete_offsets(request))

    # --- groups ------------------------------------------------------------------------------------------

    def list_groups(
        self, states: list[str] | None = None, types: list[str] | None = None
    ) -> list[ListedGroup]:
        wanted_states = {s.lower() for s in states or []}
        wanted_types = {t.lower() for t in types or []}
        listed = [g.as_listed_group() for g in self._all_groups()]
        listed += [
            ListedGroup(g.group_id, SHARE_PROTOCOL_TYPE, g.state.value, SHARE_PROTOCOL_TYPE)
            for g in self.share_groups.values()
        ]
        return [
            g
            for g in listed
            if (not wanted_types or g.group_type in wanted_types)
            and (not wanted_states or g.group_state.lower() in wanted_states)
        ]

    def describe_groups(self, group_ids: list[str]) -> list[DescribedGroup]:
        out = []
        for group_id in group_ids:
            group = self._group(group_id)
            if not group_id:
                out.append(
                    DescribedGroup(ErrorCode.INVALID_GROUP_ID, None, group_id, ClassicGroupState.DEAD.value)
                )
            elif group_id in self.share_groups:
                share = self.share_groups[group_id]
                out.append(
                    DescribedGroup(ErrorCode.NONE, None, group_id, share.state.value, SHARE_PROTOCOL_TYPE)
                )
            elif group is None:
                out.append(DescribedGroup(ErrorCode.NONE, None, group_id, ClassicGroupState.DEAD.value))
            else:
                out.append(group.describe())
        return out

    def delete_group(self, group_id: str) -> Result[DeletableGroupResult]:
        """DeleteGroups for one group: tombstones for its offsets and for the group itself."""
        self._require_applied()
        if not group_id:
            return Result(DeletableGroupResult(group_id, ErrorCode.INVALID_GROUP_ID), group_id)
        share = self.share_groups.get(group_id)
        if share is not None:
            code = ErrorCode.NON_EMPTY_GROUP if share.members else ErrorCode.NONE
            if code == ErrorCode.NONE:
                del self.share_groups[group_id]
            return Result(DeletableGroupResult(group_id, code), group_id)
        group = self._group(group_id)
        if group is None:
            return Result(DeletableGroupResult(group_id, ErrorCode.GROUP_ID_NOT_FOUND), group_id)
        error = group.validate_delete_group()
        if error:
            return Result(DeletableGroupResult(group_id, error), group_id)
        records = self.offset_manager.delete_all_offsets(group_id)
        records.extend(group.tombstones())
        return self._result(Result(DeletableGroupResult(group_id, ErrorCode.NONE), group_id, records))

    # --- retention ---------------------------------------------------------------------------------------

    def expire_offsets(self) -> Iterator[Result[None]]:
        """offsets.retention.minutes (KIP-211): tombstones for expired offsets, and for groups that are
        Empty with nothing left. Yields one result per group; apply each before taking the next."""
        now = self._wall()
        for group_id in [*self.groups, *self.consumer_groups]:
            self._require_applied()
            group = self._group(group_id)
            if group is None:
                continue
            records: list[CoordinatorRecord] = []
            all_gone = self.offset_manager.cleanup_expired_offsets(group, now, records)
            if all_gone and group.is_empty:
                records.extend(group.tombstones())
            if records:
                yield self._result(Result(None, group_id, records))

    # --- time --------------------------------------------------------------------------------------------

    def next_deadline(self) -> int | None:
        return self.timers.next_deadline()

    def tick(self, now: int | None = None) -> Iterator[Result[None]]:
        """Act on every deadline that has passed, one at a time; apply each result before the next."""
        now = self._now() if now is None else now
        budget = len(self.timers) + 16  # a deadline rescheduled at `now` waits for the next tick
        while budget > 0:
            budget -= 1
            self._require_applied()
            deadline = self.timers.pop_due(now)
            if deadline is None:
                return
            result = self._on_deadline(deadline)
            if log.isEnabledFor(logging.DEBUG):
                classic = self.groups.get(result.group_id)
                log.debug(
                    "%s -> state %s generation %s%s",
                    deadline,
                    classic.state.value if classic is not None else "-",
                    classic.generation if classic is not None else "-",
                    completions_summary(result),
                )
            if result.records or result.completions:
                yield self._result(result)

    def _on_deadline(self, deadline: Deadline) -> Result[None]:
        match deadline:
            case HeartbeatDeadline(group_id, member_id):
                return self.classic.rebalance.on_heartbeat_deadline(group_id, member_id)
            case RebalanceDeadline(group_id):
                return self.classic.rebalance.on_rebalance_deadline(group_id)
            case SyncDeadline(group_id):
                return self.classic.rebalance.on_sync_deadline(group_id)
            case ConsumerSessionDeadline(group_id, member_id):
                return self.consumer.on_session_deadline(group_id, member_id)
            case ConsumerRebalanceDeadline(group_id, member_id):
                return self.consumer.on_rebalance_deadline(group_id, member_id)
            case ShareSessionDeadline(group_id, member_id):
                return self.share.on_session_deadline(group_id, member_id)
            case _:
                assert_never(deadline)

    # --- replay ------------------------------------------------------------------------------------------

    def replay(self, record_offset: int, producer_id: int, record: CoordinatorRecord) -> None:
        """Apply one record that is in `__consumer_offsets` (just appended, or read while loading)."""
        if self._unapplied:
            self._unapplied -= 1
        key = record.key
        if isinstance(key, OffsetCommitKey):
            value = record.value
            assert value is None or isinstance(value, OffsetCommitValue)
            self.offset_manager.replay(record_offset, producer_id, key, value)
            return
        if not isinstance(key, GroupMetadataKey):
            consumer_value = record.value
            assert not isinstance(consumer_value, OffsetCommitValue | GroupMetadataValue)
            self.consumer.replay(key, consumer_value)
            return
        group_value = record.value
        assert group_value is None or isinstance(group_value, GroupMetadataValue)
        self.classic.replay(key, group_value)
        if group_value is None and not self.offsets.has_offsets(key.group):
            # Deleted (its offsets' tombstones came first); a group replaced by a consumer group of the
            # same id keeps its offsets.
            self.offset_manager.forget_group(key.group)

    def replay_end_txn_marker(self, producer_id: int, committed: bool, partition: int | None = None) -> None:
        """A COMMIT/ABORT marker reached `partition` (None: whichever holds the producer's offsets):
        materialize or drop the producer's pending offsets of that partition's groups."""
        only = None if partition is None else (lambda group: self.partition_for(group) == partition)
        self.offset_manager.replay_end_txn_marker(producer_id, committed, only)

    def load_batch(
        self, batch: RecordBatch, key_cache: dict[bytes, Any] | None = None, partition: int | None = None
    ) -> int:
        """Replay one stored batch (start-up); returns the number of records applied.

        Plain OffsetCommit records (the bulk of any log) take a fast path that parses the fields
        straight into the offset store; `key_cache` (key bytes -> parsed key), shared across the batches
        of a partition, saves parsing the same key again. Everything else goes through `replay`.
        `partition`: the batch's partition of `__consumer_offsets` (a marker decides its groups only).
        """
        header = batch.header()
        producer_id = header.producer_id
        if header.attributes & _CONTROL:
            marker = parse_end_txn_marker(batch)
            self.replay_end_txn_marker(producer_id, marker.type == ControlRecordType.COMMIT, partition)
            return 0
        groups = self.groups
        consumer_groups = self.consumer_groups
        ensure_group = self.classic.ensure_group
        put = self.offsets.put_committed
        plain = producer_id < 0
        count = 0
        for record in batch.records():
            raw_key = record.key
            if raw_key is None:
                raise CorruptRecordError(f"__consumer_offsets record at offset {record.offset} has no key")
            parsed = key_cache.get(raw_key) if key_cache is not None else None
            if parsed is None:
                fields = offset_key_fields(raw_key)
                if fields is None:  # not a plain OffsetCommitKey: the checked path
                    try:
                        key = decode_key(raw_key)
                    except UnknownRecordError:
                        continue  # not a group coordinator record of exactly's (a share group's)
                    self.replay(
                        record.offset, producer_id, CoordinatorRecord(key, decode_value(key, record.value))
                    )
                    count += 1
                    continue
                parsed = (fields[0], (fields[1], fields[2]))
                if key_cache is not None and len(key_cache) < _KEY_CACHE_LIMIT:
                    key_cache[raw_key] = parsed
            group, tp = parsed
            value = record.value
            values = offset_value_fields(value) if plain and value is not None else None
            if values is None:  # a tombstone, a transactional commit, an older value version
                offset_key = OffsetCommitKey(group, tp[0], tp[1])
                offset_value = decode_value(offset_key, value)
                assert offset_value is None or isinstance(offset_value, OffsetCommitValue)
                self.offset_manager.replay(record.offset, producer_id, offset_key, offset_value)
            else:
                if group not in groups and group not in consumer_groups:
                    ensure_group(group)
                put(
                    group,
                    tp,
                    OffsetAndMetadata(values[0], values[1], values[2], values[3], -1, record.offset),
                )
            count += 1
        return count

    def on_append_failed(self, result: Result[Any]) -> Result[None]:
        """The records of `result` could not be appended: nothing was stored. A group waiting for its
        assignment to be stored rebalances instead (its members were told to retry)."""
        self._unapplied = 0
        return self._result(self.classic.on_append_failed(result))

    # --- both group types ---------------------------------------------------------------------------------

    def _group(self, group_id: str) -> Group | None:
        consumer = self.consumer_groups.get(group_id)
        if consumer is not None:
            return consumer
        return self.groups.get(group_id)

    def _all_groups(self) -> list[Group]:
        return [*self.groups.values(), *self.consumer_groups.values()]


class _Directory:
    """The offset manager's view of the groups (`offset_manager.GroupDirectory`): both types."""

    def __init__(self, coordinator: GroupCoordinator) -> None:
        self._coordinator = coordinator

    def group(self, group_id: str) -> Group | None:
        return self._coordinator._group(group_id)

    def ensure_group(self, group_id: str) -> None:
        if group_id not in self._coordinator.consumer_groups:
            self._coordinator.classic.ensure_group(group_id)

    def offset_commit_accepted(self, group_id: str, member_id: str) -> None:
        # A consumer-protocol member's commit is not a heartbeat.
        self._coordinator.classic.offset_commit_accepted(group_id, member_id)
