"""kafka-reassign-partitions' JSON: parsed with one readable error per mistake, written back the same."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from exactly.cli.reassign import format_reassignment, parse_reassignment


def test_kafka_s_format_round_trips() -> None:
    text = (
        '{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[2,3],"log_dirs":["any","any"]},'
        '{"topic":"t","partition":1,"replicas":[3,1]}]}'
    )
    parsed = parse_reassignment(json.loads(text))
    assert parsed == {("t", 0): [2, 3], ("t", 1): [3, 1]}
    assert parse_reassignment(json.loads(format_reassignment(parsed))) == parsed
    assert json.loads(format_reassignment(parsed))["partitions"][0]["log_dirs"] == ["any", "any"]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "expected"),
        ({"partitions": [{"topic": "t", "partition": 0, "replicas": []}]}, "non-empty"),
        ({"partitions": [{"topic": "t", "partition": 0, "replicas": [1, 1]}]}, "twice"),
        ({"partitions": [{"topic": "t", "replicas": [1]}]}, "partition number"),
        ({"partitions": [{"topic": "t", "partition": 0, "replicas": [1]}] * 2}, "appears twice"),
    ],
)
def test_mistakes_are_one_line(data: object, message: str) -> None:
    with pytest.raises(ValueError, match=message) as e:
        parse_reassignment(data)
    assert "\n" not in str(e.value)


@given(
    st.dictionaries(
        st.tuples(st.text("abc-", min_size=1, max_size=5), st.integers(0, 50)),
        st.lists(st.integers(0, 9), min_size=1, max_size=4, unique=True),
        max_size=6,
    )
)
def test_format_then_parse_is_the_identity(assignment: dict[tuple[str, int], list[int]]) -> None:
    assert parse_reassignment(json.loads(format_reassignment(assignment))) == assignment
