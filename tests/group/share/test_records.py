"""`__share_group_state` records (Kafka's ShareSnapshotKey/Value) round trip, and the store replays them."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from exactly.errors import CorruptRecordError
from exactly.group.share.partition import RecordState, ShareState, StateBatch
from exactly.group.share.records import (
    SharePartitionKey,
    ShareStateStore,
    StoredShareState,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
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


def test_store_keeps_the_last_snapshot_and_forgets_tombstones() -> None:
    key = SharePartitionKey("g", uuid.UUID(int=1), 0)
    store = ShareStateStore()
    store.replay(encode_key(key), encode_value(StoredShareState(ShareState(5))))
    store.replay(encode_key(key), encode_value(StoredShareState(ShareState(9))))
    assert store.get(key) == StoredShareState(ShareState(9))
    store.replay(encode_key(key), None)
    assert store.get(key) is None
    with pytest.raises(CorruptRecordError):
        store.replay(b"\x00\x07", b"")
