"""Record types 3-8 of `__consumer_offsets`: encode -> decode gives the record back, through the same
entry points the coordinator uses (`group.records`), and the bytes follow Kafka's layout."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st

from exactly.group.consumer.records import (
    ClassicProtocol,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    TopicMetadata,
    TopicPartitions,
)
from exactly.group.records import CoordinatorRecord, decode_record, encode_record

text = st.text(st.characters(exclude_categories=("Cs",)), max_size=10)
ids = st.builds(lambda n: uuid.UUID(int=n), st.integers(0, 2**128 - 1))
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
partitions = st.lists(st.integers(0, 2**31 - 1), max_size=5).map(tuple)


@st.composite
def topic_partitions(draw: st.DrawFn, epochs: bool) -> TopicPartitions:
    ps = draw(partitions)
    with_epochs = epochs and draw(st.booleans())
    return TopicPartitions(
        draw(ids),
        ps,
        tuple(draw(st.lists(int32, min_size=len(ps), max_size=len(ps)))) if with_epochs else None,
    )


def tps(epochs: bool = False) -> st.SearchStrategy[tuple[TopicPartitions, ...]]:
    return st.lists(topic_partitions(epochs), max_size=3).map(tuple)


records = st.one_of(
    st.builds(
        CoordinatorRecord,
        st.builds(ConsumerGroupMetadataKey, text),
        st.none() | st.builds(ConsumerGroupMetadataValue, int32, int64, int64),
    ),
    st.builds(
        CoordinatorRecord,
        st.builds(ConsumerGroupPartitionMetadataKey, text),
        st.none()
        | st.builds(
            ConsumerGroupPartitionMetadataValue,
            st.lists(st.builds(TopicMetadata, ids, text, int32), max_size=3).map(tuple),
        ),
    ),
    st.builds(
        CoordinatorRecord,
        st.builds(ConsumerGroupMemberMetadataKey, text, text),
        st.none()
        | st.builds(
            ConsumerGroupMemberMetadataValue,
            st.none() | text,
            st.none() | text,
            text,
            text,
            st.lists(text, max_size=3).map(tuple),
            st.none() | text,
            int32,
            st.none() | text,
            st.none()
            | st.lists(st.builds(ClassicProtocol, text, st.binary(max_size=8)), max_size=2).map(tuple),
        ),
    ),
    st.builds(
        CoordinatorRecord,
        st.builds(ConsumerGroupTargetAssignmentMetadataKey, text),
        st.none() | st.builds(ConsumerGroupTargetAssignmentMetadataValue, int32, int64),
    ),
    st.builds(
        CoordinatorRecord,
        st.builds(ConsumerGroupTargetAssignmentMemberKey, text, text),
        st.none() | st.builds(ConsumerGroupTargetAssignmentMemberValue, tps()),
    ),
    st.builds(
        CoordinatorRecord,
        st.builds(ConsumerGroupCurrentMemberAssignmentKey, text, text),
        st.none()
        | st.builds(
            ConsumerGroupCurrentMemberAssignmentValue,
            int32,
            int32,
            st.integers(-128, 127),
            tps(epochs=True),
            tps(epochs=True),
        ),
    ),
)


@given(records)
def test_every_consumer_record_round_trips(record: CoordinatorRecord) -> None:
    key, value = encode_record(record)
    assert decode_record(key, value) == record


def test_keys_are_the_record_type_then_non_flexible_strings() -> None:
    key, _ = encode_record(CoordinatorRecord(ConsumerGroupCurrentMemberAssignmentKey("g", "m"), None))
    assert key == b"\x00\x08" + b"\x00\x01g" + b"\x00\x01m"
    key, _ = encode_record(CoordinatorRecord(ConsumerGroupMetadataKey("grp"), None))
    assert key == b"\x00\x03\x00\x03grp"


def test_values_are_version_0_and_flexible() -> None:
    record = CoordinatorRecord(ConsumerGroupMetadataKey("g"), ConsumerGroupMetadataValue(7))
    _, value = encode_record(record)
    # version 0, epoch 7, no tagged fields (metadata hash 0 and creation time -1 are the defaults)
    assert value == b"\x00\x00" + b"\x00\x00\x00\x07" + b"\x00"
    record = CoordinatorRecord(ConsumerGroupMetadataKey("g"), ConsumerGroupMetadataValue(7, metadata_hash=1))
    _, value = encode_record(record)
    assert value == b"\x00\x00\x00\x00\x00\x07" + b"\x01" + b"\x00\x08" + (1).to_bytes(8, "big")
    topic = uuid.UUID(int=1)
    record = CoordinatorRecord(
        ConsumerGroupTargetAssignmentMemberKey("g", "m"),
        ConsumerGroupTargetAssignmentMemberValue((TopicPartitions(topic, (0, 2)),)),
    )
    _, value = encode_record(record)
    assert value == (
        b"\x00\x00"  # version
        + b"\x02"  # one topic (compact array: n + 1)
        + topic.bytes
        + b"\x03\x00\x00\x00\x00\x00\x00\x00\x02"  # partitions [0, 2]
        + b"\x00"  # the topic's tagged fields
        + b"\x00"  # the value's tagged fields
    )


def test_a_tombstone_has_no_value() -> None:
    assert encode_record(CoordinatorRecord(ConsumerGroupMemberMetadataKey("g", "m"), None))[1] is None
