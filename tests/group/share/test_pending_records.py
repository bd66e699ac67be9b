"""Pending-ack records of `__share_group_state` (exactly's type 100) round trip, and the store decides them
by the markers that follow them in the log."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from exactly.errors import CorruptRecordError
from exactly.group.share.partition import AckType, RecordState, ShareState, StateBatch
from exactly.group.share.records import (
    PendingAckRecord,
    SharePartitionKey,
    ShareStateStore,
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


def test_the_store_applies_committed_acks_and_drops_aborted_ones() -> None:
    store = ShareStateStore()
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
