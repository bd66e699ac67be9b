"""`__transaction_state` records: Kafka's byte layouts (built by hand from TransactionLogKey/Value.json),
round trips, and "decodes or raises CorruptRecordError"."""

from __future__ import annotations

import contextlib
import dataclasses
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from exactly.errors import CorruptRecordError
from exactly.txn.records import (
    PREPARED_TAG,
    PreparedTag,
    TransactionLogValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from exactly.txn.state import TxnState


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def test_key_bytes() -> None:
    assert encode_key("app-1") == b"\x00\x00" + b"\x00\x05app-1"
    assert decode_key(b"\x00\x00\x00\x05app-1") == "app-1"


def test_value_v0_bytes() -> None:
    value = TransactionLogValue(
        producer_id=42,
        producer_epoch=7,
        transaction_timeout_ms=60_000,
        state=TxnState.PREPARE_COMMIT,
        partitions=frozenset({("b", 0), ("a", 2), ("a", 1)}),
        last_update_timestamp_ms=1_700_000_000_123,
        start_timestamp_ms=1_700_000_000_000,
    )
    expected = (
        struct.pack(">hqhib", 0, 42, 7, 60_000, 2)
        + struct.pack(">i", 2)  # two topics, sorted by name, partitions sorted
        + _string("a")
        + struct.pack(">iii", 2, 1, 2)
        + _string("b")
        + struct.pack(">ii", 1, 0)
        + struct.pack(">qq", 1_700_000_000_123, 1_700_000_000_000)
    )
    assert encode_value(value) == expected
    assert decode_value(expected) == value


def test_empty_state_has_null_partitions() -> None:
    value = TransactionLogValue(5, 0, 1000, TxnState.EMPTY, frozenset(), 10, -1)
    encoded = encode_value(value)
    assert encoded == struct.pack(">hqhib", 0, 5, 0, 1000, 0) + struct.pack(">i", -1) + struct.pack(
        ">qq", 10, -1
    )
    assert decode_value(encoded) == value


def test_complete_state_has_an_empty_array() -> None:
    value = TransactionLogValue(5, 0, 1000, TxnState.COMPLETE_ABORT, frozenset(), 10, 5)
    encoded = encode_value(value)
    assert encoded is not None
    assert encoded[17:21] == struct.pack(">i", 0)


def test_tombstone() -> None:
    assert encode_value(None) is None
    assert decode_value(None) is None


@pytest.mark.parametrize("state", [TxnState.DEAD, TxnState.PREPARE_EPOCH_FENCE])
def test_states_that_are_never_stored(state: TxnState) -> None:
    with pytest.raises(ValueError, match="never stored"):
        encode_value(TransactionLogValue(1, 0, 1, state, frozenset(), 0, 0))
    raw = struct.pack(">hqhib", 0, 1, 0, 1, state.value) + struct.pack(">i", -1) + struct.pack(">qq", 0, 0)
    with pytest.raises(CorruptRecordError, match=state.kafka_name):
        decode_value(raw)


def test_value_v1_with_tagged_fields() -> None:
    """Kafka 4's flexible value: compact strings/arrays and tagged fields; an unknown tag survives."""
    raw = (
        struct.pack(">hqhib", 1, 9, 3, 5000, 1)
        + bytes([2])  # compact array: 1 topic
        + bytes([2])
        + b"t"  # compact string "t"
        + bytes([3])
        + struct.pack(">ii", 0, 4)  # compact array of 2 partitions
        + bytes([0])  # the topic entry's tagged fields
        + struct.pack(">qq", 200, 100)
        + bytes([4])  # four tagged fields
        + bytes([0, 8])
        + struct.pack(">q", 8)
        + bytes([1, 8])
        + struct.pack(">q", 10)
        + bytes([2, 2])
        + struct.pack(">h", 2)
        + bytes([9, 3])
        + b"xyz"
    )
    value = decode_value(raw)
    assert value == TransactionLogValue(
        9, 3, 5000, TxnState.ONGOING, frozenset({("t", 0), ("t", 4)}), 200, 100, 8, 10, 2
    )
    assert value is not None
    assert value.unknown_tags == ((9, b"xyz"),)
    assert encode_value(value, version=1) == raw


_tags = st.builds(
    PreparedTag,
    query_id=st.text(max_size=20),
    batch_id=st.integers(0, 2**62),
    partition=st.integers(0, 2**31 - 1),
    prepared_timestamp_ms=st.integers(-1, 2**62),
)


def _with_tag(value: TransactionLogValue, tag: PreparedTag | None) -> TransactionLogValue:
    """A Prepared value carries its tag; PrepareCommit/PrepareAbort may (a prepared transaction's); no
    other state does."""
    if value.state is TxnState.PREPARED:
        return dataclasses.replace(value, prepared=tag or PreparedTag("q", 0, 0, 1))
    return dataclasses.replace(value, prepared=tag if value.state.is_prepare else None)


_untagged_values = st.builds(
    TransactionLogValue,
    producer_id=st.integers(-1, 2**63 - 1),
    producer_epoch=st.integers(-1, 2**15 - 1),
    transaction_timeout_ms=st.integers(1, 2**31 - 1),
    state=st.sampled_from([s for s in TxnState if s not in (TxnState.DEAD, TxnState.PREPARE_EPOCH_FENCE)]),
    partitions=st.frozensets(
        st.tuples(st.text(min_size=1, max_size=20), st.integers(0, 2**31 - 1)), max_size=8
    ),
    last_update_timestamp_ms=st.integers(-1, 2**62),
    start_timestamp_ms=st.integers(-1, 2**62),
    previous_producer_id=st.integers(-1, 2**62),
    next_producer_id=st.integers(-1, 2**62),
    client_transaction_version=st.integers(0, 2),
)
_values = st.builds(_with_tag, _untagged_values, st.none() | _tags)


@given(_values)
def test_round_trip_v1(value: TransactionLogValue) -> None:
    assert decode_value(encode_value(value, version=1)) == value


@given(_values)
def test_round_trip_v0_keeps_the_v0_fields(value: TransactionLogValue) -> None:
    decoded = decode_value(encode_value(value))
    assert decoded is not None
    assert (decoded.producer_id, decoded.producer_epoch, decoded.transaction_timeout_ms, decoded.state) == (
        value.producer_id,
        value.producer_epoch,
        value.transaction_timeout_ms,
        value.state,
    )
    assert decoded.partitions == value.partitions
    assert (decoded.last_update_timestamp_ms, decoded.start_timestamp_ms) == (
        value.last_update_timestamp_ms,
        value.start_timestamp_ms,
    )


@given(st.text(max_size=50))
def test_key_round_trip(transactional_id: str) -> None:
    assert decode_key(encode_key(transactional_id)) == transactional_id


@given(st.binary(max_size=200))
def test_arbitrary_bytes_decode_or_raise_our_error(raw: bytes) -> None:
    for decode in (decode_key, decode_value):
        with contextlib.suppress(CorruptRecordError):
            decode(raw)


@given(_values, st.data())
def test_damaged_values_decode_or_raise_our_error(value: TransactionLogValue, data: st.DataObject) -> None:
    raw = bytearray(encode_value(value, version=data.draw(st.sampled_from([0, 1]))) or b"")
    cut = data.draw(st.integers(0, len(raw) - 1))
    with pytest.raises(CorruptRecordError):
        decode_value(bytes(raw[:cut]))  # every strict prefix is truncated
    position = data.draw(st.integers(0, len(raw) - 1))
    raw[position] ^= data.draw(st.integers(1, 255))
    with contextlib.suppress(CorruptRecordError):
        decode_value(bytes(raw))


# --- more golden bytes and rejections ---------------------------------------------------------------------


def test_key_bytes_built_with_struct() -> None:
    transactional_id = "pipeline-é"  # non-ASCII: the length is in UTF-8 bytes
    data = transactional_id.encode()
    expected = struct.pack(">hh", 0, len(data)) + data
    assert encode_key(transactional_id) == expected
    assert decode_key(expected) == transactional_id


@pytest.mark.parametrize(
    "raw",
    [
        struct.pack(">hh", 1, 1) + b"a",  # unknown key version
        struct.pack(">hh", 0, 1) + b"ab",  # trailing bytes
        struct.pack(">hh", 0, 5) + b"ab",  # truncated
        struct.pack(">hh", 0, -1),  # null transactional id
        struct.pack(">hh", 0, 1) + b"\xff",  # not UTF-8
        b"",
    ],
)
def test_bad_keys(raw: bytes) -> None:
    with pytest.raises(CorruptRecordError):
        decode_key(raw)


def test_value_v0_ongoing_bytes() -> None:
    value = TransactionLogValue(
        producer_id=2**40 + 3,
        producer_epoch=32766,
        transaction_timeout_ms=900_000,
        state=TxnState.ONGOING,
        partitions=frozenset({("__consumer_offsets", 49), ("orders", 0)}),
        last_update_timestamp_ms=5,
        start_timestamp_ms=4,
    )
    expected = b"".join(
        [
            struct.pack(">h", 0),
            struct.pack(">q", 2**40 + 3),
            struct.pack(">h", 32766),
            struct.pack(">i", 900_000),
            struct.pack(">b", 1),
            struct.pack(">i", 2),
            struct.pack(">h", 18) + b"__consumer_offsets",
            struct.pack(">i", 1) + struct.pack(">i", 49),
            struct.pack(">h", 6) + b"orders",
            struct.pack(">i", 1) + struct.pack(">i", 0),
            struct.pack(">q", 5),
            struct.pack(">q", 4),
        ]
    )
    assert encode_value(value) == expected
    assert decode_value(expected) == value


def test_value_v1_empty_is_a_null_compact_array_and_no_tags() -> None:
    value = TransactionLogValue(5, 0, 1000, TxnState.EMPTY, frozenset(), 10, -1)
    expected = struct.pack(">hqhib", 1, 5, 0, 1000, 0) + b"\x00" + struct.pack(">qq", 10, -1) + b"\x00"
    assert encode_value(value, version=1) == expected
    assert decode_value(expected) == value


def test_value_v1_defaults_are_not_written_as_tags() -> None:
    value = TransactionLogValue(5, 1, 1000, TxnState.COMPLETE_COMMIT, frozenset(), 10, 9)
    encoded = encode_value(value, version=1)
    assert encoded is not None
    assert encoded.endswith(struct.pack(">qq", 10, 9) + b"\x00")  # zero tagged fields
    assert encoded[17:18] == b"\x01"  # an empty (not null) compact array


def test_empty_with_partitions_keeps_them() -> None:
    """Kafka never writes this (Empty has no partitions); exactly keeps the data rather than losing it."""
    value = TransactionLogValue(5, 0, 1000, TxnState.EMPTY, frozenset({("t", 0)}), 10, -1)
    assert decode_value(encode_value(value)) == value


def test_v0_null_partitions_decode_as_none_for_any_state() -> None:
    raw = struct.pack(">hqhib", 0, 5, 0, 1000, 4) + struct.pack(">i", -1) + struct.pack(">qq", 10, 9)
    decoded = decode_value(raw)
    assert decoded is not None
    assert (decoded.state, decoded.partitions) == (TxnState.COMPLETE_COMMIT, frozenset())


def test_known_tag_with_an_unexpected_size_is_kept_as_unknown() -> None:
    raw = (
        struct.pack(">hqhib", 1, 9, 3, 5000, 0)
        + b"\x00"
        + struct.pack(">qq", 200, -1)
        + bytes([1, 0, 4])  # one tagged field: tag 0 (previous producer id) with 4 bytes, not 8
        + struct.pack(">i", 7)
    )
    value = decode_value(raw)
    assert value is not None
    assert value.previous_producer_id == -1
    assert value.unknown_tags == ((0, struct.pack(">i", 7)),)
    assert encode_value(value, version=1) == raw


def test_partition_entry_tags_are_skipped() -> None:
    raw = (
        struct.pack(">hqhib", 1, 9, 3, 5000, 1)
        + bytes([2, 2])
        + b"t"
        + bytes([2])
        + struct.pack(">i", 3)
        + bytes([1, 5, 2])  # the entry has one tagged field (tag 5, 2 bytes)
        + b"zz"
        + struct.pack(">qq", 200, 100)
        + b"\x00"
    )
    value = decode_value(raw)
    assert value is not None
    assert value.partitions == frozenset({("t", 3)})


def _v0(version: int = 0, status: int = 0, tail: bytes = b"") -> bytes:
    return (
        struct.pack(">hqhib", version, 5, 0, 1000, status)
        + struct.pack(">i", -1)
        + struct.pack(">qq", 10, -1)
        + tail
    )


@pytest.mark.parametrize(
    "raw",
    [
        _v0(version=2),
        _v0(version=-1),
        _v0(status=8),
        _v0(status=-1),
        _v0(tail=b"\x00"),  # trailing bytes
        struct.pack(">hqhib", 1, 5, 0, 1000, 0) + b"\x00" + struct.pack(">qq", 10, -1),  # v1 without tags
        struct.pack(">hqhib", 0, 5, 0, 1000, 1) + struct.pack(">i", 1) + struct.pack(">h", -1),  # null topic
        struct.pack(">hqhib", 0, 5, 0, 1000, 1) + struct.pack(">i", 1000),  # more topics than bytes
        b"",
    ],
)
def test_bad_values(raw: bytes) -> None:
    with pytest.raises(CorruptRecordError):
        decode_value(raw)


_unknown_tags = st.dictionaries(
    st.integers(4, 2**31 - 1).filter(lambda tag: tag != PREPARED_TAG), st.binary(max_size=20), max_size=4
).map(lambda tags: tuple(sorted(tags.items())))


@given(_values, _unknown_tags)
def test_round_trip_v1_keeps_unknown_tags(
    value: TransactionLogValue, unknown: tuple[tuple[int, bytes], ...]
) -> None:
    value = dataclasses.replace(value, unknown_tags=unknown)
    decoded = decode_value(encode_value(value, version=1))
    assert decoded == value
    assert decoded is not None
    assert decoded.unknown_tags == unknown


@given(_values)
def test_round_trip_v0_is_exact_without_tagged_fields(value: TransactionLogValue) -> None:
    value = dataclasses.replace(
        value, previous_producer_id=-1, next_producer_id=-1, client_transaction_version=0
    )
    encoded = encode_value(value)
    assert decode_value(encoded) == value
    assert encode_value(decode_value(encoded)) == encoded  # canonical: re-encoding gives the same bytes


@given(_values, st.data())
def test_v1_trailing_bytes_raise(value: TransactionLogValue, data: st.DataObject) -> None:
    raw = encode_value(value, version=1)
    assert raw is not None
    with pytest.raises(CorruptRecordError):
        decode_value(raw + data.draw(st.binary(min_size=1, max_size=8)))  # trailing bytes


def test_prepared_is_stored_as_ongoing_with_the_prepared_tag() -> None:
    tag = PreparedTag("query-1", 7, 3, 1234)
    value = TransactionLogValue(
        5, 2, 60_000, TxnState.PREPARED, frozenset({("out", 3)}), 1234, 1000, prepared=tag
    )
    raw = encode_value(value)  # asked for v0: the tag needs v1
    assert raw is not None
    assert raw[:2] == b"\x00\x01"  # version 1
    assert raw[2 + 8 + 2 + 4] == TxnState.ONGOING.value  # what Kafka's reader sees: Ongoing
    decoded = decode_value(raw)
    assert decoded == value
    assert decoded is not None
    assert decoded.prepared == tag
    # A reader without the extension skips the tag: Ongoing, same partitions.
    assert decoded.partitions == frozenset({("out", 3)})


def test_prepared_tag_on_a_complete_transaction_is_corrupt() -> None:
    value = TransactionLogValue(
        5, 2, 60_000, TxnState.PREPARE_COMMIT, frozenset(), 1, 1, prepared=PreparedTag("q", 1, 0, 1)
    )
    raw = bytearray(encode_value(value) or b"")
    raw[2 + 8 + 2 + 4] = TxnState.COMPLETE_COMMIT.value
    with pytest.raises(CorruptRecordError, match="prepared tag"):
        decode_value(bytes(raw))


def test_a_prepared_value_needs_its_tag() -> None:
    with pytest.raises(ValueError, match="prepared tag"):
        encode_value(TransactionLogValue(5, 2, 60_000, TxnState.PREPARED, frozenset(), 1, 1))
