"""Pending-ack records of `__share_group_state` (exactly's type 100) round trip, and the share coordinator's
shard decides them by the markers that follow them in the log, among snapshots and updates."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from exactly.errors import CorruptRecordError
from exactly.group.share.coordinator import ShareCoordinatorShard, StateWrite
from exactly.group.share.partition import AckType, RecordState, ShareState, StateBatch
from exactly.group.share.records import (
    PendingAckRecord,
    SharePartitionKey,
    StoredShareState,
    apply_acks,
    decode_key,
    decode_pending,
    encode_key,
    encode_pending,
    encode_value,
)

KEY = SharePartitionKey("g", uuid.UUID(int=7), 0)


@st.composite
def pending_records(draw: st.DrawFn) -> PendingAckRecord:
    key = draw(st.builds(SharePartitionKey, st.text(max_size=30), st.uuids(), st.integers(0, 2**31 - 1)))
    start = draw(st.integers(0, 2**40))
    offsets = sorted(draw(st.sets(st.integers(0, 200), max_size=30)))
    acks = tuple((start + o, draw(st.sampled_from(list(AckType)))) for o in offsets)
    return PendingAckRecord(key, draw(st.integers(0, 2**62)), draw(st.text(max_size=30)), acks)


@given(pending_records())
def test_pending_records_round_trip(record: PendingAckRecord) -> None:
    raw_key, raw_value = encode_pending(record)
    assert decode_pending(raw_key, raw_value) == record
    assert decode_key(raw_key) == (100, record.key)


def test_a_snapshot_key_is_not_a_pending_ack() -> None:
    with pytest.raises(CorruptRecordError):
        decode_pending(encode_key(KEY), b"\x00\x00")


def _stored(state: ShareState) -> bytes:
    return encode_value(StoredShareState(state))


def test_the_shard_applies_committed_acks_and_drops_aborted_ones() -> None:
    store = ShareCoordinatorShard()
    window = ShareState(0, (StateBatch(0, 5, RecordState.AVAILABLE, 1),))
    store.replay(encode_key(KEY), _stored(window), 3)
    commit = PendingAckRecord(KEY, 11, "m", ((0, AckType.ACCEPT), (1, AckType.REJECT), (3, AckType.ACCEPT)))
    abort = PendingAckRecord(KEY, 12, "m", ((2, AckType.ACCEPT),))
    for record in (commit, abort):
        store.replay(*encode_pending(record), 3, record.producer_id)
    assert store.pending_for(KEY) == [commit, abort]
    assert store.replay_marker(3, 12, committed=False) == [abort]
    assert store.states[KEY].state == window
    assert store.replay_marker(3, 11, committed=True) == [commit]
    assert store.states[KEY].state == ShareState(
        2,
        (
            StateBatch(2, 2, RecordState.AVAILABLE, 1),
            StateBatch(3, 3, RecordState.ACKNOWLEDGED, 1),
            StateBatch(4, 5, RecordState.AVAILABLE, 1),
        ),
    )
    assert store.pending_for(KEY) == []


def test_committed_acks_past_the_snapshot_window_leave_the_rest_deliverable() -> None:
    state = apply_acks(ShareState(10), "m", [(12, AckType.ACCEPT)])
    assert state == ShareState(
        10, (StateBatch(10, 11, RecordState.AVAILABLE, 0), StateBatch(12, 12, RecordState.ACKNOWLEDGED, 1))
    )


def test_pending_acks_among_updates_replay_to_the_same_state() -> None:
    """Snapshot, update, pending acks of two producers, a COMMIT, an update written after it, an ABORT:
    the live shard and one that replays the log (a state partition's new leader) agree, and what is
    pending at the end (an open transaction) is the same."""
    log: list[tuple[bytes, bytes | None, int, bool | None]] = []  # (key, value, producer, marker)
    live = ShareCoordinatorShard(snapshot_every=500)

    def record(key: bytes, value: bytes | None, producer: int = -1) -> None:
        live.replay(key, value, 3, producer)
        log.append((key, value, producer, None))

    def marker(producer: int, committed: bool) -> None:
        live.replay_marker(3, producer, committed)
        log.append((b"", None, producer, committed))

    for key, value in live.initialize(KEY, 0, 0, 1).records:
        record(key, value)
    acquired = StateWrite(0, 0, -1, (StateBatch(0, 5, RecordState.AVAILABLE, 1),))
    for key, value in live.write(KEY, acquired, 2).records:
        record(key, value)
    record(*encode_pending(PendingAckRecord(KEY, 11, "m", ((0, AckType.ACCEPT), (1, AckType.ACCEPT)))), 11)
    record(*encode_pending(PendingAckRecord(KEY, 12, "m", ((4, AckType.ACCEPT),))), 12)
    record(*encode_pending(PendingAckRecord(KEY, 13, "m", ((5, AckType.ACCEPT),))), 13)
    marker(11, True)
    assert live.states[KEY].state.start_offset == 2
    later = StateWrite(0, 0, 3, (StateBatch(2, 2, RecordState.ACKNOWLEDGED, 1),))  # SPSO moves past it
    for key, value in live.write(KEY, later, 3).records:
        record(key, value)
    marker(12, False)

    replayed = ShareCoordinatorShard(snapshot_every=500)
    for key, value, producer, committed in log:
        if committed is None:
            replayed.replay(key, value, 3, producer)
        else:
            replayed.replay_marker(3, producer, committed)
    assert replayed.states == live.states
    assert live.states[KEY].state == ShareState(3, (StateBatch(3, 5, RecordState.AVAILABLE, 1),))
    assert (
        replayed.pending_for(KEY)
        == live.pending_for(KEY)
        == [PendingAckRecord(KEY, 13, "m", ((5, AckType.ACCEPT),))]
    )
    replayed.forget(lambda k: k == KEY)
    assert replayed.pending_for(KEY) == []
    assert replayed.get(KEY) is None


def test_a_commit_of_a_deleted_state_applies_nothing() -> None:
    shard = ShareCoordinatorShard()
    for key, value in shard.initialize(KEY, 0, 0, 1).records:
        shard.replay(key, value)
    shard.replay(*encode_pending(PendingAckRecord(KEY, 11, "m", ((0, AckType.ACCEPT),))), 0, 11)
    for key, value in shard.delete(KEY).records:
        shard.replay(key, value)
    assert len(shard.replay_marker(0, 11, committed=True)) == 1
    assert shard.get(KEY) is None
