"""Parsing and validation of the writer's options (no Spark, no broker)."""

from __future__ import annotations

import pickle

import pytest

from exactly.spark.writer_hooks import HooksSpec
from exactly.spark.writer_options import Guarantee, OptionsError, writer_options


def test_defaults_and_pass_through() -> None:
    options = writer_options(
        {
            "kafka.bootstrap.servers": " 127.0.0.1:9092 ",
            "topic": "out",
            "kafka.linger.ms": "20",
            "kafka.compression.type": "zstd",
            "checkpointlocation": "/tmp/ckpt",
            "queryname": "q",
        }
    )
    assert options.bootstrap_servers == "127.0.0.1:9092"
    assert options.topic == "out"
    assert options.guarantee is Guarantee.EXACTLY_ONCE
    assert options.client_config() == {
        "bootstrap.servers": "127.0.0.1:9092",
        "compression.type": "zstd",
        "linger.ms": "20",
    }
    assert options.hooks is None
    assert pickle.loads(pickle.dumps(options)) == options


def test_keys_are_case_insensitive_and_hooks_parse() -> None:
    options = writer_options(
        {
            "Kafka.Bootstrap.Servers": "h:1",
            "GUARANTEE": "At-Least-Once",
            "Exactly.Writer.Hooks": "exactly.testing.spark_hooks:HangAfterDecision",
            "exactly.writer.hooks.argument": "3:/tmp/Marker",
        }
    )
    assert options.guarantee is Guarantee.AT_LEAST_ONCE
    assert options.topic is None
    assert options.hooks == HooksSpec("exactly.testing.spark_hooks:HangAfterDecision", "3:/tmp/Marker")
    assert pickle.loads(pickle.dumps(options)) == options


def test_every_problem_is_reported_at_once() -> None:
    with pytest.raises(OptionsError) as info:
        writer_options(
            {
                "topic": " ",
                "subscribe": "x",
                "guarantee": "twice",
                "kafka.transactional.id": "mine",
            }
        )
    text = str(info.value)
    assert "option 'kafka.bootstrap.servers' is required" in text
    assert "option 'topic' is empty" in text
    assert "unknown option 'subscribe'" in text
    assert "got 'twice'" in text
    assert "'kafka.transactional.id' is set by the writer itself" in text


@pytest.mark.parametrize(
    ("hooks", "argument", "message"),
    [
        ("exactly.testing.spark_hooks:FailTaskOnce", "one", "must be an integer"),
        ("exactly.testing.spark_hooks:HangAfterDecision", "3", "'<batch id>:<marker file>'"),
        ("exactly.testing.spark_hooks:HangBeforeDecision", "x:/tmp/m", "must be an integer"),
        ("exactly.testing.spark_hooks", None, "is not 'package.module:Class'"),
        ("exactly.testing.spark_hooks:Nothing", None, "cannot load"),
        ("exactly.testing.processes:BrokerProcess", None, "is not a subclass of WriterHooks"),
        (None, "1", "given without 'exactly.writer.hooks'"),
    ],
)
def test_bad_hooks_options(hooks: str | None, argument: str | None, message: str) -> None:
    options = {"kafka.bootstrap.servers": "h:1"}
    if hooks is not None:
        options["exactly.writer.hooks"] = hooks
    if argument is not None:
        options["exactly.writer.hooks.argument"] = argument
    with pytest.raises(OptionsError, match=message):
        writer_options(options)
