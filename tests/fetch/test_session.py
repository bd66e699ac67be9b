"""The fetch session cache (KIP-227): contexts per request kind, incremental responses, eviction, and a
Hypothesis state machine against a simple model of the sessions."""

from __future__ import annotations

import itertools
import uuid

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from exactly.errors import ErrorCode
from exactly.fetch.session import (
    ContextKind,
    FetchPosition,
    FetchSessionCache,
    PartitionKey,
    PartitionResult,
    next_epoch,
)

ZERO = uuid.UUID(int=0)
A0 = PartitionKey(ZERO, "a", 0)
A1 = PartitionKey(ZERO, "a", 1)
B0 = PartitionKey(ZERO, "b", 0)
POS = FetchPosition(0, 1 << 20)


def counter_ids() -> FetchSessionCache:
    ids = itertools.count(100)
    return FetchSessionCache(max_slots=3, eviction_ms=1000, new_id=lambda: next(ids))


def result(hw: int = 10, records: int = 0, error: int = ErrorCode.NONE, lso: int = 10) -> PartitionResult:
    return PartitionResult(error, hw, lso, 0, records)


def open_session(cache: FetchSessionCache, keys: list[PartitionKey], now: int = 0) -> int:
    context = cache.new_context(0, 0, False, [(k, POS) for k in keys], [], now)
    assert context.kind is ContextKind.FULL
    session_id, respond = cache.complete(context, {k: result() for k in keys}, now)
    assert respond == keys
    return session_id


def test_epochs_wrap_to_one_never_zero() -> None:
    assert next_epoch(-1) == 0
    assert next_epoch(0) == 1
    assert next_epoch(41) == 42
    assert next_epoch(2**31 - 1) == 1


def test_sessionless_fetch_creates_no_session() -> None:
    cache = counter_ids()
    context = cache.new_context(0, -1, False, [(A0, POS), (A1, POS)], [], 0)
    assert context.kind is ContextKind.SESSIONLESS
    session_id, respond = cache.complete(context, {A0: result(), A1: result()}, 0)
    assert (session_id, respond, len(cache)) == (0, [A0, A1], 0)


def test_full_fetch_opens_a_session_and_incremental_answers_only_changes() -> None:
    cache = counter_ids()
    session_id = open_session(cache, [A0, A1, B0])
    assert session_id == 100
    # Epoch 1, nothing new in the request, nothing changed in the logs: an empty response.
    context = cache.new_context(session_id, 1, False, [], [], 10)
    assert context.kind is ContextKind.INCREMENTAL
    assert [k for k, _ in context.partitions] == [A0, A1, B0]
    assert cache.complete(context, {A0: result(), A1: result(), B0: result()}, 10) == (session_id, [])
    # Epoch 2: A1 has records, B0's high watermark moved, A0 is unchanged.
    context = cache.new_context(session_id, 2, False, [], [], 20)
    got = cache.complete(context, {A0: result(), A1: result(records=70), B0: result(hw=11)}, 20)
    assert got == (session_id, [A1, B0])
    # A partition that returned records moves to the end of the session's order.
    context = cache.new_context(session_id, 3, False, [(A1, FetchPosition(10, 1 << 20))], [], 30)
    assert [(k, p.fetch_offset) for k, p in context.partitions] == [(A0, 0), (B0, 0), (A1, 10)]


def test_errors_are_always_answered_and_the_partition_comes_back_after() -> None:
    cache = counter_ids()
    session_id = open_session(cache, [A0])
    context = cache.new_context(session_id, 1, False, [], [], 0)
    failed = result(hw=-1, error=ErrorCode.OFFSET_OUT_OF_RANGE)
    assert cache.complete(context, {A0: failed}, 0) == (session_id, [A0])
    context = cache.new_context(session_id, 2, False, [], [], 0)
    assert cache.complete(context, {A0: failed}, 0) == (session_id, [A0])
    context = cache.new_context(session_id, 3, False, [], [], 0)  # error gone: sent again once
    assert cache.complete(context, {A0: result()}, 0) == (session_id, [A0])
    context = cache.new_context(session_id, 4, False, [], [], 0)
    assert cache.complete(context, {A0: result()}, 0) == (session_id, [])


def test_last_stable_offset_change_is_answered() -> None:
    cache = counter_ids()
    session_id = open_session(cache, [A0])
    context = cache.new_context(session_id, 1, False, [], [], 0)
    assert cache.complete(context, {A0: result(lso=7)}, 0) == (session_id, [A0])


def test_a_preferred_read_replica_is_always_answered() -> None:
    cache = counter_ids()
    session_id = open_session(cache, [A0, A1])
    context = cache.new_context(session_id, 1, False, [], [], 0)
    preferred = PartitionResult(ErrorCode.NONE, 10, 10, 0, 0, preferred_read_replica=2)  # nothing else new
    assert cache.complete(context, {A0: preferred, A1: result()}, 0) == (session_id, [A0])


def test_forgotten_partitions_leave_and_new_ones_join() -> None:
    cache = counter_ids()
    session_id = open_session(cache, [A0, A1])
    context = cache.new_context(session_id, 1, False, [(B0, POS)], [A0], 0)
    assert [k for k, _ in context.partitions] == [A1, B0]
    # The new partition is reported once (its state is new to the session), the old one not.
    assert cache.complete(context, {A1: result(), B0: result()}, 0) == (session_id, [B0])


def test_session_errors() -> None:
    cache = counter_ids()
    session_id = open_session(cache, [A0])
    assert cache.new_context(999, 1, False, [], [], 0).error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert cache.new_context(0, 5, False, [], [], 0).error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert cache.new_context(session_id, 2, False, [], [], 0).error == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    assert cache.new_context(session_id, 1, True, [], [], 0).error == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
    # A refused request does not move the epoch.
    assert cache.new_context(session_id, 1, False, [], [], 0).kind is ContextKind.INCREMENTAL
    errored = cache.new_context(0, 5, False, [], [], 0)
    assert errored.kind is ContextKind.ERROR
    assert cache.complete(errored, {}, 0) == (0, [])


def test_epoch_minus_one_closes_and_epoch_zero_replaces() -> None:
    cache = counter_ids()
    first = open_session(cache, [A0])
    context = cache.new_context(first, 0, False, [(A1, POS)], [], 0)
    assert context.kind is ContextKind.FULL
    assert cache.get(first) is None
    second, respond = cache.complete(context, {A1: result()}, 0)
    assert second != first
    assert respond == [A1]
    context = cache.new_context(second, -1, False, [(A1, POS)], [], 0)
    assert context.kind is ContextKind.SESSIONLESS
    assert cache.complete(context, {A1: result()}, 0) == (0, [A1])
    assert len(cache) == 0


def test_full_cache_evicts_a_stale_session_first_then_a_smaller_one() -> None:
    cache = counter_ids()  # 3 slots, sessions idle > 1000 ms are stale
    s1 = open_session(cache, [A0], now=0)
    s2 = open_session(cache, [A0, A1], now=500)
    s3 = open_session(cache, [A0, A1], now=600)
    # Not stale, and a new one-partition session is not larger than the smallest (s1): sessionless.
    assert open_session(cache, [B0], now=900) == 0
    assert cache.evictions == 0
    # Larger than the smallest: s1 is evicted.
    s4 = open_session(cache, [A0, A1, B0], now=900)
    assert s4 != 0
    assert cache.get(s1) is None
    assert cache.evictions == 1
    # s2 has been idle for more than eviction_ms: evicted for even a small session.
    s5 = open_session(cache, [B0], now=1600)
    assert s5 != 0
    assert cache.get(s2) is None
    assert cache.get(s3) is not None


def test_zero_slots_means_no_sessions() -> None:
    cache = FetchSessionCache(max_slots=0)
    assert open_session(cache, [A0]) == 0


def test_session_closed_while_a_fetch_waited_answers_in_full() -> None:
    cache = counter_ids()
    session_id = open_session(cache, [A0])
    waiting = cache.new_context(session_id, 1, False, [], [], 0)
    cache.new_context(session_id, -1, False, [], [], 0)  # closed meanwhile
    assert cache.complete(waiting, {A0: result()}, 0) == (0, [A0])


# --- state machine ------------------------------------------------------------------------------------

KEYS = [A0, A1, B0, PartitionKey(uuid.UUID(int=7), "", 0)]


class SessionMachine(RuleBasedStateMachine):
    """Model: per session id its next epoch, its partitions (ordered) and what each last reported."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 0
        self.cache = FetchSessionCache(max_slots=3, eviction_ms=50)
        self.model: dict[int, tuple[int, dict[PartitionKey, PartitionResult | None]]] = {}
        self.logs = {k: result(hw=0, lso=0) for k in KEYS}

    def _results(self, keys: list[PartitionKey]) -> dict[PartitionKey, PartitionResult]:
        return {k: self.logs[k] for k in keys}

    @rule(ms=st.integers(0, 40))
    def tick(self, ms: int) -> None:
        self.now += ms

    @rule(key=st.sampled_from(KEYS), records=st.integers(0, 3), error=st.booleans())
    def log_changes(self, key: PartitionKey, records: int, error: bool) -> None:
        old = self.logs[key]
        code = ErrorCode.OFFSET_OUT_OF_RANGE if error else ErrorCode.NONE
        self.logs[key] = PartitionResult(code, old.high_watermark + records, old.high_watermark, 0, records)

    @rule(keys=st.lists(st.sampled_from(KEYS), unique=True), want_session=st.booleans())
    def full_fetch(self, keys: list[PartitionKey], want_session: bool) -> None:
        before = set(self.model)
        context = self.cache.new_context(
            0, 0 if want_session else -1, False, [(k, POS) for k in keys], [], self.now
        )
        session_id, respond = self.cache.complete(context, self._results(keys), self.now)
        assert respond == keys
        if not want_session:
            assert session_id == 0
            return
        after = {sid for sid in before if self.cache.get(sid) is not None}
        assert len(before - after) <= 1  # at most one eviction
        for gone in before - after:
            del self.model[gone]
        if session_id == 0:
            assert len(self.model) == 3
            return
        assert session_id not in before
        assert len(before - after) == 0 or len(before) == 3
        self.model[session_id] = (1, {k: self.logs[k] for k in keys})

    @precondition(lambda self: bool(self.model))
    @rule(
        data=st.data(),
        add=st.lists(st.sampled_from(KEYS), unique=True, max_size=2),
        forget=st.lists(st.sampled_from(KEYS), unique=True, max_size=2),
        bad_epoch=st.booleans(),
    )
    def incremental_fetch(
        self, data: st.DataObject, add: list[PartitionKey], forget: list[PartitionKey], bad_epoch: bool
    ) -> None:
        session_id = data.draw(st.sampled_from(sorted(self.model)))
        epoch, partitions = self.model[session_id]
        sent_epoch = epoch + 1 if bad_epoch else epoch
        context = self.cache.new_context(
            session_id, sent_epoch, False, [(k, POS) for k in add], forget, self.now
        )
        if bad_epoch:
            assert context.error == ErrorCode.INVALID_FETCH_SESSION_EPOCH
            return
        assert context.kind is ContextKind.INCREMENTAL
        for k in add:
            partitions.setdefault(k, None)
        for k in forget:
            partitions.pop(k, None)
        assert {k for k, _ in context.partitions} == set(partitions)
        got_id, respond = self.cache.complete(context, self._results(list(partitions)), self.now)
        assert got_id == session_id
        expected = set()
        for k, last in partitions.items():
            now = self.logs[k]
            changed = (
                last is None
                or now.record_bytes > 0
                or now.error_code != ErrorCode.NONE
                or last.error_code != ErrorCode.NONE
                or (now.high_watermark, now.last_stable_offset)
                != (last.high_watermark, last.last_stable_offset)
            )
            if changed:
                expected.add(k)
            partitions[k] = now
        assert set(respond) == expected
        self.model[session_id] = (next_epoch(epoch), partitions)

    @precondition(lambda self: bool(self.model))
    @rule(data=st.data())
    def close(self, data: st.DataObject) -> None:
        session_id = data.draw(st.sampled_from(sorted(self.model)))
        context = self.cache.new_context(session_id, -1, False, [], [], self.now)
        assert context.kind is ContextKind.SESSIONLESS
        del self.model[session_id]

    @invariant()
    def same_sessions(self) -> None:
        assert len(self.cache) == len(self.model) <= 3
        for session_id, (epoch, partitions) in self.model.items():
            session = self.cache.get(session_id)
            assert session is not None
            assert session.epoch == epoch
            assert set(session.partitions) == set(partitions)


TestSessionMachine = SessionMachine.TestCase
TestSessionMachine.settings = settings(max_examples=200, stateful_step_count=40, deadline=None)


def test_a_partition_both_fetched_and_forgotten_is_dropped() -> None:
    cache = counter_ids()
    session_id = open_session(cache, [A0, A1])
    context = cache.new_context(session_id, 1, False, [(A1, FetchPosition(5, 1))], [A1], 0)
    assert [k for k, _ in context.partitions] == [A0]
