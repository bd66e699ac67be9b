"""Batch decision records (key version 100 in `__transaction_state`) and the decisions table."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from exactly.errors import CorruptRecordError
from exactly.txn.decisions import (
    BatchDecisionRecord,
    Decisions,
    decode_decision_key,
    decode_decision_value,
    encode_decision_key,
    encode_decision_value,
)
from exactly.txn.records import decode_key, encode_key, key_version

_decisions = st.builds(
    BatchDecisionRecord,
    query_id=st.text(max_size=40),
    batch_id=st.integers(0, 2**63 - 1),
    winners=st.lists(st.text(max_size=30), max_size=6, unique=True).map(tuple),
    timestamp_ms=st.integers(-1, 2**62),
)


@given(_decisions)
def test_round_trip(decision: BatchDecisionRecord) -> None:
    key = encode_decision_key(decision.query_id, decision.batch_id)
    assert key_version(key) == 100
    assert decode_decision_key(key) == (decision.query_id, decision.batch_id)
    value = encode_decision_value(decision)
    assert decode_decision_value(decision.query_id, decision.batch_id, value) == decision


def test_layout_is_the_documented_one() -> None:
    key = encode_decision_key("q", 7)
    assert key == struct.pack(">hh", 100, 1) + b"q" + struct.pack(">q", 7)
    value = encode_decision_value(BatchDecisionRecord("q", 7, ("a", "bc"), 5))
    assert value == struct.pack(">hih", 0, 2, 1) + b"a" + struct.pack(">h", 2) + b"bc" + struct.pack(">q", 5)


def test_transactional_id_keys_and_decision_keys_are_told_apart() -> None:
    assert key_version(encode_key("app")) == 0
    with pytest.raises(CorruptRecordError):
        decode_key(encode_decision_key("q", 1))
    with pytest.raises(CorruptRecordError):
        decode_decision_key(encode_key("app"))
    with pytest.raises(CorruptRecordError):
        key_version(b"\x00")


@given(_decisions, st.data())
def test_truncated_or_extended_records_are_corrupt(
    decision: BatchDecisionRecord, data: st.DataObject
) -> None:
    key = encode_decision_key(decision.query_id, decision.batch_id)
    value = encode_decision_value(decision)
    cut = data.draw(st.integers(0, len(value) - 1))
    with pytest.raises(CorruptRecordError):
        decode_decision_value(decision.query_id, decision.batch_id, value[:cut])
    with pytest.raises(CorruptRecordError):
        decode_decision_value(decision.query_id, decision.batch_id, value + b"\x00")
    with pytest.raises(CorruptRecordError):
        decode_decision_key(key[: data.draw(st.integers(0, len(key) - 1))])
    with pytest.raises(CorruptRecordError):
        decode_decision_key(key + b"\x01")


@pytest.mark.parametrize(
    "raw",
    [None, b"", struct.pack(">h", 1) + bytes(12), struct.pack(">hi", 0, -1), struct.pack(">hi", 0, 2**30)],
)
def test_bad_values(raw: bytes | None) -> None:
    with pytest.raises(CorruptRecordError):
        decode_decision_value("q", 0, raw)


def test_decisions_table_keeps_the_first_and_tracks_the_high_watermark() -> None:
    table = Decisions()
    assert table.decided_hw("q") == -1
    table.add(BatchDecisionRecord("q", 3, ("a",), 1))
    table.add(BatchDecisionRecord("q", 1, ("b",), 2))
    table.add(BatchDecisionRecord("q", 3, ("other",), 3))  # decided once: ignored
    table.add(BatchDecisionRecord("p", 9, (), 4))
    assert table.decided_hw("q") == 3
    assert table.decided_hw("p") == 9
    first = table.get("q", 3)
    assert first is not None
    assert first.winners == ("a",)
    assert table.get("q", 2) is None
    assert [(d.query_id, d.batch_id) for d in table.all()] == [("p", 9), ("q", 1), ("q", 3)]
    assert len(table) == 3
