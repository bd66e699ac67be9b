"""A share partition: what one share group (KIP-932) knows about one topic partition it consumes.

Members of a share group do not own partitions; they *acquire* records. The share partition is the
bookkeeping that makes this safe, kept by the partition's leader (Kafka's `SharePartition`): a window of
in-flight offsets from the share-partition start offset (SPSO, the first offset not yet in a terminal
state) to the share-partition end offset (SPEO, the last offset fetched into the window), one state per
offset. Everything below SPSO is done; everything above SPEO has never been delivered.

Record states (Kafka's `RecordState` codes, which are also what `__share_group_state` stores):

    AVAILABLE 0     may be acquired by any member
    ACQUIRED 1      delivered to one member, locked until it acknowledges or its lock expires
    ACKNOWLEDGED 2  terminal: consumed (ACCEPT)
    ARCHIVED 4      terminal: rejected, out of deliveries, or no deliverable record at that offset

Transition table (`TRANSITIONS`; `limit` is the delivery count limit, `count` the offset's deliveries):

    state       event         next state                        why
    AVAILABLE   ACQUIRE       ACQUIRED (count + 1, locked)      a ShareFetch delivers it to one member
    ACQUIRED    ACCEPT        ACKNOWLEDGED                      the member processed it
    ACQUIRED    RELEASE       AVAILABLE, ARCHIVED at limit      the member gives it back
    ACQUIRED    REJECT        ARCHIVED                          the member cannot process it: never again
    ACQUIRED    GAP           ARCHIVED                          the member found no record at that offset
    ACQUIRED    LOCK_EXPIRED  AVAILABLE, ARCHIVED at limit      the member did not answer within the lock
    ACQUIRED    MEMBER_GONE   AVAILABLE, ARCHIVED at limit      its share session closed or was evicted

Anything else is refused: an acknowledgement of an offset that is not ACQUIRED by the member sending it
is INVALID_RECORD_STATE, and nothing leaves a terminal state (except `reset`: AlterShareGroupOffsets).

Pending acknowledgements (exactly's transactional-ack extension, docs/share-transactional-acks.md; Pulsar's
pending acks): an ACQUIRED offset may be acknowledged *inside a producer's transaction* (`add_pending`).
It stays ACQUIRED by its member, but its acknowledgement waits for the transaction's outcome:

    state                  event           next state                          why
    ACQUIRED               PEND (pid, t)   ACQUIRED, pending (pid, t)          AddShareAcksToTxn of pid
    ACQUIRED, pending      TXN_COMMITTED   as the ack type t would (above)     the COMMIT marker reached it
    ACQUIRED, pending      TXN_ABORTED     AVAILABLE, ARCHIVED at limit        the ABORT marker reached it

While pending, an offset's acquisition lock is suspended: LOCK_EXPIRED and MEMBER_GONE do not touch it,
a plain acknowledgement of it is INVALID_RECORD_STATE and so is a second pending ack (from any producer).
So a record whose ack is pending is never redelivered while its transaction is open; when the transaction
times out (`transaction.timeout.ms`) or its producer is fenced, the coordinator aborts it and the record is
AVAILABLE again with its delivery count. The persistent form writes a pending offset as AVAILABLE, like
any ACQUIRED one; the pending acks themselves are kept in `__share_group_state` as transactional records
(`exactly.group.share.records`) and put back with `restore_pending` when the share partition is loaded.

Offsets enter the window when a fetch reads past SPEO (`acquire`): data records as ACQUIRED, offsets
that hold no deliverable record — control batches (transaction markers), batches of aborted
transactions under read_committed, holes left by compaction — straight as ARCHIVED. SPSO then moves
forward over every terminal offset at the front of the window, so the window only holds what still
needs work; its size (SPEO - SPSO + 1) never exceeds `max_in_flight`
(`group.share.partition.max.record.locks`), and acquisition stops there.

The persistent form (`ShareState`) is SPSO plus the window as ranges of (state, delivery count), with
ACQUIRED written as AVAILABLE: after a restart an acquired record is delivered again, its delivery
counted (Kafka's share coordinator stores only states 0, 2 and 4 the same way).

Pure and synchronous: time comes in as `now` (monotonic ms).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum, IntEnum

from exactly.errors import ErrorCode

__all__ = [
    "NO_PRODUCER",
    "TRANSITIONS",
    "AckBatch",
    "AckType",
    "AcquiredRange",
    "BatchKind",
    "Event",
    "FetchedBatch",
    "RecordState",
    "SharePartition",
    "ShareState",
    "StateBatch",
]


class RecordState(IntEnum):
    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4

    @property
    def terminal(self) -> bool:
        return self in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


class AckType(IntEnum):
    """The acknowledge types of ShareFetch / ShareAcknowledge (v1)."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3


class Event(Enum):
    ACQUIRE = "acquire"
    ACCEPT = "accept"
    RELEASE = "release"
    REJECT = "reject"
    GAP = "gap"
    LOCK_EXPIRED = "lock expired"
    MEMBER_GONE = "member gone"
    PEND = "pending ack"  # the ack waits for a transaction; the state stays ACQUIRED
    TXN_ABORTED = "transaction aborted"


_RETURN = RecordState.AVAILABLE  # back for redelivery, or ARCHIVED once the delivery limit is reached

TRANSITIONS: dict[tuple[RecordState, Event], RecordState] = {
    (RecordState.AVAILABLE, Event.ACQUIRE): RecordState.ACQUIRED,
    (RecordState.ACQUIRED, Event.ACCEPT): RecordState.ACKNOWLEDGED,
    (RecordState.ACQUIRED, Event.RELEASE): _RETURN,
    (RecordState.ACQUIRED, Event.REJECT): RecordState.ARCHIVED,
    (RecordState.ACQUIRED, Event.GAP): RecordState.ARCHIVED,
    (RecordState.ACQUIRED, Event.LOCK_EXPIRED): _RETURN,
    (RecordState.ACQUIRED, Event.MEMBER_GONE): _RETURN,
    (RecordState.ACQUIRED, Event.PEND): RecordState.ACQUIRED,
    (RecordState.ACQUIRED, Event.TXN_ABORTED): _RETURN,
}

_ACK_EVENTS = {
    AckType.GAP: Event.GAP,
    AckType.ACCEPT: Event.ACCEPT,
    AckType.RELEASE: Event.RELEASE,
    AckType.REJECT: Event.REJECT,
}


class BatchKind(Enum):
    DATA = "data"  # records a member may consume
    CONTROL = "control"  # transaction markers
    ABORTED = "aborted"  # a batch of an aborted transaction, read under read_committed


@dataclass(frozen=True, slots=True)
class FetchedBatch:
    """One batch a fetch read from the log, as the share partition needs to see it."""

    base_offset: int
    last_offset: int
    kind: BatchKind


@dataclass(frozen=True, slots=True)
class AcquiredRange:
    """ShareFetch's AcquiredRecords entry: offsets first..last, acquired at this delivery count."""

    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class AckBatch:
    """An AcknowledgementBatch: one type for the whole range, or one per offset."""

    first_offset: int
    last_offset: int
    types: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class StateBatch:
    """A persisted range of the window (ShareSnapshotValue's StateBatches)."""

    first_offset: int
    last_offset: int
    state: RecordState
    delivery_count: int


@dataclass(frozen=True, slots=True)
class ShareState:
    """What survives a restart: SPSO and the window (never ACQUIRED: written as AVAILABLE)."""

    start_offset: int
    batches: tuple[StateBatch, ...] = ()


NO_PRODUCER = -1


@dataclass(slots=True)
class _InFlight:
    state: RecordState
    delivery_count: int
    member_id: str | None = None  # the holder while ACQUIRED
    lock_deadline: int = 0  # while ACQUIRED and not pending
    pending_producer: int = NO_PRODUCER  # while ACQUIRED: the producer whose transaction holds its ack
    pending_type: AckType = AckType.ACCEPT


class SharePartition:
    def __init__(
        self,
        state: ShareState,
        *,
        delivery_limit: int = 5,
        lock_duration_ms: int = 30_000,
        max_in_flight: int = 2000,
    ) -> None:
        self.delivery_limit = delivery_limit
        self.lock_duration_ms = lock_duration_ms
        self.max_in_flight = max_in_flight
        self._records: dict[int, _InFlight] = {}
        # indexes kept with every state change, so that a fetch does not scan the window: how many
        # offsets are AVAILABLE, and how many ACQUIRED ones end their lock at each deadline
        self._available = 0
        self._deadlines: dict[int, int] = {}
        self.start_offset = state.start_offset
        self.end_offset = state.start_offset - 1
        for batch in state.batches:
            persisted = RecordState.AVAILABLE if batch.state == RecordState.ACQUIRED else batch.state
            for offset in range(max(batch.first_offset, self.start_offset), batch.last_offset + 1):
                self._fill_to(offset - 1)
                self._records[offset] = _InFlight(persisted, batch.delivery_count)
                self._available += persisted == RecordState.AVAILABLE
                self.end_offset = offset
        self._advance()

    # --- reading -----------------------------------------------------------------------------------------

    def state_of(self, offset: int) -> RecordState | None:
        """The offset's state; None above SPEO (never fetched). Below SPSO it is terminal."""
        if offset < self.start_offset:
            return RecordState.ACKNOWLEDGED
        record = self._records.get(offset)
        return record.state if record is not None else None

    def delivery_count(self, offset: int) -> int:
        record = self._records.get(offset)
        return record.delivery_count if record is not None else 0

    def holder(self, offset: int) -> str | None:
        record = self._records.get(offset)
        return record.member_id if record is not None and record.state == RecordState.ACQUIRED else None

    def pending(self, offset: int) -> tuple[int, AckType] | None:
        """(producer id, ack type) of the offset's pending acknowledgement, or None."""
        record = self._records.get(offset)
        if record is None or record.pending_producer == NO_PRODUCER:
            return None
        return record.pending_producer, record.pending_type

    def pending_of(self, producer_id: int) -> list[tuple[int, AckType]]:
        """The offsets whose acknowledgement the producer's open transaction holds, with their types."""
        return sorted(
            (o, r.pending_type) for o, r in self._records.items() if r.pending_producer == producer_id
        )

    def pending_producers(self) -> set[int]:
        return {r.pending_producer for r in self._records.values() if r.pending_producer != NO_PRODUCER}

    @property
    def in_flight(self) -> int:
        """Offsets in the window (SPEO - SPSO + 1)."""
        return self.end_offset - self.start_offset + 1

    def fetch_offset(self) -> int:
        """Where the next fetch should read from: the first AVAILABLE offset, else past SPEO."""
        if not self._available:
            return self.end_offset + 1
        for offset in range(self.start_offset, self.end_offset + 1):
            if self._records[offset].state == RecordState.AVAILABLE:
                return offset
        return self.end_offset + 1

    def can_acquire(self) -> bool:
        """Something could be acquired now: an AVAILABLE offset, or room in the window for new ones."""
        return self._available > 0 or self.in_flight < self.max_in_flight

    def next_lock_deadline(self) -> int | None:
        return min(self._deadlines) if self._deadlines else None

    def acquired_by(self, member_id: str) -> list[int]:
        return sorted(
            o
            for o, r in self._records.items()
            if r.state == RecordState.ACQUIRED and r.member_id == member_id
        )

    # --- transitions -------------------------------------------------------------------------------------

    def acquire(
        self, member_id: str, batches: Iterable[FetchedBatch], max_records: int, now: int
    ) -> list[AcquiredRange]:
        """Acquire for `member_id` what `batches` (read from `fetch_offset()`, in log order) hold:
        AVAILABLE offsets in the window and new offsets past SPEO, whole batches until `max_records`
        are acquired, never growing the window past `max_in_flight`."""
        acquired: list[tuple[int, int]] = []  # (offset, delivery count)
        deadline = now + self.lock_duration_ms
        for batch in batches:
            if len(acquired) >= max(max_records, 1):
                break
            first = max(batch.base_offset, self.start_offset)
            for offset in range(first, batch.last_offset + 1):
                if offset > self.end_offset:
                    if offset - self.start_offset + 1 > self.max_in_flight:
                        break
                    self._fill_to(offset - 1)
                    if batch.kind is not BatchKind.DATA:
                        self._records[offset] = _InFlight(RecordState.ARCHIVED, 0)
                        self.end_offset = offset
                        continue
                    record = _InFlight(RecordState.ACQUIRED, 1, member_id, deadline)
                    self._records[offset] = record
                    self.end_offset = offset
                    acquired.append((offset, 1))
                    continue
                record = self._records[offset]
                if record.state != RecordState.AVAILABLE:
                    continue
                self._available -= 1
                if batch.kind is not BatchKind.DATA:  # a window restored past its last snapshot
                    record.state = RecordState.ARCHIVED
                    continue
                if record.delivery_count >= self.delivery_limit:
                    record.state = RecordState.ARCHIVED
                    continue
                record.state = TRANSITIONS[(RecordState.AVAILABLE, Event.ACQUIRE)]
                record.delivery_count += 1
                record.member_id = member_id
                record.lock_deadline = deadline
                acquired.append((offset, record.delivery_count))
        if acquired:
            self._deadlines[deadline] = self._deadlines.get(deadline, 0) + len(acquired)
        self._advance()
        return _ranges(acquired)

    def acknowledge(self, member_id: str, acks: Sequence[AckBatch]) -> ErrorCode:
        """Apply a member's acknowledgements, all or nothing: INVALID_REQUEST for a malformed batch,
        INVALID_RECORD_STATE when an offset is not ACQUIRED by this member (a GAP for an offset that is
        already ARCHIVED is accepted: the window archived it as holding no record)."""
        planned = self._plan_acks(member_id, acks, once=False)
        if isinstance(planned, ErrorCode):
            return planned
        for offset, kind in planned:
            self._transition(self._records[offset], _ACK_EVENTS[kind])
        self._advance()
        return ErrorCode.NONE

    def add_pending(self, member_id: str, producer_id: int, acks: Sequence[AckBatch]) -> ErrorCode:
        """Acknowledgements inside producer `producer_id`'s transaction, all or nothing: checked as
        `acknowledge` checks them (INVALID_REQUEST, INVALID_RECORD_STATE — also for an offset whose ack is
        already pending, or named twice), then held until `end_pending`. A GAP for an ARCHIVED offset needs
        nothing."""
        if producer_id < 0:
            return ErrorCode.INVALID_REQUEST
        planned = self._plan_acks(member_id, acks, once=True)
        if isinstance(planned, ErrorCode):
            return planned
        for offset, kind in planned:
            self._pend(self._records[offset], producer_id, kind)
        return ErrorCode.NONE

    def _plan_acks(
        self, member_id: str, acks: Sequence[AckBatch], *, once: bool
    ) -> ErrorCode | list[tuple[int, AckType]]:
        """The (offset, type) each of `acks` applies to, or the error that refuses them all: INVALID_REQUEST
        for a malformed batch, INVALID_RECORD_STATE for an offset not ACQUIRED by `member_id` (or, with
        `once`, named a second time). GAPs for offsets the window archived (or never reached, up to its
        end) need nothing and are left out."""
        planned: list[tuple[int, AckType]] = []
        seen: set[int] = set()
        for ack in acks:
            count = ack.last_offset - ack.first_offset + 1
            if count < 1 or len(ack.types) not in (1, count):
                return ErrorCode.INVALID_REQUEST
            if any(t not in _ACK_EVENTS for t in ack.types):
                return ErrorCode.INVALID_REQUEST
            for i, offset in enumerate(range(ack.first_offset, ack.last_offset + 1)):
                kind = AckType(ack.types[0] if len(ack.types) == 1 else ack.types[i])
                record = self._records.get(offset)
                if kind == AckType.GAP and (record is None or record.state == RecordState.ARCHIVED):
                    if offset > self.end_offset:
                        return ErrorCode.INVALID_RECORD_STATE
                    continue
                if (once and offset in seen) or not self._held_by(record, member_id):
                    return ErrorCode.INVALID_RECORD_STATE
                seen.add(offset)
                planned.append((offset, kind))
        return planned

    def end_pending(self, producer_id: int, commit: bool) -> int:
        """The producer's transaction ended (its COMMIT/ABORT marker): commit applies each pending ack as
        `acknowledge` would, abort gives the records back (AVAILABLE, ARCHIVED at the delivery limit).
        Returns how many offsets it decided."""
        held = [r for r in self._records.values() if r.pending_producer == producer_id]
        for record in held:
            self._transition(record, _ACK_EVENTS[record.pending_type] if commit else Event.TXN_ABORTED)
        self._advance()
        return len(held)

    def restore_pending(
        self, member_id: str, producer_id: int, pending: Iterable[tuple[int, AckType]]
    ) -> None:
        """Loading: the pending acks of an open transaction (read from `__share_group_state`) are put back
        on a window restored from a snapshot, which wrote their offsets AVAILABLE (or did not reach them:
        they were acquired after it). Terminal offsets keep their state."""
        for offset, kind in pending:
            if offset < self.start_offset:
                continue
            if offset > self.end_offset:
                for o in range(self.end_offset + 1, offset + 1):  # not persisted yet: deliverable again
                    self._records[o] = _InFlight(RecordState.AVAILABLE, 0)
                    self._available += 1
                self.end_offset = offset
            record = self._records[offset]
            if record.state.terminal or record.pending_producer != NO_PRODUCER:
                continue
            self._leave(record)
            record.state = RecordState.ACQUIRED
            record.delivery_count = max(record.delivery_count, 1)
            record.member_id = member_id
            record.pending_producer = producer_id
            record.pending_type = kind

    def expire_locks(self, now: int) -> int:
        """Acquisition locks that ended by `now` give their records back; returns how many."""
        if not self._deadlines or min(self._deadlines) > now:
            return 0
        expired = [
            r
            for r in self._records.values()
            if r.state == RecordState.ACQUIRED
            and r.pending_producer == NO_PRODUCER
            and r.lock_deadline <= now
        ]
        for record in expired:
            self._transition(record, Event.LOCK_EXPIRED)
        self._advance()
        return len(expired)

    def release_member(self, member_id: str) -> int:
        """The member's share session ended: what it holds goes back; returns how many."""
        held = [
            r
            for r in self._records.values()
            if r.state == RecordState.ACQUIRED
            and r.member_id == member_id
            and r.pending_producer == NO_PRODUCER
        ]
        for record in held:
            self._transition(record, Event.MEMBER_GONE)
        self._advance()
        return len(held)

    def advance_start_to(self, offset: int) -> None:
        """The log no longer has anything below `offset` (retention, DeleteRecords): SPSO moves there."""
        if offset <= self.start_offset:
            return
        for o in range(self.start_offset, min(offset, self.end_offset + 1)):
            self._leave(self._records.pop(o))
        self.start_offset = offset
        self.end_offset = max(self.end_offset, offset - 1)

    def reset(self, start_offset: int) -> None:
        """AlterShareGroupOffsets: start again from `start_offset` with an empty window."""
        self._records.clear()
        self._available = 0
        self._deadlines.clear()
        self.start_offset = start_offset
        self.end_offset = start_offset - 1

    def snapshot(self) -> ShareState:
        """The persistent form: SPSO and the window in ranges, ACQUIRED written as AVAILABLE."""
        batches: list[StateBatch] = []
        for offset in range(self.start_offset, self.end_offset + 1):
            record = self._records[offset]
            state = RecordState.AVAILABLE if record.state == RecordState.ACQUIRED else record.state
            last = batches[-1] if batches else None
            if (
                last is not None
                and last.last_offset == offset - 1
                and last.state == state
                and last.delivery_count == record.delivery_count
            ):
                batches[-1] = StateBatch(last.first_offset, offset, state, last.delivery_count)
            else:
                batches.append(StateBatch(offset, offset, state, record.delivery_count))
        return ShareState(self.start_offset, tuple(batches))

    # --- internals ---------------------------------------------------------------------------------------

    @staticmethod
    def _held_by(record: _InFlight | None, member_id: str) -> bool:
        """ACQUIRED by `member_id`, its ack not pending in a transaction."""
        return (
            record is not None
            and record.state == RecordState.ACQUIRED
            and record.member_id == member_id
            and record.pending_producer == NO_PRODUCER
        )

    def _pend(self, record: _InFlight, producer_id: int, kind: AckType) -> None:
        """ACQUIRED -> ACQUIRED with its ack pending: the lock no longer runs (the index forgets it)."""
        self._leave(record)
        record.lock_deadline = 0
        record.pending_producer = producer_id
        record.pending_type = kind

    def _transition(self, record: _InFlight, event: Event) -> None:
        next_state = TRANSITIONS[(record.state, event)]
        if next_state == _RETURN and record.delivery_count >= self.delivery_limit:
            next_state = RecordState.ARCHIVED
        self._leave(record)
        self._available += next_state == RecordState.AVAILABLE
        record.state = next_state
        record.member_id = None
        record.lock_deadline = 0
        record.pending_producer = NO_PRODUCER

    def _leave(self, record: _InFlight) -> None:
        """`record` leaves its state (or the window): the indexes forget it."""
        if record.state == RecordState.AVAILABLE:
            self._available -= 1
        elif record.state == RecordState.ACQUIRED and record.pending_producer == NO_PRODUCER:
            left = self._deadlines[record.lock_deadline] - 1
            if left:
                self._deadlines[record.lock_deadline] = left
            else:
                del self._deadlines[record.lock_deadline]

    def _fill_to(self, offset: int) -> None:
        """Offsets between SPEO and `offset` hold no record (compaction, a transaction marker's slot)."""
        for o in range(self.end_offset + 1, offset + 1):
            self._records[o] = _InFlight(RecordState.ARCHIVED, 0)
        self.end_offset = max(self.end_offset, offset)

    def _advance(self) -> None:
        while self.start_offset <= self.end_offset and self._records[self.start_offset].state.terminal:
            del self._records[self.start_offset]
            self.start_offset += 1


def _ranges(acquired: list[tuple[int, int]]) -> list[AcquiredRange]:
    out: list[AcquiredRange] = []
    for offset, count in acquired:
        last = out[-1] if out else None
        if last is not None and last.last_offset == offset - 1 and last.delivery_count == count:
            out[-1] = AcquiredRange(last.first_offset, offset, count)
        else:
            out.append(AcquiredRange(offset, offset, count))
    return out
