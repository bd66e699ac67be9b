"""The broker-config catalogue and BrokerConfig's static and run-time layers."""

from __future__ import annotations

import pytest

from exactly.broker.config import _BROKER_KEYS, BrokerConfig
from exactly.configs import BROKER_CONFIGS, TOPIC_CONFIGS, ConfigType, synonym_group
from exactly.errors import ErrorCode, KafkaError
from exactly.storage.config import BrokerCompressionType, CleanupPolicy


def test_every_setting_exactly_reads_is_in_the_catalogue() -> None:
    assert set(_BROKER_KEYS) <= set(BROKER_CONFIGS)
    for topic in TOPIC_CONFIGS.values():
        for synonym in topic.synonyms:
            assert BROKER_CONFIGS[synonym.name].dynamic, synonym.name
    assert "advertised.listeners" in BROKER_CONFIGS
    assert all(d.type is not ConfigType.UNKNOWN and d.doc for d in BROKER_CONFIGS.values())


def test_dynamic_is_kafkas_dynamic_set() -> None:
    dynamic = {n for n, d in BROKER_CONFIGS.items() if d.dynamic}
    assert {
        "log.retention.ms",
        "log.retention.hours",
        "log.segment.bytes",
        "log.roll.ms",
        "log.cleaner.delete.retention.ms",
        "log.cleaner.threads",
        "log.cleaner.backoff.ms",
        "compression.type",
        "message.max.bytes",
        "num.io.threads",
        "producer.id.expiration.ms",
    } <= dynamic
    assert not {"node.id", "listeners", "advertised.listeners", "log.dirs", "num.partitions"} & dynamic
    assert BROKER_CONFIGS["log.retention.hours"].type is ConfigType.INT
    assert BROKER_CONFIGS["log.retention.hours"].default == "168"
    assert BROKER_CONFIGS["log.retention.ms"].default is None
    assert synonym_group("log.retention.minutes") == (
        "log.retention.ms",
        "log.retention.minutes",
        "log.retention.hours",
    )
    assert synonym_group("num.io.threads") == ("num.io.threads",)


def test_static_properties_are_kept_and_become_topic_defaults() -> None:
    config = BrokerConfig.from_properties(
        {"log.retention.hours": "2", "compression.type": "gzip", "log.cleanup.policy": "delete,compact"}
    )
    assert config.properties == {
        "log.retention.hours": "2",
        "compression.type": "gzip",
        "log.cleanup.policy": "delete,compact",
    }
    assert config.log.retention_ms == 7_200_000
    assert config.log.compression_type is BrokerCompressionType.GZIP
    assert config.log.cleanup_policy is CleanupPolicy.COMPACT_DELETE
    assert config.log.to_properties()["cleanup.policy"] == "delete,compact"


def test_run_time_layer_over_static() -> None:
    static = BrokerConfig.from_properties({"log.retention.ms": "1000", "log.segment.bytes": "2000000"})
    # A static log.retention.ms still wins over a run-time log.retention.hours (merged, then synonyms).
    config = static.with_dynamic({"log.retention.hours": "5", "message.max.bytes": "5000"})
    assert config.log.retention_ms == 1000
    assert config.log.max_message_bytes == 5000
    assert config.message_max_bytes == 5000
    assert config.log.segment_bytes == 2_000_000
    config = static.with_dynamic({"log.retention.ms": "77", "log.cleaner.backoff.ms": "5"})
    assert (config.log.retention_ms, config.cleaner_backoff_ms) == (77, 5)
    assert config.properties == static.properties  # the static layer is unchanged
    assert static.with_dynamic({}) is static
    with pytest.raises(KafkaError) as info:
        static.with_dynamic({"log.retention.ms": "soon"})
    assert info.value.code == ErrorCode.INVALID_CONFIG
    assert "log.retention.ms" in info.value.message
