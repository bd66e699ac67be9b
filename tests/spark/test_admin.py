"""Driver-side lookups (`exactly.spark.admin.SourceAdmin`) against the real broker, without Spark:
the last stable offset under read_committed, log start offsets, which partitions a subscription reads,
and the errors for unknown topics, bad kafka.* settings and an unreachable broker."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient

from exactly.spark.admin import BrokerUnreachableError, SourceAdmin, UnknownTopicError
from exactly.spark.offsets import TopicPartition
from exactly.spark.options import SourceOptionError, parse_reader_options
from exactly.testing.processes import BrokerProcess, free_port
from tests.interop.support import create_topic
from tests.spark.support import Transaction, add_partitions, committed, new_topic, produce, unique_name

pytestmark = pytest.mark.interop


def _admin(bootstrap: str, **options: str) -> SourceAdmin:
    return SourceAdmin(parse_reader_options({"kafka.bootstrap.servers": bootstrap, **options}))


def test_latest_is_the_last_stable_offset_under_read_committed(spark_broker: BrokerProcess) -> None:
    bootstrap = spark_broker.bootstrap
    topic = new_topic(bootstrap, "lso")
    committed(bootstrap, topic, [(0, b"a"), (0, b"b")])  # offsets 0, 1, marker 2
    still_open = Transaction(bootstrap, topic, [(0, b"open")])  # offset 3, undecided
    committed(bootstrap, topic, [(0, b"c")])  # offset 4, marker 5
    tp = TopicPartition(topic, 0)
    assert _admin(bootstrap, subscribe=topic).latest([tp]) == {tp: 3}
    dirty = _admin(bootstrap, subscribe=topic, **{"kafka.isolation.level": "read_uncommitted"})
    assert dirty.latest([tp]) == {tp: 6}
    still_open.commit()  # marker 6
    assert _admin(bootstrap, subscribe=topic).latest([tp]) == {tp: 7}


def test_earliest_is_the_log_start_offset(spark_broker: BrokerProcess) -> None:
    bootstrap = spark_broker.bootstrap
    topic = new_topic(bootstrap, "start", 2)
    produce(bootstrap, topic, [(0, b"x")] * 5)
    admin_client = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin_client.delete_records(
        [KafkaTopicPartition(topic, 0, 3)], request_timeout=30
    ).values():
        future.result(30)
    tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    assert _admin(bootstrap, subscribe=topic).earliest(tps) == {tps[0]: 3, tps[1]: 0}


def test_subscribed_partitions(spark_broker: BrokerProcess) -> None:
    bootstrap = spark_broker.bootstrap
    prefix = unique_name("sub")
    create_topic(bootstrap, f"{prefix}-a", 2)
    create_topic(bootstrap, f"{prefix}-b", 1)
    a0, a1, b0 = (
        TopicPartition(f"{prefix}-a", 0),
        TopicPartition(f"{prefix}-a", 1),
        TopicPartition(f"{prefix}-b", 0),
    )
    assert _admin(bootstrap, subscribePattern=f"{prefix}-.*").subscribed_partitions() == [a0, a1, b0]
    assert _admin(bootstrap, subscribe=f"{prefix}-b,{prefix}-a").subscribed_partitions() == [a0, a1, b0]
    assert _admin(bootstrap, assign=f'{{"{prefix}-a": [1]}}').subscribed_partitions() == [a1]
    add_partitions(bootstrap, f"{prefix}-b", 2)
    b1 = TopicPartition(f"{prefix}-b", 1)
    assert _admin(bootstrap, subscribePattern=f"{prefix}-b").subscribed_partitions() == [b0, b1]
    # a pattern that matches nothing is not an error (topics may come later)
    assert _admin(bootstrap, subscribePattern=f"{prefix}-z.*").subscribed_partitions() == []


def test_unknown_topics_and_partitions(spark_broker: BrokerProcess) -> None:
    bootstrap = spark_broker.bootstrap
    topic = new_topic(bootstrap, "known")
    missing = unique_name("missing")
    with pytest.raises(UnknownTopicError) as info:
        _admin(bootstrap, subscribe=f"{topic},{missing}").subscribed_partitions()
    assert (
        str(info.value)
        == f"unknown topic(s) {missing} at {bootstrap} (subscribe={','.join(sorted([topic, missing]))})"
    )
    with pytest.raises(UnknownTopicError, match=rf"unknown topic partition\(s\) {topic}-3 at "):
        _admin(bootstrap, assign=f'{{"{topic}": [0, 3]}}').subscribed_partitions()
    # asking did not create the topic (Metadata without auto-creation)
    assert missing not in AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=30).topics
    # while streaming a vanished topic is skipped rather than an error
    admin = _admin(bootstrap, subscribe=f"{topic},{missing}")
    assert admin.subscribed_partitions(require_topics=False) == [TopicPartition(topic, 0)]


def test_bad_kafka_setting_is_an_option_error(spark_broker: BrokerProcess) -> None:
    with pytest.raises(SourceOptionError, match=r"invalid kafka\.\* option: .*no\.such\.setting"):
        _admin(spark_broker.bootstrap, subscribe="t", **{"kafka.no.such.setting": "1"})


def test_unreachable_broker_is_reported_with_the_address_in_bounded_time() -> None:
    address = f"127.0.0.1:{free_port()}"
    admin = _admin(address, subscribe="t", **{"kafkaConsumer.pollTimeoutMs": "2000"})
    started = time.monotonic()
    with pytest.raises(BrokerUnreachableError) as info:
        admin.subscribed_partitions()
    assert str(info.value).startswith(
        f"cannot reach the broker at kafka.bootstrap.servers={address} within 2 s"
    )
    assert time.monotonic() - started < 20
