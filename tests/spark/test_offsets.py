"""Offsets of the Spark source: Spark's Kafka JSON form, rate limiting, input ranges (no Spark needed)."""

from __future__ import annotations

import json

import pytest

from exactly.spark.offsets import (
    OffsetJsonError,
    OffsetRange,
    TopicPartition,
    from_spark_json,
    offset_ranges,
    parse_assignment_json,
    parse_offsets_json,
    rate_limit,
    to_spark_json,
)

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def test_spark_json_is_sorted_and_round_trips() -> None:
    offsets = {TopicPartition("b", 10): 5, TopicPartition("b", 2): 7, A0: 1}
    document = to_spark_json(offsets)
    # Spark compares offsets as JSON text: topics sorted, partitions in numeric order
    assert json.dumps(document) == '{"a": {"0": 1}, "b": {"2": 7, "10": 5}}'
    assert from_spark_json(json.loads(json.dumps(document))) == offsets


def test_parse_offsets_json_accepts_earliest_and_latest_markers() -> None:
    assert parse_offsets_json('{"a":{"0":23,"1":-2},"b":{"0":-1}}', option="startingOffsets") == {
        A0: 23,
        A1: -2,
        B0: -1,
    }


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": {"0": 1', "startingOffsets: not valid JSON"),
        ("[1]", "expected a JSON object"),
        ('{"a": [0]}', "topic 'a' must map partitions to offsets"),
        ('{"a": {"x": 1}}', "partition 'x' of topic 'a' is not a number"),
        ('{"a": {"-1": 1}}', "partition '-1' of topic 'a' is negative"),
        ('{"a": {"0": -3}}', "offset of a-0 must be an integer >= -2"),
        ('{"a": {"0": "5"}}', "offset of a-0 must be an integer >= -2"),
        ('{"a": {"0": true}}', "offset of a-0 must be an integer >= -2"),
    ],
)
def test_parse_offsets_json_errors_are_one_line(text: str, expected: str) -> None:
    with pytest.raises(OffsetJsonError) as info:
        parse_offsets_json(text, option="startingOffsets")
    assert expected in str(info.value)
    assert "\n" not in str(info.value)


def test_parse_assignment_json() -> None:
    assert parse_assignment_json('{"b":[0],"a":[1,0,1]}') == (A0, A1, B0)
    for bad in ("{}", '{"a": 0}', '{"a": [-1]}', '{"a": ["0"]}', "nope"):
        with pytest.raises(OffsetJsonError, match=r"^assign: "):
            parse_assignment_json(bad)


def test_rate_limit_splits_in_proportion_to_backlog() -> None:
    # backlog 40 and 20 (60 in all), limit 30: 20 and 10
    assert rate_limit(30, {A0: 0, A1: 100}, {A0: 40, A1: 120}) == {A0: 20, A1: 110}
    # a partition without backlog keeps its end
    assert rate_limit(10, {A0: 5, A1: 7}, {A0: 25, A1: 7}) == {A0: 15, A1: 7}
    # nothing to read: the target as it is
    assert rate_limit(10, {A0: 5}, {A0: 5}) == {A0: 5}


def test_rate_limit_does_not_starve_small_partitions_nor_overshoot() -> None:
    # backlog 1000 and 1, limit 10: the small one still gets its one offset (ceil of 0.00999)
    assert rate_limit(10, {A0: 0, A1: 0}, {A0: 1000, A1: 1}) == {A0: 9, A1: 1}
    # a limit larger than the backlog never passes the target
    assert rate_limit(1000, {A0: 0, A1: 0}, {A0: 3, A1: 4}) == {A0: 3, A1: 4}


def test_rate_limit_counts_a_new_partition_from_the_start_it_is_given() -> None:
    assert rate_limit(10, {A0: 0, B0: 0}, {A0: 10, B0: 10}) == {A0: 5, B0: 5}


def test_offset_ranges_sorted_and_skip_empty() -> None:
    start = {B0: 3, A1: 5, A0: 0}
    end = {B0: 3, A1: 9, A0: 2}
    assert offset_ranges(start, end) == [OffsetRange("a", 0, 0, 2), OffsetRange("a", 1, 5, 9)]
    assert offset_ranges(end, end) == []


def test_offset_ranges_new_partition_starts_at_zero() -> None:
    assert offset_ranges({A0: 4}, {A0: 4, A1: 6}) == [OffsetRange("a", 1, 0, 6)]


def test_offset_ranges_split_for_min_partitions() -> None:
    ranges = offset_ranges({A0: 0, A1: 0}, {A0: 90, A1: 10}, min_partitions=5)
    # 90 of 100 offsets -> round(4.5) = 5 pieces (Spark rounds half up), 10 -> round(0.5) = 1 piece
    assert ranges == [
        OffsetRange("a", 0, 0, 18),
        OffsetRange("a", 0, 18, 36),
        OffsetRange("a", 0, 36, 54),
        OffsetRange("a", 0, 54, 72),
        OffsetRange("a", 0, 72, 90),
        OffsetRange("a", 1, 0, 10),
    ]
    ranges = offset_ranges({A0: 0}, {A0: 10}, min_partitions=3)
    assert [(r.from_offset, r.until_offset) for r in ranges] == [(0, 3), (3, 6), (6, 10)]
    # enough ranges already: unchanged
    assert offset_ranges({A0: 0, A1: 0}, {A0: 90, A1: 10}, min_partitions=2) == [
        OffsetRange("a", 0, 0, 90),
        OffsetRange("a", 1, 0, 10),
    ]
