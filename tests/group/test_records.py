"""`__consumer_offsets` records: Kafka's byte layouts (built here by hand from the JSON specs),
round trips, and the partitioning formula."""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from exactly.errors import CorruptRecordError
from exactly.group.partitioning import java_string_hash, partition_for
from exactly.group.records import (
    CoordinatorRecord,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    UnknownRecordError,
    build_batch,
    decode_key,
    decode_record,
    decode_value,
    encode_key,
    encode_value,
    read_batch,
)
from exactly.records.batch import RecordBatch


def s(text: str | None) -> bytes:
    if text is None:
        return struct.pack(">h", -1)
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def b(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


def test_offset_commit_key_v1() -> None:
    key = OffsetCommitKey("grp", "topic", 7)
    expected = struct.pack(">h", 1) + s("grp") + s("topic") + struct.pack(">i", 7)
    assert encode_key(key) == expected
    assert decode_key(expected) == key
    v0 = struct.pack(">h", 0) + s("grp") + s("topic") + struct.pack(">i", 7)
    assert decode_key(v0) == key  # v0 has the same layout


def test_group_metadata_key_v2() -> None:
    expected = struct.pack(">h", 2) + s("grp")
    assert encode_key(GroupMetadataKey("grp")) == expected
    assert decode_key(expected) == GroupMetadataKey("grp")


def test_offset_commit_value_v3_and_v1() -> None:
    value = OffsetCommitValue(1234, 5, "meta", 1_700_000_000_000)
    expected = struct.pack(">hqi", 3, 1234, 5) + s("meta") + struct.pack(">q", 1_700_000_000_000)
    key = OffsetCommitKey("g", "t", 0)
    assert encode_value(value) == expected
    assert decode_value(key, expected) == value
    with_expiry = OffsetCommitValue(1234, -1, "", 10, 99)
    v1 = struct.pack(">hq", 1, 1234) + s("") + struct.pack(">qq", 10, 99)
    assert encode_value(with_expiry) == v1
    assert decode_value(key, v1) == with_expiry
    v0 = struct.pack(">hq", 0, 1234) + s("m") + struct.pack(">q", 10)
    assert decode_value(key, v0) == OffsetCommitValue(1234, -1, "m", 10, -1)
    v2 = struct.pack(">hq", 2, 1234) + s("m") + struct.pack(">q", 10)
    assert decode_value(key, v2) == OffsetCommitValue(1234, -1, "m", 10, -1)


def test_group_metadata_value_v3() -> None:
    member = MemberMetadata("m-1", "inst", "client", "/10.0.0.1", 30000, 10000, b"\x00sub", b"\x00asg")
    value = GroupMetadataValue("consumer", 4, "range", "m-1", 1_700_000_000_000, (member,))
    expected = (
        struct.pack(">h", 3)
        + s("consumer")
        + struct.pack(">i", 4)
        + s("range")
        + s("m-1")
        + struct.pack(">q", 1_700_000_000_000)
        + struct.pack(">i", 1)
        + s("m-1")
        + s("inst")
        + s("client")
        + s("/10.0.0.1")
        + struct.pack(">ii", 30000, 10000)
        + b(b"\x00sub")
        + b(b"\x00asg")
    )
    assert encode_value(value) == expected
    assert decode_value(GroupMetadataKey("g"), expected) == value
    empty = GroupMetadataValue("consumer", 5, None, None, 1, ())
    raw = struct.pack(">h", 3) + s("consumer") + struct.pack(">i", 5) + s(None) + s(None)
    raw += struct.pack(">qi", 1, 0)
    assert encode_value(empty) == raw
    assert decode_value(GroupMetadataKey("g"), raw) == empty


def test_group_metadata_value_older_versions() -> None:
    v0 = (
        struct.pack(">h", 0)
        + s("consumer")
        + struct.pack(">i", 1)
        + s("range")
        + s("m")
        + struct.pack(">i", 1)
        + s("m")
        + s("c")
        + s("h")
        + struct.pack(">i", 6000)
        + b(b"S")
        + b(b"A")
    )
    decoded = decode_value(GroupMetadataKey("g"), v0)
    assert decoded == GroupMetadataValue(
        "consumer", 1, "range", "m", -1, (MemberMetadata("m", None, "c", "h", -1, 6000, b"S", b"A"),)
    )


def test_tombstones_and_bad_input() -> None:
    assert encode_value(None) is None
    assert decode_record(encode_key(GroupMetadataKey("g")), None) == CoordinatorRecord(
        GroupMetadataKey("g"), None
    )
    with pytest.raises(UnknownRecordError):
        decode_key(struct.pack(">h", 11) + s("share-group-record"))
    with pytest.raises(CorruptRecordError):
        decode_key(struct.pack(">h", 1) + s("g"))  # truncated
    with pytest.raises(CorruptRecordError):
        decode_value(OffsetCommitKey("g", "t", 0), struct.pack(">hq", 3, 1) + b"\x00")
    with pytest.raises(CorruptRecordError):
        decode_value(OffsetCommitKey("g", "t", 0), encode_value(OffsetCommitValue(1)) + b"extra")  # type: ignore[operator]
    with pytest.raises(TypeError):
        CoordinatorRecord(GroupMetadataKey("g"), OffsetCommitValue(1))


names = st.text(max_size=30)
members = st.builds(
    MemberMetadata,
    names,
    st.none() | names,
    names,
    names,
    st.integers(-1, 2**31 - 1),
    st.integers(0, 2**31 - 1),
    st.binary(max_size=50),
    st.binary(max_size=50),
)
records = st.one_of(
    st.builds(
        CoordinatorRecord,
        st.builds(OffsetCommitKey, names, names, st.integers(0, 2**31 - 1)),
        st.none()
        | st.builds(
            OffsetCommitValue,
            st.integers(-1, 2**63 - 1),
            st.integers(-1, 2**31 - 1),
            names,
            st.integers(-1, 2**63 - 1),
            st.just(-1),
        ),
    ),
    st.builds(
        CoordinatorRecord,
        st.builds(GroupMetadataKey, names),
        st.none()
        | st.builds(
            GroupMetadataValue,
            names,
            st.integers(0, 2**31 - 1),
            st.none() | names,
            st.none() | names,
            st.integers(-1, 2**63 - 1),
            st.lists(members, max_size=4).map(tuple),
        ),
    ),
)


@given(st.lists(records, min_size=1, max_size=8))
def test_batches_round_trip(recs: list[CoordinatorRecord]) -> None:
    batch = build_batch(recs, 1_700_000_000_000)
    got = list(read_batch(RecordBatch(batch)))
    assert [offset for offset, _ in got] == list(range(len(recs)))
    assert [r for _, r in got] == recs


@given(st.binary(max_size=64), st.none() | st.binary(max_size=64))
def test_decoding_either_succeeds_or_raises_our_errors(key: bytes, value: bytes | None) -> None:
    with contextlib.suppress(CorruptRecordError, UnknownRecordError):
        decode_record(key, value)


def test_java_string_hash_and_partitions() -> None:
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("\U0001f600") == 0xD83D * 31 + 0xDE00  # UTF-16 surrogate pair
    assert java_string_hash("polygenelubricants") == -(2**31)  # Integer.MIN_VALUE
    assert partition_for("polygenelubricants", 50) == 0  # Utils.abs(MIN_VALUE) == 0
    assert partition_for("hello", 50) == 99162322 % 50
    negative = next(k for k in (f"consumer-group-{i}" for i in range(1000)) if java_string_hash(k) < 0)
    assert partition_for(negative, 50) == abs(java_string_hash(negative)) % 50
