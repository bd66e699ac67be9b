from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from exactly.records import (
    ATTR_TIMESTAMP_TYPE,
    BatchBuilder,
    Compression,
    Record,
    RecordBatch,
    TimestampType,
    build_batch,
)

from .strategies import record_inputs

Inputs = list[tuple[int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]]


@pytest.mark.parametrize("compression", list(Compression), ids=lambda c: c.name.lower())
@settings(suppress_health_check=[HealthCheck.too_slow], max_examples=60)
@given(
    inputs=st.lists(record_inputs, min_size=1, max_size=20),
    base_offset=st.integers(0, 1 << 40),
    producer_id=st.integers(-1, 1 << 40),
    producer_epoch=st.integers(-1, 32767),
    base_sequence=st.integers(-1, 2**31 - 1),
    is_transactional=st.booleans(),
)
def test_builder_round_trip(
    compression: Compression,
    inputs: Inputs,
    base_offset: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    is_transactional: bool,
) -> None:
    builder = BatchBuilder(
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        is_transactional=is_transactional,
        compression=compression,
        partition_leader_epoch=9,
    )
    for timestamp, key, value, headers in inputs:
        builder.append(timestamp, key, value, headers)
    assert len(builder) == len(inputs)
    data = builder.build()
    batch = RecordBatch(data)
    batch.validate()
    assert batch.size_in_bytes == len(data)
    assert batch.compression == compression
    assert batch.base_offset == base_offset
    assert batch.records_count == len(inputs)
    assert batch.last_offset_delta == len(inputs) - 1
    assert batch.base_timestamp == inputs[0][0]
    assert batch.max_timestamp == max(t for t, *_ in inputs)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (
        producer_id,
        producer_epoch,
        base_sequence,
    )
    assert batch.is_transactional == is_transactional
    assert batch.partition_leader_epoch == 9
    assert not batch.is_control
    assert list(batch.records()) == [
        Record(base_offset + i, t, k, v, h) for i, (t, k, v, h) in enumerate(inputs)
    ]


def test_build_batch_convenience() -> None:
    data = build_batch(
        [(b"a", b"1"), (None, None)],
        base_offset=5,
        timestamp=77,
        compression=Compression.GZIP,
        producer_id=3,
        producer_epoch=1,
        base_sequence=0,
    )
    batch = RecordBatch(data)
    batch.validate(from_client=True)
    assert list(batch.records()) == [Record(5, 77, b"a", b"1"), Record(6, 77, None, None)]


def test_empty_builder_refuses_to_build() -> None:
    with pytest.raises(ValueError, match="without records"):
        BatchBuilder().build()


def test_log_append_time_builder() -> None:
    builder = BatchBuilder(timestamp_type=TimestampType.LOG_APPEND_TIME)
    builder.append(10, None, b"x")
    batch = RecordBatch(builder.build())
    assert batch.attributes == ATTR_TIMESTAMP_TYPE
    assert [r.timestamp for r in batch.records()] == [10]


def test_timestamps_out_of_order() -> None:
    builder = BatchBuilder()
    for ts in (100, 50, 300, 200):
        builder.append(ts, None, None)
    batch = RecordBatch(builder.build())
    assert (batch.base_timestamp, batch.max_timestamp) == (100, 300)
    assert [r.timestamp for r in batch.records()] == [100, 50, 300, 200]


def test_defaults_are_no_producer() -> None:
    batch = RecordBatch(build_batch([(None, b"v")]))
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (-1, -1, -1)
    assert batch.attributes == 0
    assert batch.partition_leader_epoch == 0
    batch.validate(from_client=True)


def test_size_estimate_grows() -> None:
    builder = BatchBuilder()
    assert builder.size_estimate == 61
    builder.append(0, None, b"x" * 100)
    assert builder.size_estimate > 161
