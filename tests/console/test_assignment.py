"""A classic member's assignment bytes (Kafka's ConsumerProtocolAssignment) decoded for the groups page."""

from __future__ import annotations

import struct

from hypothesis import given
from hypothesis import strategies as st

from exactly.console.assignment import decode_assignment, encode_assignment

topics = st.dictionaries(
    st.text(st.characters(codec="utf-8", categories=("L", "N")), min_size=1, max_size=20),
    st.lists(st.integers(0, 2**31 - 1), max_size=8, unique=True),
    max_size=5,
)


@given(topics, st.integers(0, 3))
def test_round_trip(partitions: dict[str, list[int]], version: int) -> None:
    decoded = decode_assignment(encode_assignment(partitions, version))
    assert decoded == tuple(sorted((t, p) for t, ps in partitions.items() for p in ps))


def test_user_data_is_ignored() -> None:
    data = encode_assignment({"orders": [0, 2]})[:-4] + struct.pack(">i", 3) + b"abc"
    assert decode_assignment(data) == (("orders", 0), ("orders", 2))


def test_empty_bytes_are_no_assignment() -> None:
    assert decode_assignment(b"") == ()


@given(st.binary(max_size=64))
def test_other_bytes_are_refused_or_read_never_raise(data: bytes) -> None:
    decoded = decode_assignment(data)
    assert decoded is None or all(isinstance(t, str) and isinstance(p, int) for t, p in decoded)


def test_truncated_assignment_is_refused() -> None:
    data = encode_assignment({"orders": [0, 1, 2]})
    assert decode_assignment(data[:12]) is None
