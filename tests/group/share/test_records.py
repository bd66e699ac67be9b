"""`__share_group_state` records (Kafka's ShareSnapshot and ShareUpdate keys and values) round trip; an
update's batches merge into a snapshot's; the delta a persister sends merges back into the whole state."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from exactly.errors import CorruptRecordError
from exactly.group.share.partition import RecordState, ShareState, StateBatch
from exactly.group.share.records import (
    UPDATE,
    SharePartitionKey,
    ShareUpdate,
    StoredShareState,
    decode_key,
    decode_update,
    decode_value,
    encode_key,
    encode_update,
    encode_value,
    merge_batches,
    state_delta,
)

keys = st.builds(SharePartitionKey, st.text(max_size=40), st.uuids(), st.integers(0, 2**31 - 1))
batches = st.builds(
    StateBatch,
    st.integers(0, 2**62),
    st.integers(0, 2**62),
    st.sampled_from([RecordState.AVAILABLE, RecordState.ACKNOWLEDGED, RecordState.ARCHIVED]),
    st.integers(0, 2**15 - 1),
)
values = st.builds(
    StoredShareState,
    st.builds(ShareState, st.integers(-1, 2**62), st.lists(batches, max_size=20).map(tuple)),
    st.integers(0, 2**16 - 1),
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-1, 2**62),
    st.integers(-1, 2**62),
)


@given(keys, values)
def test_round_trip(key: SharePartitionKey, value: StoredShareState) -> None:
    assert decode_key(encode_key(key)) == (0, key)
    assert decode_value(encode_value(value)) == value


def test_layout_is_kafkas() -> None:
    key = SharePartitionKey("g", uuid.UUID(int=1), 3)
    assert encode_key(key) == b"\x00\x00" + b"\x00\x01g" + (1).to_bytes(16, "big") + b"\x00\x00\x00\x03"
    value = StoredShareState(ShareState(7, (StateBatch(7, 9, RecordState.ARCHIVED, 2),)), 1, 0, 5, 10, 11)
    raw = encode_value(value)
    assert raw[:2] == b"\x00\x00"  # value version 0
    assert raw[2:4] == b"\x00\x01"  # snapshot epoch (uint16)
    assert raw[-2:] == b"\x00\x00"  # the batch's and the value's empty tagged fields


updates = st.builds(
    ShareUpdate,
    st.integers(0, 2**16 - 1),
    st.integers(-1, 2**31 - 1),
    st.integers(-1, 2**62),
    st.lists(batches, max_size=20).map(tuple),
)


@given(keys, updates)
def test_update_round_trip(key: SharePartitionKey, update: ShareUpdate) -> None:
    assert decode_key(encode_key(key, UPDATE)) == (UPDATE, key)
    assert decode_update(encode_update(update)) == update


def test_update_layout_is_kafkas() -> None:
    update = ShareUpdate(3, 7, -1, (StateBatch(4, 5, RecordState.ACKNOWLEDGED, 1),))
    raw = encode_update(update)
    assert raw[:2] == b"\x00\x00"  # value version 0
    assert raw[2:4] == b"\x00\x03"  # snapshot epoch (uint16)
    assert raw[4:8] == b"\x00\x00\x00\x07"  # leader epoch
    assert raw[8:16] == b"\xff" * 8  # start offset -1: unchanged
    assert raw[16] == 2  # one batch (compact array)
    assert encode_key(SharePartitionKey("g", uuid.UUID(int=1), 3), UPDATE)[:2] == b"\x00\x01"


def test_bad_records_are_refused() -> None:
    with pytest.raises(CorruptRecordError):
        decode_key(b"\x00\x07")
    with pytest.raises(CorruptRecordError):
        decode_update(b"\x00\x00\x01")


A, K, R = RecordState.AVAILABLE, RecordState.ACKNOWLEDGED, RecordState.ARCHIVED


def _offsets(batches: tuple[StateBatch, ...]) -> dict[int, tuple[RecordState, int]]:
    return {o: (b.state, b.delivery_count) for b in batches for o in range(b.first_offset, b.last_offset + 1)}


def test_merge_replaces_covered_offsets_and_drops_below_the_start() -> None:
    old = (StateBatch(10, 19, A, 1),)
    new = (StateBatch(12, 13, K, 1), StateBatch(20, 21, A, 2))
    assert merge_batches(old, new, 11) == (
        StateBatch(11, 11, A, 1),
        StateBatch(12, 13, K, 1),
        StateBatch(14, 19, A, 1),
        StateBatch(20, 21, A, 2),
    )
    # neighbours of one state and count join
    assert merge_batches((StateBatch(0, 4, A, 1),), (StateBatch(5, 9, A, 1),), 0) == (StateBatch(0, 9, A, 1),)


cells = st.tuples(st.sampled_from([A, K, R]), st.integers(0, 3))


@st.composite
def windows(draw: st.DrawFn) -> tuple[ShareState, ShareState]:
    """A stored window and a later one: the front may have moved, offsets changed, the end grown."""
    start = draw(st.integers(0, 20))
    before = draw(st.lists(cells, max_size=15))
    moved = draw(st.integers(0, len(before)))
    after = [draw(cells) if draw(st.booleans()) else c for c in before[moved:]]
    after += draw(st.lists(cells, max_size=10))

    def state(first: int, window: list[tuple[RecordState, int]]) -> ShareState:
        return ShareState(
            first, tuple(StateBatch(first + i, first + i, s, c) for i, (s, c) in enumerate(window))
        )

    return state(start, before), state(start + moved, after)


@given(windows())
def test_a_delta_merged_into_the_stored_state_is_the_new_state(pair: tuple[ShareState, ShareState]) -> None:
    previous, current = pair
    delta = state_delta(previous, current)
    merged = merge_batches(previous.batches, delta, current.start_offset)
    assert _offsets(merged) == _offsets(current.batches)
    assert len(_offsets(delta)) <= len(_offsets(current.batches))
