"""The share partition's record states under any interleaving of fetches, acknowledgements, lock
expiries and members leaving (Hypothesis state machine), against a model of what was delivered."""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from exactly.errors import ErrorCode
from exactly.group.share.partition import (
    AckBatch,
    AckType,
    BatchKind,
    FetchedBatch,
    RecordState,
    SharePartition,
    ShareState,
)

LIMIT = 3
LOCK_MS = 1000
MAX_IN_FLIGHT = 12
MEMBERS = ("m1", "m2", "m3")


def _log(length: int, control_every: int) -> list[FetchedBatch]:
    """A log of batches of 1-3 records, with a one-offset control batch now and then."""
    batches = []
    offset = 0
    size = 1
    while offset < length:
        if control_every and len(batches) % control_every == control_every - 1:
            batches.append(FetchedBatch(offset, offset, BatchKind.CONTROL))
            offset += 1
            continue
        last = min(offset + size - 1, length - 1)
        batches.append(FetchedBatch(offset, last, BatchKind.DATA))
        offset = last + 1
        size = size % 3 + 1
    return batches


class SharePartitionMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.log = _log(40, 4)
        self.data_offsets = {
            o for b in self.log if b.kind is BatchKind.DATA for o in range(b.base_offset, b.last_offset + 1)
        }
        self.partition = SharePartition(
            ShareState(0), delivery_limit=LIMIT, lock_duration_ms=LOCK_MS, max_in_flight=MAX_IN_FLIGHT
        )
        self.now = 0
        self.held: dict[int, str] = {}  # model: offset -> member holding it
        self.locked_until: dict[int, int] = {}  # model: offset -> its lock's deadline, while held
        self.deliveries: dict[int, int] = {}  # model: offset -> times delivered
        self.rejected: set[int] = set()
        self.accepted: set[int] = set()

    def _read(self) -> list[FetchedBatch]:
        start = self.partition.fetch_offset()
        return [b for b in self.log if b.last_offset >= start]

    @rule(member=st.sampled_from(MEMBERS), max_records=st.integers(1, 6))
    def fetch(self, member: str, max_records: int) -> None:
        ranges = self.partition.acquire(member, self._read(), max_records, self.now)
        for r in ranges:
            assert r.first_offset <= r.last_offset
            for offset in range(r.first_offset, r.last_offset + 1):
                assert offset in self.data_offsets, "only data records are delivered"
                assert offset not in self.held, "a record is delivered to one member at a time"
                assert offset not in self.rejected
                assert offset not in self.accepted
                self.held[offset] = member
                self.locked_until[offset] = self.now + LOCK_MS
                self.deliveries[offset] = self.deliveries.get(offset, 0) + 1
                assert r.delivery_count == self.deliveries[offset]
                assert r.delivery_count <= LIMIT

    @precondition(lambda self: bool(self.held))
    @rule(data=st.data(), kind=st.sampled_from([AckType.ACCEPT, AckType.RELEASE, AckType.REJECT]))
    def acknowledge(self, data: st.DataObject, kind: AckType) -> None:
        offset = data.draw(st.sampled_from(sorted(self.held)))
        member = self.held[offset]
        assert self.partition.acknowledge(member, [AckBatch(offset, offset, (kind,))]) == ErrorCode.NONE
        del self.held[offset]
        if kind == AckType.ACCEPT:
            self.accepted.add(offset)
        elif kind == AckType.REJECT:
            self.rejected.add(offset)

    @precondition(lambda self: bool(self.held))
    @rule(data=st.data())
    def acknowledge_by_another_member_is_refused(self, data: st.DataObject) -> None:
        offset = data.draw(st.sampled_from(sorted(self.held)))
        other = next(m for m in MEMBERS if m != self.held[offset])
        batch = AckBatch(offset, offset, (AckType.ACCEPT,))
        assert self.partition.acknowledge(other, [batch]) == ErrorCode.INVALID_RECORD_STATE
        assert self.partition.holder(offset) == self.held[offset]

    @rule(ms=st.integers(0, 2 * LOCK_MS))
    def time_passes(self, ms: int) -> None:
        self.now += ms
        deadline = self.partition.next_lock_deadline()
        self.partition.expire_locks(self.now)
        if deadline is not None and deadline <= self.now:
            self.held = {o: m for o, m in self.held.items() if self.partition.holder(o) == m}
        assert all(self.partition.holder(o) == m for o, m in self.held.items())

    @rule(member=st.sampled_from(MEMBERS))
    def member_leaves(self, member: str) -> None:
        self.partition.release_member(member)
        self.held = {o: m for o, m in self.held.items() if m != member}

    @rule()
    def restart(self) -> None:
        """The persisted form reloaded: what was held comes back AVAILABLE, its deliveries counted."""
        self.partition = SharePartition(
            self.partition.snapshot(),
            delivery_limit=LIMIT,
            lock_duration_ms=LOCK_MS,
            max_in_flight=MAX_IN_FLIGHT,
        )
        self.held.clear()

    @invariant()
    def indexes_agree_with_the_window(self) -> None:
        """fetch_offset, can_acquire and next_lock_deadline (kept as counters) agree with a scan."""
        p = self.partition
        window = range(p.start_offset, p.end_offset + 1)
        available = [o for o in window if p.state_of(o) == RecordState.AVAILABLE]
        assert p.fetch_offset() == (available[0] if available else p.end_offset + 1)
        assert p.can_acquire() == (bool(available) or p.in_flight < MAX_IN_FLIGHT)
        held = [self.locked_until[o] for o in self.held]
        assert p.next_lock_deadline() == (min(held) if held else None)

    @invariant()
    def window_is_bounded_and_consistent(self) -> None:
        p = self.partition
        assert 0 <= p.in_flight <= MAX_IN_FLIGHT
        if p.in_flight:
            assert not p.state_of(p.start_offset).terminal  # type: ignore[union-attr]
        for offset in range(0, p.end_offset + 1):
            state = p.state_of(offset)
            assert state is not None
            if offset in self.accepted:
                assert state.terminal
            if offset in self.rejected:
                assert state.terminal
            assert p.delivery_count(offset) <= LIMIT
            if state == RecordState.ACQUIRED:
                assert p.holder(offset) == self.held.get(offset)

    def teardown(self) -> None:
        """Liveness: with everything acknowledged as it comes, every record ends terminal."""
        p = self.partition
        for _ in range(200):
            if p.start_offset > self.log[-1].last_offset:
                break
            self.now += 10 * LOCK_MS
            p.expire_locks(self.now)
            for r in p.acquire(
                "closer", [b for b in self.log if b.last_offset >= p.fetch_offset()], 50, self.now
            ):
                batch = AckBatch(r.first_offset, r.last_offset, (AckType.ACCEPT,))
                assert p.acknowledge("closer", [batch]) == ErrorCode.NONE
        assert p.start_offset == self.log[-1].last_offset + 1, "every record ACKNOWLEDGED or ARCHIVED"


TestSharePartitionMachine = SharePartitionMachine.TestCase
TestSharePartitionMachine.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
