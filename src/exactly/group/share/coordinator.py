"""The share coordinator's shard (Kafka's `ShareCoordinatorShard`): the state of every share partition
whose `__share_group_state` partition this broker leads, and the five operations the share coordinator
RPCs run on it.

A share partition's delivery state (SPSO and its window, exactly.group.share.partition) is kept by the
leader of its *data* partition, but stored by the leader of its *state* partition: the partition of
`__share_group_state` that `abs(javaHash("group:topicId:partition")) % partitions` names. The two are
often different brokers; the data partition's leader reads and writes the state through the share
coordinator RPCs (exactly.broker.share_persister) and this shard answers them:

    operation                       checks                                     records written
    InitializeShareGroupState (83)  stored state epoch >= asked: FENCED_STATE  a snapshot (a new state)
    ReadShareGroupState (84)        stored leader epoch > asked: FENCED_LEADER  an update with the asked
                                                                                leader epoch when newer
    WriteShareGroupState (85)       no state: INVALID_REQUEST; stored leader   an update, or a snapshot
                                    epoch > asked: FENCED_LEADER; stored state  every `snapshot_every`
                                    epoch > asked: FENCED_STATE_EPOCH           updates
    DeleteShareGroupState (86)      -                                          a tombstone
    ReadShareGroupStateSummary (87) stored leader epoch > asked: FENCED_LEADER  -

A read with a newer leader epoch records that epoch, so a data partition's old leader, still running
after it lost leadership, is fenced when it next writes (Kafka's `readStateAndMaybeUpdateLeaderEpoch`).
An asked leader epoch of -1 is not checked.

The shard changes only by `replay`: an operation returns the records it wants written, the service
appends them to the state partition and replays them (and at load, replays the partition's log), so the
log and the shard cannot disagree. Records are exactly.group.share.records': a write is a ShareUpdate
record (a delta: the batches it carries replace the offsets they cover, its start offset moves SPSO);
after `snapshot_every` updates (`share.coordinator.snapshot.update.records.per.snapshot`, default 500;
0: snapshots only) the next write is a ShareSnapshot of the merged state with SnapshotEpoch + 1, as
Kafka's coordinator does. A write that changes the state epoch is always a snapshot (updates carry none).

Pending acknowledgements (exactly's transactional-ack extension, docs/share-transactional-acks.md): the
data partition's leader, when it is also this shard's broker, appends a share partition's pending acks as
a transactional record of the producer (`replay` with the batch's producer id); the transaction
coordinator's COMMIT/ABORT marker on the same partition is `replay_marker`: a commit applies the
producer's pending acks of that partition to the stored states (`apply_acks`; what a WriteShareGroupState
of their new states would store, without a record of its own: the marker after the pending-ack records is
the write), an abort drops them. What is still pending belongs to open transactions: `pending_for` gives
it to the share partition when it loads, which holds those offsets for the producer again.

Pure and synchronous: time comes in as `now` (wall-clock ms, for the snapshot's timestamps).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from exactly.errors import ErrorCode
from exactly.group.share.partition import ShareState, StateBatch
from exactly.group.share.records import (
    PENDING_ACK,
    SNAPSHOT,
    UPDATE,
    PendingAckRecord,
    SharePartitionKey,
    ShareUpdate,
    StoredShareState,
    apply_acks,
    decode_key,
    decode_pending,
    decode_update,
    decode_value,
    encode_key,
    encode_update,
    encode_value,
    merge_batches,
)

__all__ = ["Outcome", "Record", "ShareCoordinatorShard", "StateWrite"]

Record = tuple[bytes, bytes | None]  # (key, value); a None value is a tombstone

DEFAULT_SNAPSHOT_EVERY = 500


@dataclass(frozen=True, slots=True)
class StateWrite:
    """What one WriteShareGroupState partition entry asks to store."""

    state_epoch: int
    leader_epoch: int
    start_offset: int  # -1: unchanged
    batches: tuple[StateBatch, ...] = ()


@dataclass(frozen=True, slots=True)
class Outcome:
    """An operation's answer: its code, the records to append, and (read, summary) the stored state
    (None: the share partition has no state)."""

    code: ErrorCode
    records: tuple[Record, ...] = ()
    message: str | None = None
    state: StoredShareState | None = None


class ShareCoordinatorShard:
    def __init__(self, snapshot_every: int = DEFAULT_SNAPSHOT_EVERY) -> None:
        self.snapshot_every = snapshot_every
        self.states: dict[SharePartitionKey, StoredShareState] = {}
        self._updates: dict[SharePartitionKey, int] = {}  # update records since the key's last snapshot
        # open transactions' pending acks: (state partition, producer id) -> records, in log order
        self.pending: dict[tuple[int, int], list[PendingAckRecord]] = {}

    # --- replay ---------------------------------------------------------------------------------------

    def replay(
        self, raw_key: bytes, raw_value: bytes | None, partition: int = 0, producer_id: int = -1
    ) -> None:
        """Apply one record of `__share_group_state` partition `partition` (at load, or once appended;
        `producer_id`: its batch's, for a pending-ack record). CorruptRecordError for a record that is not
        one of ours."""
        kind, key = decode_key(raw_key)
        if kind == PENDING_ACK:
            if raw_value is not None and producer_id >= 0:
                self.pending.setdefault((partition, producer_id), []).append(
                    decode_pending(raw_key, raw_value)
                )
            return
        if raw_value is None:
            self.states.pop(key, None)
            self._updates.pop(key, None)
            return
        if kind == SNAPSHOT:
            self.states[key] = decode_value(raw_value)
            self._updates[key] = 0
            return
        update = decode_update(raw_value)
        stored = self.states.get(key)
        if stored is None:  # an update of a deleted state (its tombstone came first): nothing to apply to
            return
        start = stored.state.start_offset if update.start_offset < 0 else update.start_offset
        self.states[key] = StoredShareState(
            ShareState(start, merge_batches(stored.state.batches, update.batches, start)),
            snapshot_epoch=stored.snapshot_epoch,
            state_epoch=stored.state_epoch,
            leader_epoch=stored.leader_epoch if update.leader_epoch < 0 else update.leader_epoch,
            create_timestamp=stored.create_timestamp,
            write_timestamp=stored.write_timestamp,
        )
        self._updates[key] = self._updates.get(key, 0) + 1

    def replay_marker(self, partition: int, producer_id: int, committed: bool) -> list[PendingAckRecord]:
        """A COMMIT/ABORT marker of `producer_id` in `partition`: its pending acks there are decided, a
        commit applying them to the stored states. Returns them."""
        records = self.pending.pop((partition, producer_id), [])
        if committed:
            for record in records:
                stored = self.states.get(record.key)
                if stored is None:  # deleted meanwhile: nothing to apply to
                    continue
                state = apply_acks(stored.state, record.member_id, record.acks)
                self.states[record.key] = StoredShareState(
                    state,
                    snapshot_epoch=stored.snapshot_epoch,
                    state_epoch=stored.state_epoch,
                    leader_epoch=stored.leader_epoch,
                    create_timestamp=stored.create_timestamp,
                    write_timestamp=stored.write_timestamp,
                )
        return records

    def pending_for(self, key: SharePartitionKey) -> list[PendingAckRecord]:
        """The pending acks of open transactions on one share partition, in log order."""
        return [r for records in self.pending.values() for r in records if r.key == key]

    def get(self, key: SharePartitionKey) -> StoredShareState | None:
        return self.states.get(key)

    def updates_since_snapshot(self, key: SharePartitionKey) -> int:
        return self._updates.get(key, 0)

    def forget(self, belongs: Callable[[SharePartitionKey], bool]) -> None:
        """Drop the keys `belongs(key)` says are of an unloaded partition."""
        for key in [k for k in self.states if belongs(k)]:
            del self.states[key]
            self._updates.pop(key, None)
        for entry in [e for e, records in self.pending.items() if any(belongs(r.key) for r in records)]:
            del self.pending[entry]

    # --- operations -----------------------------------------------------------------------------------

    def initialize(self, key: SharePartitionKey, state_epoch: int, start_offset: int, now: int) -> Outcome:
        """A new state for the share partition (first use, or AlterShareGroupOffsets' new start under a
        higher state epoch): SPSO `start_offset`, an empty window."""
        stored = self.states.get(key)
        if stored is not None and stored.state_epoch >= state_epoch:
            return Outcome(
                ErrorCode.FENCED_STATE_EPOCH,
                message=f"state epoch {state_epoch} is not above the stored {stored.state_epoch}",
            )
        value = StoredShareState(
            ShareState(start_offset),
            snapshot_epoch=0 if stored is None else (stored.snapshot_epoch + 1) & 0xFFFF,
            state_epoch=state_epoch,
            leader_epoch=-1 if stored is None else stored.leader_epoch,
            create_timestamp=now,
            write_timestamp=now,
        )
        return Outcome(ErrorCode.NONE, ((encode_key(key, SNAPSHOT), encode_value(value)),))

    def read(self, key: SharePartitionKey, leader_epoch: int) -> Outcome:
        """The stored state, for a data partition's (new) leader of epoch `leader_epoch`, which is
        recorded when newer than the stored one."""
        stored = self.states.get(key)
        if stored is None:
            return Outcome(ErrorCode.NONE)
        fenced = self._fenced_leader(stored, leader_epoch)
        if fenced is not None:
            return fenced
        records: tuple[Record, ...] = ()
        if leader_epoch > stored.leader_epoch:
            update = ShareUpdate(stored.snapshot_epoch, leader_epoch, -1)
            records = ((encode_key(key, UPDATE), encode_update(update)),)
        return Outcome(ErrorCode.NONE, records, state=stored)

    def summary(self, key: SharePartitionKey, leader_epoch: int) -> Outcome:
        """The stored state (its SPSO and epochs matter), nothing recorded."""
        stored = self.states.get(key)
        if stored is None:
            return Outcome(ErrorCode.NONE)
        return self._fenced_leader(stored, leader_epoch) or Outcome(ErrorCode.NONE, state=stored)

    def write(self, key: SharePartitionKey, write: StateWrite, now: int) -> Outcome:
        """Store a change of the share partition's state: an update record, or a snapshot when
        `snapshot_every` updates have been written since the last one."""
        stored = self.states.get(key)
        if stored is None:
            return Outcome(ErrorCode.INVALID_REQUEST, message=f"{key} has no state: initialize it first")
        fenced = self._fenced_leader(stored, write.leader_epoch)
        if fenced is not None:
            return fenced
        if stored.state_epoch > write.state_epoch:
            return Outcome(
                ErrorCode.FENCED_STATE_EPOCH,
                message=f"state epoch {write.state_epoch} is below the stored {stored.state_epoch}",
            )
        leader_epoch = stored.leader_epoch if write.leader_epoch < 0 else write.leader_epoch
        if self._updates.get(key, 0) >= self.snapshot_every or write.state_epoch != stored.state_epoch:
            start = stored.state.start_offset if write.start_offset < 0 else write.start_offset
            value = StoredShareState(
                ShareState(start, merge_batches(stored.state.batches, write.batches, start)),
                snapshot_epoch=(stored.snapshot_epoch + 1) & 0xFFFF,
                state_epoch=write.state_epoch,
                leader_epoch=leader_epoch,
                create_timestamp=stored.create_timestamp,
                write_timestamp=now,
            )
            return Outcome(ErrorCode.NONE, ((encode_key(key, SNAPSHOT), encode_value(value)),))
        update = ShareUpdate(stored.snapshot_epoch, leader_epoch, write.start_offset, write.batches)
        return Outcome(ErrorCode.NONE, ((encode_key(key, UPDATE), encode_update(update)),))

    def delete(self, key: SharePartitionKey) -> Outcome:
        """Forget the share partition's state (DeleteShareGroupOffsets): a tombstone when it has one."""
        if key not in self.states:
            return Outcome(ErrorCode.NONE)
        return Outcome(ErrorCode.NONE, ((encode_key(key, SNAPSHOT), None),))

    @staticmethod
    def _fenced_leader(stored: StoredShareState, leader_epoch: int) -> Outcome | None:
        if leader_epoch >= 0 and stored.leader_epoch > leader_epoch:
            return Outcome(
                ErrorCode.FENCED_LEADER_EPOCH,
                message=f"leader epoch {leader_epoch} is below the stored {stored.leader_epoch}",
            )
        return None
