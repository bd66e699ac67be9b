"""Parsing and validation of the writer's options (no Spark, no broker)."""

from __future__ import annotations

import pickle

import pytest

from exactly.spark.writer_options import CommitHang, Guarantee, HangPoint, OptionsError, writer_options


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
    assert options.fail_task_once is None
    assert options.commit_hang is None
    assert pickle.loads(pickle.dumps(options)) == options


def test_keys_are_case_insensitive_and_test_options_parse() -> None:
    options = writer_options(
        {
            "Kafka.Bootstrap.Servers": "h:1",
            "GUARANTEE": "At-Least-Once",
            "exactly.test.failTaskOnce": "1",
            "exactly.test.hangAfterCommit": "3:/tmp/Marker",
        }
    )
    assert options.guarantee is Guarantee.AT_LEAST_ONCE
    assert options.topic is None
    assert options.fail_task_once == 1
    assert options.commit_hang == CommitHang(HangPoint.AFTER_DECISION, 3, "/tmp/Marker")


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
    ("key", "value", "message"),
    [
        ("exactly.test.failtaskonce", "one", "must be an integer"),
        ("exactly.test.hangaftercommit", "3", "'<batch id>:<marker file>'"),
        ("exactly.test.hangbeforecommit", "x:/tmp/m", "must be an integer"),
    ],
)
def test_bad_test_options(key: str, value: str, message: str) -> None:
    with pytest.raises(OptionsError, match=message):
        writer_options({"kafka.bootstrap.servers": "h:1", key: value})
