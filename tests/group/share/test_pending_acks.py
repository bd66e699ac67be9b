"""Pending acknowledgements of a share partition (the transactional-ack extension): acks held by a
producer's open transaction, decided by its COMMIT or ABORT marker — one rule at a time, then a
Hypothesis state machine over acquire / pend / commit / abort / expire / leave / restart."""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from exactly.errors import ErrorCode
from exactly.group.share.partition import (
    AckBatch,
    AckType,
    AcquiredRange,
    BatchKind,
    FetchedBatch,
    RecordState,
    SharePartition,
    ShareState,
)

DATA = [FetchedBatch(0, 4, BatchKind.DATA)]
P1, P2 = 1000, 1001


def _partition(limit: int = 3) -> SharePartition:
    return SharePartition(ShareState(0), delivery_limit=limit, lock_duration_ms=100, max_in_flight=100)


def _ack(first: int, last: int, kind: AckType) -> AckBatch:
    return AckBatch(first, last, (kind,))


def test_a_pending_ack_keeps_the_record_acquired_until_commit() -> None:
    p = _partition()
    p.acquire("a", DATA, 10, 0)
    assert p.add_pending("a", P1, [_ack(0, 2, AckType.ACCEPT)]) == ErrorCode.NONE
    assert [p.state_of(o) for o in range(5)] == [RecordState.ACQUIRED] * 5
    assert p.pending(1) == (P1, AckType.ACCEPT)
    assert p.pending(3) is None
    assert p.pending_of(P1) == [(0, AckType.ACCEPT), (1, AckType.ACCEPT), (2, AckType.ACCEPT)]
    assert p.end_pending(P1, commit=True) == 3
    assert p.start_offset == 3  # 0-2 ACKNOWLEDGED: SPSO moved past them
    assert p.pending_of(P1) == []
    assert p.holder(3) == "a"


def test_the_lock_does_not_expire_a_pending_record_nor_does_the_member_leaving() -> None:
    p = _partition()
    p.acquire("a", DATA, 10, 0)
    p.add_pending("a", P1, [_ack(0, 1, AckType.ACCEPT)])
    assert p.next_lock_deadline() == 100  # 2-4 still locked
    assert p.expire_locks(10_000) == 3
    assert p.next_lock_deadline() is None
    assert p.release_member("a") == 0
    assert p.state_of(0) == RecordState.ACQUIRED
    assert p.holder(0) == "a"
    assert p.acquire("b", DATA, 10, 10_000) == [AcquiredRange(2, 4, 2)]  # never 0-1 while pending


def test_abort_gives_the_records_back_with_their_delivery_count() -> None:
    p = _partition(limit=2)
    p.acquire("a", DATA, 10, 0)
    p.add_pending("a", P1, [AckBatch(0, 1, (AckType.ACCEPT, AckType.REJECT))])
    assert p.end_pending(P1, commit=False) == 2
    assert p.state_of(0) == RecordState.AVAILABLE
    assert p.delivery_count(0) == 1
    assert p.acquire("b", DATA, 2, 0) == [AcquiredRange(0, 1, 2)]
    p.add_pending("b", P2, [_ack(0, 1, AckType.ACCEPT)])
    p.end_pending(P2, commit=False)  # at the limit: archived, as a RELEASE would be
    assert p.state_of(0) == RecordState.ACKNOWLEDGED  # below SPSO: terminal
    assert p.start_offset == 2


def test_commit_applies_each_type() -> None:
    p = _partition()
    p.acquire("a", DATA, 10, 0)
    types = (AckType.ACCEPT, AckType.RELEASE, AckType.REJECT, AckType.ACCEPT, AckType.GAP)
    assert p.add_pending("a", P1, [AckBatch(0, 4, types)]) == ErrorCode.NONE
    p.end_pending(P1, commit=True)
    assert p.start_offset == 1
    assert p.state_of(1) == RecordState.AVAILABLE
    assert [p.state_of(o) for o in (2, 3, 4)] == [
        RecordState.ARCHIVED,
        RecordState.ACKNOWLEDGED,
        RecordState.ARCHIVED,
    ]


def test_refusals_change_nothing() -> None:
    p = _partition()
    p.acquire("a", DATA, 3, 0)  # 0-4: one batch, acquired whole
    assert p.add_pending("b", P1, [_ack(0, 0, AckType.ACCEPT)]) == ErrorCode.INVALID_RECORD_STATE
    assert p.add_pending("a", P1, [_ack(0, 9, AckType.ACCEPT)]) == ErrorCode.INVALID_RECORD_STATE
    assert p.add_pending("a", -1, [_ack(0, 0, AckType.ACCEPT)]) == ErrorCode.INVALID_REQUEST
    assert p.add_pending("a", P1, [AckBatch(0, 2, (1, 1))]) == ErrorCode.INVALID_REQUEST
    assert p.add_pending("a", P1, [_ack(0, 0, AckType.ACCEPT), _ack(0, 0, AckType.ACCEPT)]) == (
        ErrorCode.INVALID_RECORD_STATE
    )
    assert p.pending_producers() == set()
    assert p.add_pending("a", P1, [_ack(0, 0, AckType.ACCEPT)]) == ErrorCode.NONE
    # pending: neither a plain ack nor another transaction may take it
    assert p.acknowledge("a", [_ack(0, 0, AckType.ACCEPT)]) == ErrorCode.INVALID_RECORD_STATE
    assert p.add_pending("a", P2, [_ack(0, 1, AckType.ACCEPT)]) == ErrorCode.INVALID_RECORD_STATE
    assert p.pending_of(P2) == []
    assert p.end_pending(P2, commit=True) == 0
    assert p.pending_producers() == {P1}


def test_restore_puts_pending_acks_back_on_a_snapshot_even_past_its_window() -> None:
    p = _partition()
    p.acquire("a", [FetchedBatch(0, 1, BatchKind.DATA)], 10, 0)
    snap = p.snapshot()  # 0-1 AVAILABLE (ACQUIRED is never persisted)
    p.acquire("a", [FetchedBatch(2, 5, BatchKind.DATA)], 10, 0)
    p.add_pending("a", P1, [_ack(1, 1, AckType.ACCEPT), _ack(4, 4, AckType.REJECT)])
    q = SharePartition(snap, delivery_limit=3, lock_duration_ms=100, max_in_flight=100)
    q.restore_pending("a", P1, p.pending_of(P1))
    assert q.pending(1) == (P1, AckType.ACCEPT)
    assert q.pending(4) == (P1, AckType.REJECT)
    assert q.state_of(2) == RecordState.AVAILABLE  # acquired after the snapshot: deliverable again
    got = q.acquire("b", [FetchedBatch(0, 5, BatchKind.DATA)], 10, 0)
    assert got == [AcquiredRange(0, 0, 2), AcquiredRange(2, 3, 1), AcquiredRange(5, 5, 1)]
    q.end_pending(P1, commit=True)
    assert q.state_of(4) == RecordState.ARCHIVED


# --- the state machine ---------------------------------------------------------------------------------

LIMIT = 3
LOCK_MS = 1000
MEMBERS = ("m1", "m2")
PRODUCERS = (7, 8, 9)
LOG = [FetchedBatch(o, o + 1, BatchKind.DATA) for o in range(0, 30, 2)]
LAST = LOG[-1].last_offset


class PendingAckMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.partition = SharePartition(
            ShareState(0), delivery_limit=LIMIT, lock_duration_ms=LOCK_MS, max_in_flight=16
        )
        self.now = 0
        self.held: dict[int, str] = {}  # model: offset -> member, acquired and not pending
        self.pending: dict[int, tuple[int, str, AckType]] = {}  # offset -> (producer, member, type)
        self.deliveries: dict[int, int] = {}
        self.done: set[int] = set()  # ACCEPT/REJECT/GAP committed (or plainly acknowledged)

    def _read(self) -> list[FetchedBatch]:
        return [b for b in LOG if b.last_offset >= self.partition.fetch_offset()]

    @rule(member=st.sampled_from(MEMBERS), max_records=st.integers(1, 4))
    def acquire(self, member: str, max_records: int) -> None:
        for r in self.partition.acquire(member, self._read(), max_records, self.now):
            for offset in range(r.first_offset, r.last_offset + 1):
                assert offset not in self.pending, "a record whose ack is pending is never redelivered"
                assert offset not in self.held
                assert offset not in self.done
                self.held[offset] = member
                self.deliveries[offset] = self.deliveries.get(offset, 0) + 1
                assert r.delivery_count == self.deliveries[offset]

    @precondition(lambda self: bool(self.held))
    @rule(data=st.data(), producer=st.sampled_from(PRODUCERS), kind=st.sampled_from(list(AckType)))
    def pend(self, data: st.DataObject, producer: int, kind: AckType) -> None:
        offset = data.draw(st.sampled_from(sorted(self.held)))
        member = self.held[offset]
        other = next(m for m in MEMBERS if m != member)
        assert self.partition.add_pending(other, producer, [_ack(offset, offset, kind)]) == (
            ErrorCode.INVALID_RECORD_STATE
        )
        assert self.partition.add_pending(member, producer, [_ack(offset, offset, kind)]) == ErrorCode.NONE
        del self.held[offset]
        self.pending[offset] = (producer, member, kind)

    @precondition(lambda self: bool(self.pending))
    @rule(data=st.data(), producer=st.sampled_from(PRODUCERS))
    def pend_again_is_refused(self, data: st.DataObject, producer: int) -> None:
        offset = data.draw(st.sampled_from(sorted(self.pending)))
        _, member, _ = self.pending[offset]
        ack = _ack(offset, offset, AckType.ACCEPT)
        assert self.partition.add_pending(member, producer, [ack]) == ErrorCode.INVALID_RECORD_STATE
        assert self.partition.acknowledge(member, [ack]) == ErrorCode.INVALID_RECORD_STATE

    @rule(producer=st.sampled_from(PRODUCERS), commit=st.booleans())
    def end_transaction(self, producer: int, commit: bool) -> None:
        mine = {o: v for o, v in self.pending.items() if v[0] == producer}
        assert self.partition.end_pending(producer, commit) == len(mine)
        for offset, (_, _, kind) in mine.items():
            del self.pending[offset]
            if commit and kind != AckType.RELEASE:
                self.done.add(offset)

    @precondition(lambda self: bool(self.held))
    @rule(data=st.data())
    def acknowledge(self, data: st.DataObject) -> None:
        offset = data.draw(st.sampled_from(sorted(self.held)))
        ack = _ack(offset, offset, AckType.ACCEPT)
        assert self.partition.acknowledge(self.held.pop(offset), [ack]) == ErrorCode.NONE
        self.done.add(offset)

    @rule(ms=st.integers(0, 2 * LOCK_MS))
    def time_passes(self, ms: int) -> None:
        self.now += ms
        self.partition.expire_locks(self.now)
        self.held = {o: m for o, m in self.held.items() if self.partition.holder(o) == m}

    @rule(member=st.sampled_from(MEMBERS))
    def member_leaves(self, member: str) -> None:
        self.partition.release_member(member)
        self.held = {o: m for o, m in self.held.items() if m != member}

    @rule()
    def restart(self) -> None:
        """The broker reloads: the snapshot, then the open transactions' pending acks put back."""
        old = self.partition
        self.partition = SharePartition(
            old.snapshot(), delivery_limit=LIMIT, lock_duration_ms=LOCK_MS, max_in_flight=16
        )
        assert old.pending_producers() == {v[0] for v in self.pending.values()}
        for (producer, member), offsets in _by_owner(self.pending).items():
            self.partition.restore_pending(
                member, producer, [(o, k) for o, k in old.pending_of(producer) if o in offsets]
            )
        self.held.clear()

    @invariant()
    def pending_records_stay_acquired_by_their_member(self) -> None:
        p = self.partition
        for offset, (producer, member, kind) in self.pending.items():
            assert p.state_of(offset) == RecordState.ACQUIRED
            assert p.holder(offset) == member
            assert p.pending(offset) == (producer, kind)

    @invariant()
    def decided_records_are_terminal_and_counts_bounded(self) -> None:
        p = self.partition
        for offset in self.done:
            assert p.state_of(offset) in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
        for offset in range(p.start_offset, p.end_offset + 1):
            assert p.delivery_count(offset) <= LIMIT
            if p.pending(offset) is None and p.state_of(offset) == RecordState.ACQUIRED:
                assert p.holder(offset) == self.held.get(offset)

    def teardown(self) -> None:
        """Liveness: once every transaction ends, everything can be acknowledged."""
        p = self.partition
        for producer in PRODUCERS:
            p.end_pending(producer, commit=False)
        for _ in range(100):
            if p.start_offset > LAST:
                break
            self.now += 10 * LOCK_MS
            p.expire_locks(self.now)
            for r in p.acquire("closer", self._read(), 50, self.now):
                assert p.acknowledge("closer", [_ack(r.first_offset, r.last_offset, AckType.ACCEPT)]) == (
                    ErrorCode.NONE
                )
        assert p.start_offset == LAST + 1


def _by_owner(pending: dict[int, tuple[int, str, AckType]]) -> dict[tuple[int, str], set[int]]:
    out: dict[tuple[int, str], set[int]] = {}
    for offset, (producer, member, _) in pending.items():
        out.setdefault((producer, member), set()).add(offset)
    return out


TestPendingAckMachine = PendingAckMachine.TestCase
TestPendingAckMachine.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
