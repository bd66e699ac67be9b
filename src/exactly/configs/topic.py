"""Every topic config Kafka 4.x has: type, Kafka's default, validator, documentation, broker synonyms.

The synonyms are Kafka's `ServerTopicConfigSynonyms`: the broker configs that give a topic its default
when it has no override, in priority order, with the unit conversion (`log.retention.hours` x 3,600,000).
Kafka 4 removed `message.format.version` and `message.downconversion.enable`; they are unknown here too.

exactly's own bounds: `segment.bytes` at least 14 (Kafka 4 asks 1 MiB, and offers the internal
`internal.segment.bytes` for tests; exactly's tests use small segments), `segment.index.bytes` at least 8
(one index entry).
"""

from __future__ import annotations

from collections.abc import Mapping

from exactly.configs.definition import (
    LONG_MAX,
    ConfigDef,
    ConfigType,
    OneOf,
    Range,
    Synonym,
)
from exactly.errors import ErrorCode, KafkaError

BOOLEAN, STRING, INT, LONG, DOUBLE, LIST = (
    ConfigType.BOOLEAN,
    ConfigType.STRING,
    ConfigType.INT,
    ConfigType.LONG,
    ConfigType.DOUBLE,
    ConfigType.LIST,
)
HOUR_MS = 3_600_000
MINUTE_MS = 60_000
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")


def _s(*names: str | tuple[str, int]) -> tuple[Synonym, ...]:
    return tuple(Synonym(n) if isinstance(n, str) else Synonym(*n) for n in names)


_DEFS = (
    ConfigDef(
        "cleanup.policy",
        LIST,
        "delete",
        "The retention policy of old log segments: a list of 'delete' (discard segments past the retention "
        "time or size) and 'compact' (keep the latest value of each key). Empty: neither.",
        OneOf(("compact", "delete"), case_insensitive=True),
        _s("log.cleanup.policy"),
    ),
    ConfigDef(
        "compression.gzip.level",
        INT,
        "-1",
        "The compression level to use if compression.type is gzip.",
        Range(-1, 9),
        _s("compression.gzip.level"),
    ),
    ConfigDef(
        "compression.lz4.level",
        INT,
        "9",
        "The compression level to use if compression.type is lz4.",
        Range(1, 17),
        _s("compression.lz4.level"),
    ),
    ConfigDef(
        "compression.type",
        STRING,
        "producer",
        "The final compression of the topic's batches: one of the codecs 'gzip', 'snappy', 'lz4', 'zstd', "
        "'uncompressed' (the broker recompresses batches written with another codec), or 'producer' "
        "(keep the producer's codec).",
        OneOf(COMPRESSION_TYPES, case_insensitive=True),
        _s("compression.type"),
    ),
    ConfigDef(
        "compression.zstd.level",
        INT,
        "3",
        "The compression level to use if compression.type is zstd.",
        Range(-131072, 22),
        _s("compression.zstd.level"),
    ),
    ConfigDef(
        "delete.retention.ms",
        LONG,
        "86400000",
        "How long delete tombstones are kept in a compacted topic, so that a consumer that started from "
        "the beginning sees them.",
        Range(0),
        _s("log.cleaner.delete.retention.ms"),
    ),
    ConfigDef(
        "file.delete.delay.ms",
        LONG,
        "60000",
        "The time to wait before deleting a file from the filesystem.",
        Range(0),
        _s("log.segment.delete.delay.ms"),
    ),
    ConfigDef(
        "flush.messages",
        LONG,
        str(LONG_MAX),
        "Force an fsync of the log every this many messages (default: never; exactly then fsyncs acks=all "
        "writes before it acknowledges them).",
        Range(1),
        _s("log.flush.interval.messages"),
    ),
    ConfigDef(
        "flush.ms",
        LONG,
        str(LONG_MAX),
        "Force an fsync of the log when it has unflushed data this many milliseconds old.",
        Range(0),
        _s("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
    ),
    ConfigDef(
        "follower.replication.throttled.replicas",
        LIST,
        "",
        "Replicas whose log replication is throttled on the follower side (accepted; one broker).",
    ),
    ConfigDef(
        "index.interval.bytes",
        INT,
        "4096",
        "How often (in bytes of log) an entry is added to the offset index.",
        Range(0),
        _s("log.index.interval.bytes"),
    ),
    ConfigDef(
        "leader.replication.throttled.replicas",
        LIST,
        "",
        "Replicas whose log replication is throttled on the leader side (accepted; one broker).",
    ),
    ConfigDef(
        "local.retention.bytes",
        LONG,
        "-2",
        "Local log size kept when tiered storage is on (-2: retention.bytes). Accepted; no tiered storage.",
        Range(-2),
        _s("log.local.retention.bytes"),
    ),
    ConfigDef(
        "local.retention.ms",
        LONG,
        "-2",
        "Local log age kept when tiered storage is on (-2: retention.ms). Accepted; no tiered storage.",
        Range(-2),
        _s("log.local.retention.ms"),
    ),
    ConfigDef(
        "max.compaction.lag.ms",
        LONG,
        str(LONG_MAX),
        "The longest time a message stays ineligible for compaction.",
        Range(1),
        _s("log.cleaner.max.compaction.lag.ms"),
    ),
    ConfigDef(
        "max.message.bytes",
        INT,
        "1048588",
        "The largest record batch size allowed, after compression.",
        Range(0),
        _s("message.max.bytes"),
    ),
    ConfigDef(
        "message.timestamp.after.max.ms",
        LONG,
        str(LONG_MAX),
        "How far a CreateTime timestamp may be ahead of the broker's clock.",
        Range(0),
        _s("log.message.timestamp.after.max.ms"),
    ),
    ConfigDef(
        "message.timestamp.before.max.ms",
        LONG,
        str(LONG_MAX),
        "How far a CreateTime timestamp may be behind the broker's clock.",
        Range(0),
        _s("log.message.timestamp.before.max.ms"),
    ),
    ConfigDef(
        "message.timestamp.type",
        STRING,
        "CreateTime",
        "Whether a record's timestamp is the producer's (CreateTime) or the broker's (LogAppendTime).",
        OneOf(("CreateTime", "LogAppendTime")),
        _s("log.message.timestamp.type"),
    ),
    ConfigDef(
        "min.cleanable.dirty.ratio",
        DOUBLE,
        "0.5",
        "The share of uncompacted log above which the log is compacted.",
        Range(0, 1),
        _s("log.cleaner.min.cleanable.ratio"),
    ),
    ConfigDef(
        "min.compaction.lag.ms",
        LONG,
        "0",
        "The shortest time a message stays uncompacted.",
        Range(0),
        _s("log.cleaner.min.compaction.lag.ms"),
    ),
    ConfigDef(
        "min.insync.replicas",
        INT,
        "1",
        "The fewest replicas that must acknowledge an acks=all write (one broker: always met).",
        Range(1),
        _s("min.insync.replicas"),
    ),
    ConfigDef(
        "preallocate",
        BOOLEAN,
        "false",
        "Allocate the active segment's file ahead of its appends (fallocate: its own size, 16 KiB to 4 "
        "MiB at a time; trimmed when the segment rolls), so that the fsync after a small append need not "
        "write the file's size. On by default for the coordinators' internal topics "
        "(storage/preallocation.py).",
        None,
        _s("log.preallocate"),
    ),
    ConfigDef("remote.log.copy.disable", BOOLEAN, "false", "Stop copying to tiered storage (accepted)."),
    ConfigDef(
        "remote.log.delete.on.disable", BOOLEAN, "false", "Delete tiered data when disabled (accepted)."
    ),
    ConfigDef(
        "remote.storage.enable", BOOLEAN, "false", "Tiered storage for the topic (accepted, not built)."
    ),
    ConfigDef(
        "retention.bytes",
        LONG,
        "-1",
        "The largest size a partition may grow to before old segments are deleted (-1: no limit).",
        None,
        _s("log.retention.bytes"),
    ),
    ConfigDef(
        "retention.ms",
        LONG,
        "604800000",
        "How long a segment is kept before it is deleted (-1: no time limit).",
        Range(-1),
        _s("log.retention.ms", ("log.retention.minutes", MINUTE_MS), ("log.retention.hours", HOUR_MS)),
    ),
    ConfigDef(
        "segment.bytes",
        INT,
        "1073741824",
        "The size of one segment file of the log.",
        Range(14),
        _s("log.segment.bytes"),
    ),
    ConfigDef(
        "segment.index.bytes",
        INT,
        "10485760",
        "The size of the offset index of a segment.",
        Range(8),
        _s("log.index.size.max.bytes"),
    ),
    ConfigDef(
        "segment.jitter.ms",
        LONG,
        "0",
        "The largest random jitter subtracted from segment.ms (accepted).",
        Range(0),
        _s("log.roll.jitter.ms", ("log.roll.jitter.hours", HOUR_MS)),
    ),
    ConfigDef(
        "segment.ms",
        LONG,
        "604800000",
        "The time after which a segment is rolled even if it is not full.",
        Range(1),
        _s("log.roll.ms", ("log.roll.hours", HOUR_MS)),
    ),
    ConfigDef(
        "unclean.leader.election.enable",
        BOOLEAN,
        "false",
        "Whether an out-of-sync replica may become leader (accepted; one broker).",
        None,
        _s("unclean.leader.election.enable"),
    ),
)

TOPIC_CONFIGS: dict[str, ConfigDef] = {d.name: d for d in _DEFS}


def topic_config(name: str) -> ConfigDef:
    """The definition of topic config `name` (INVALID_CONFIG "Unknown topic config name" otherwise)."""
    definition = TOPIC_CONFIGS.get(name)
    if definition is None:
        raise KafkaError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {name}")
    return definition


def validate_topic_overrides(overrides: Mapping[str, str]) -> dict[str, str]:
    """Check names and values of a topic's overrides; return them in Kafka's canonical form."""
    canonical = {name: topic_config(name).canonical(raw) for name, raw in overrides.items()}
    low = int(canonical.get("min.compaction.lag.ms", "0"))
    high = int(canonical.get("max.compaction.lag.ms", str(LONG_MAX)))
    if low > high:
        raise KafkaError(
            ErrorCode.INVALID_CONFIG,
            f"conflict topic config setting min.compaction.lag.ms ({low}) > max.compaction.lag.ms ({high})",
        )
    return canonical


def broker_default(definition: ConfigDef, broker_props: Mapping[str, str]) -> tuple[str, Synonym] | None:
    """The topic default `broker_props` give `definition` (its first synonym set), converted to its unit."""
    for synonym in definition.synonyms:
        raw = broker_props.get(synonym.name)
        if raw is None:
            continue
        if synonym.factor == 1:
            return raw, synonym
        return str(int(raw.strip()) * synonym.factor), synonym
    return None
