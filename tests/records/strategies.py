"""Hypothesis strategies shared by the records tests."""

from __future__ import annotations

from hypothesis import strategies as st

from exactly.records.varint import INT64_MAX, INT64_MIN

nullable_bytes = st.one_of(st.none(), st.binary(max_size=64))
header_keys = st.one_of(
    st.text(max_size=12),
    # Arbitrary bytes round-trip through the surrogateescape decoding.
    st.binary(max_size=12).map(lambda b: b.decode("utf-8", "surrogateescape")),
)
headers = st.lists(st.tuples(header_keys, nullable_bytes), max_size=4).map(tuple)
timestamps = st.integers(0, 1 << 45)

#: (timestamp, key, value, headers) as passed to BatchBuilder.append
record_inputs = st.tuples(timestamps, nullable_bytes, nullable_bytes, headers)

deltas64 = st.integers(INT64_MIN // 2, INT64_MAX // 2)
