"""Options of the data source: parsing, defaults, validation messages (no Spark, no broker)."""

from __future__ import annotations

import pytest

from exactly.spark.offsets import TopicPartition
from exactly.spark.options import (
    OffsetKind,
    SourceOptionError,
    SubscriptionKind,
    parse_reader_options,
)

BOOT = {"kafka.bootstrap.servers": "h:1"}


def _error(options: dict[str, str]) -> str:
    with pytest.raises(SourceOptionError) as info:
        parse_reader_options(options)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_defaults() -> None:
    options = parse_reader_options({**BOOT, "subscribe": "b, a,b"})
    assert options.subscription.kind is SubscriptionKind.SUBSCRIBE
    assert options.subscription.topics == ("a", "b")
    assert options.starting_offsets is None  # the mode decides: batch earliest, streaming latest
    assert options.ending_offsets.kind is OffsetKind.LATEST
    assert options.isolation_level == "read_committed"
    assert options.fail_on_data_loss is True
    assert options.include_headers is False
    assert options.max_offsets_per_trigger is None
    assert options.min_partitions is None
    assert options.poll_timeout_ms == 30_000
    consumer = options.consumer_config()
    assert consumer["bootstrap.servers"] == "h:1"
    assert consumer["isolation.level"] == "read_committed"
    assert consumer["enable.auto.commit"] is False
    assert consumer["auto.offset.reset"] == "error"
    assert consumer["group.id"] == "exactly-spark-source"
    labelled = parse_reader_options({**BOOT, "subscribe": "t", "kafka.group.id": "mine"})
    assert labelled.consumer_config()["group.id"] == "mine"


def test_spark_lower_cases_keys_and_values_are_parsed() -> None:
    # Spark hands options over with lower-cased keys
    options = parse_reader_options(
        {
            "kafka.bootstrap.servers": "h:1",
            "subscribepattern": "orders-.*",
            "startingoffsets": '{"orders-1": {"0": 5}}',
            "endingoffsets": '{"orders-1": {"0": -1}}',
            "maxoffsetspertrigger": "1000",
            "minpartitions": "8",
            "includeheaders": "TRUE",
            "failondataloss": "false",
            "kafkaconsumer.polltimeoutms": "5000",
            "kafka.isolation.level": "read_uncommitted",
            "kafka.fetch.max.bytes": "1048576",
            "kafka.client.id": "me",
        }
    )
    sub = options.subscription
    assert sub.kind is SubscriptionKind.SUBSCRIBE_PATTERN
    assert sub.matches("orders-1")
    assert not sub.matches("orders")
    assert not sub.matches("__orders-x")  # internal topics never match a pattern
    assert options.starting_offsets is not None
    assert options.starting_offsets.specific_offsets() == {TopicPartition("orders-1", 0): 5}
    assert options.ending_offsets.specific_offsets() == {TopicPartition("orders-1", 0): -1}
    assert options.max_offsets_per_trigger == 1000
    assert options.min_partitions == 8
    assert options.include_headers is True
    assert options.fail_on_data_loss is False
    assert options.lookup_timeout_s == 5.0
    assert options.isolation_level == "read_uncommitted"
    config = options.consumer_config()
    assert config["fetch.max.bytes"] == "1048576"
    assert config["client.id"] == "me"
    assert config["isolation.level"] == "read_uncommitted"


def test_assign() -> None:
    options = parse_reader_options({**BOOT, "assign": '{"t": [1, 0]}', "startingOffsets": '{"t": {"1": 3}}'})
    assert options.subscription.assigned == (TopicPartition("t", 0), TopicPartition("t", 1))
    message = _error({**BOOT, "assign": '{"t": [0]}', "startingOffsets": '{"t": {"1": 3}}'})
    assert message == "option 'startingOffsets' names partition t-1, which is not in 'assign'"


def test_unknown_option_lists_the_known_ones() -> None:
    message = _error({**BOOT, "subscribe": "t", "startingoffset": "earliest"})
    assert message.startswith("unknown reader option 'startingoffset'; known options: ")
    for known in ("assign", "endingOffsets", "failOnDataLoss", "maxOffsetsPerTrigger", "kafka.*"):
        assert known in message


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"subscribe": "t"}, "option 'kafka.bootstrap.servers' is required"),
        ({**BOOT}, "exactly one of 'subscribe', 'subscribePattern', 'assign' is required (given: none)"),
        ({**BOOT, "subscribe": "t", "assign": '{"t":[0]}'}, "(given: subscribe, assign)"),
        ({**BOOT, "subscribe": " , "}, "option 'subscribe' must list topics"),
        ({**BOOT, "subscribePattern": "("}, "option 'subscribePattern' is not a valid regular expression"),
        ({**BOOT, "assign": "[0]"}, "assign: expected a non-empty JSON object"),
        (
            {**BOOT, "subscribe": "t", "startingOffsets": "first"},
            "option 'startingOffsets' must be 'earliest'",
        ),
        ({**BOOT, "subscribe": "t", "startingOffsets": "{oops"}, "startingOffsets: not valid JSON"),
        (
            {**BOOT, "subscribe": "t", "endingOffsets": "earliest"},
            "option 'endingOffsets' cannot be 'earliest'",
        ),
        ({**BOOT, "subscribe": "t", "endingOffsets": '{"t":{"0":-2}}'}, "-2 (earliest) is not allowed"),
        ({**BOOT, "subscribe": "t", "startingOffsets": '{"u":{"0":1}}'}, "names 'u', which subscribe=t"),
        (
            {**BOOT, "subscribe": "t", "maxOffsetsPerTrigger": "0"},
            "'maxOffsetsPerTrigger' must be a positive",
        ),
        ({**BOOT, "subscribe": "t", "minPartitions": "x"}, "'minPartitions' must be a positive integer"),
        ({**BOOT, "subscribe": "t", "includeHeaders": "yes"}, "'includeHeaders' must be true or false"),
        (
            {**BOOT, "subscribe": "t", "kafka.isolation.level": "dirty"},
            "'kafka.isolation.level' must be one of",
        ),
        ({**BOOT, "subscribe": "t", "kafka.auto.offset.reset": "latest"}, "use startingOffsets"),
        ({**BOOT, "subscribe": "t", "kafka.enable.auto.commit": "true"}, "'kafka.enable.auto.commit' is not"),
        ({**BOOT, "subscribe": "t", "kafka.": "x"}, "unknown reader option 'kafka.'"),
    ],
)
def test_bad_input_messages(options: dict[str, str], expected: str) -> None:
    assert expected in _error(options)
