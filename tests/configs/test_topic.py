"""The topic-config catalogue: Kafka's names, types, defaults, synonyms; parsing and validation."""

from __future__ import annotations

import pytest

from exactly.configs import TOPIC_CONFIGS, ConfigType, topic_config, validate_topic_overrides
from exactly.configs.topic import broker_default
from exactly.errors import ErrorCode, KafkaError
from exactly.storage.config import LogConfig

KAFKA_4_TOPIC_CONFIGS = {
    "cleanup.policy": (ConfigType.LIST, "delete"),
    "compression.gzip.level": (ConfigType.INT, "-1"),
    "compression.lz4.level": (ConfigType.INT, "9"),
    "compression.type": (ConfigType.STRING, "producer"),
    "compression.zstd.level": (ConfigType.INT, "3"),
    "delete.retention.ms": (ConfigType.LONG, "86400000"),
    "file.delete.delay.ms": (ConfigType.LONG, "60000"),
    "flush.messages": (ConfigType.LONG, str(2**63 - 1)),
    "flush.ms": (ConfigType.LONG, str(2**63 - 1)),
    "follower.replication.throttled.replicas": (ConfigType.LIST, ""),
    "index.interval.bytes": (ConfigType.INT, "4096"),
    "leader.replication.throttled.replicas": (ConfigType.LIST, ""),
    "local.retention.bytes": (ConfigType.LONG, "-2"),
    "local.retention.ms": (ConfigType.LONG, "-2"),
    "max.compaction.lag.ms": (ConfigType.LONG, str(2**63 - 1)),
    "max.message.bytes": (ConfigType.INT, "1048588"),
    "message.timestamp.after.max.ms": (ConfigType.LONG, str(2**63 - 1)),
    "message.timestamp.before.max.ms": (ConfigType.LONG, str(2**63 - 1)),
    "message.timestamp.type": (ConfigType.STRING, "CreateTime"),
    "min.cleanable.dirty.ratio": (ConfigType.DOUBLE, "0.5"),
    "min.compaction.lag.ms": (ConfigType.LONG, "0"),
    "min.insync.replicas": (ConfigType.INT, "1"),
    "preallocate": (ConfigType.BOOLEAN, "false"),
    "remote.log.copy.disable": (ConfigType.BOOLEAN, "false"),
    "remote.log.delete.on.disable": (ConfigType.BOOLEAN, "false"),
    "remote.storage.enable": (ConfigType.BOOLEAN, "false"),
    "retention.bytes": (ConfigType.LONG, "-1"),
    "retention.ms": (ConfigType.LONG, "604800000"),
    "segment.bytes": (ConfigType.INT, "1073741824"),
    "segment.index.bytes": (ConfigType.INT, "10485760"),
    "segment.jitter.ms": (ConfigType.LONG, "0"),
    "segment.ms": (ConfigType.LONG, "604800000"),
    "unclean.leader.election.enable": (ConfigType.BOOLEAN, "false"),
}


def test_every_kafka_topic_config_with_its_type_and_default() -> None:
    assert {n: (d.type, d.default) for n, d in TOPIC_CONFIGS.items()} == KAFKA_4_TOPIC_CONFIGS
    assert all(d.doc for d in TOPIC_CONFIGS.values())


def test_log_config_defaults_are_the_catalogue_defaults() -> None:
    assert LogConfig().to_properties() == {n: d for n, (_t, d) in KAFKA_4_TOPIC_CONFIGS.items()}


def test_synonyms_in_kafkas_priority_order_with_units() -> None:
    retention = TOPIC_CONFIGS["retention.ms"]
    assert [(s.name, s.factor) for s in retention.synonyms] == [
        ("log.retention.ms", 1),
        ("log.retention.minutes", 60_000),
        ("log.retention.hours", 3_600_000),
    ]
    assert broker_default(retention, {"log.retention.hours": "2"}) == ("7200000", retention.synonyms[2])
    both = {"log.retention.hours": "2", "log.retention.minutes": "3"}
    assert broker_default(retention, both) == ("180000", retention.synonyms[1])
    assert broker_default(retention, {}) is None
    assert [s.name for s in TOPIC_CONFIGS["max.message.bytes"].synonyms] == ["message.max.bytes"]
    assert [s.name for s in TOPIC_CONFIGS["flush.ms"].synonyms] == [
        "log.flush.interval.ms",
        "log.flush.scheduler.interval.ms",
    ]
    assert TOPIC_CONFIGS["remote.storage.enable"].synonyms == ()


@pytest.mark.parametrize(
    ("name", "raw", "canonical"),
    [
        ("cleanup.policy", "delete,compact", "delete,compact"),
        ("cleanup.policy", " compact , delete ", "compact,delete"),
        ("cleanup.policy", "", ""),
        ("compression.type", "gzip", "gzip"),
        ("retention.ms", " -1 ", "-1"),
        ("min.cleanable.dirty.ratio", "0.25", "0.25"),
        ("min.cleanable.dirty.ratio", "1", "1.0"),
        ("preallocate", "TRUE", "true"),
        ("leader.replication.throttled.replicas", "0:0, 1:0", "0:0,1:0"),
    ],
)
def test_canonical_values(name: str, raw: str, canonical: str) -> None:
    assert topic_config(name).canonical(raw) == canonical


@pytest.mark.parametrize(
    ("name", "raw", "message"),
    [
        (
            "retention.ms",
            "forever",
            "Invalid value forever for configuration retention.ms: Not a number of type LONG",
        ),
        ("retention.ms", "-2", "Invalid value -2 for configuration retention.ms: Value must be at least -1"),
        ("segment.bytes", "3", "configuration segment.bytes: Value must be at least 14"),
        ("segment.bytes", str(2**31), "configuration segment.bytes: Not a number of type INT"),
        ("segment.bytes", "1_000_000", "configuration segment.bytes: Not a number of type INT"),
        ("cleanup.policy", "delete,shred", "String must be one of: compact, delete"),
        (
            "compression.type",
            "brotli",
            "String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer",
        ),
        ("message.timestamp.type", "Tuesday", "String must be one of: CreateTime, LogAppendTime"),
        ("min.cleanable.dirty.ratio", "1.5", "Value must be in range [0,...,1]"),
        ("compression.lz4.level", "18", "Value must be in range [1,...,17]"),
        ("preallocate", "yes", "Expected value to be either true or false"),
    ],
)
def test_invalid_values_name_the_config(name: str, raw: str, message: str) -> None:
    with pytest.raises(KafkaError) as info:
        validate_topic_overrides({name: raw})
    assert info.value.code == ErrorCode.INVALID_CONFIG
    assert message in info.value.message


def test_unknown_names_and_cross_checks() -> None:
    for removed in ("message.format.version", "message.downconversion.enable", "no.such", "log.retention.ms"):
        with pytest.raises(KafkaError, match=f"Unknown topic config name: {removed}"):
            validate_topic_overrides({removed: "1"})
    with pytest.raises(KafkaError, match=r"min.compaction.lag.ms \(10\) > max.compaction.lag.ms \(5\)"):
        validate_topic_overrides({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"})
    assert validate_topic_overrides({"cleanup.policy": "delete, compact", "retention.ms": "+5"}) == {
        "cleanup.policy": "delete,compact",
        "retention.ms": "5",
    }
