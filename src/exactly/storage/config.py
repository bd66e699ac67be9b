"""Per-topic log configuration, with Kafka's topic-config names and defaults.

`LogConfig` is a frozen value with one field per topic config of the catalogue (`exactly.configs.topic`:
the field is the name with '.' -> '_'). `LogConfig.from_properties({"segment.bytes": "1048576", ...},
base=...)` parses and validates Kafka names through the catalogue and layers them on `base` (the broker's
default topic config); `to_properties()` gives every topic config as Kafka describes it. Configs that
change nothing on one broker without tiered storage (min.insync.replicas, remote.*, ...) are
kept and described only. `compression.type` is applied on append (`storage/recompression.py`).

Durability (exactly's rule, see ARCHITECTURE.md invariant 5): Kafka's `flush.messages` / `flush.ms`
default to "never" and Kafka acknowledges `acks=all` writes before any fsync. exactly instead, while both
are left at their defaults, fsyncs an `acks=all` append before it is acknowledged (group commit: concurrent
appends share one fsync, see `PartitionLog.flush`). Setting either knob relaxes that to Kafka's behaviour:
the log is flushed every `flush.messages` messages or `flush.ms` milliseconds and acks never wait for fsync.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from exactly.configs.definition import ConfigDef, ConfigType, Range
from exactly.configs.topic import TOPIC_CONFIGS, topic_config

LONG_MAX = (1 << 63) - 1


class CleanupPolicy(Enum):
    NONE = ""  # `cleanup.policy=` (an empty list): neither deleted nor compacted
    DELETE = "delete"
    COMPACT = "compact"
    COMPACT_DELETE = "compact,delete"

    @property
    def compacts(self) -> bool:
        return self in (CleanupPolicy.COMPACT, CleanupPolicy.COMPACT_DELETE)

    @property
    def deletes(self) -> bool:
        return self in (CleanupPolicy.DELETE, CleanupPolicy.COMPACT_DELETE)

    @classmethod
    def of(cls, items: tuple[str, ...]) -> CleanupPolicy:
        return cls(",".join(sorted({item.lower() for item in items})))


class MessageTimestampType(Enum):
    CREATE_TIME = "CreateTime"
    LOG_APPEND_TIME = "LogAppendTime"


class BrokerCompressionType(Enum):
    """`compression.type`: the codec every stored batch ends up with, or PRODUCER (keep the client's)."""

    PRODUCER = "producer"
    UNCOMPRESSED = "uncompressed"
    GZIP = "gzip"
    SNAPPY = "snappy"
    LZ4 = "lz4"
    ZSTD = "zstd"


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = 1 << 30
    segment_ms: int = 7 * 24 * 3600 * 1000
    retention_bytes: int = -1
    retention_ms: int = 7 * 24 * 3600 * 1000
    cleanup_policy: CleanupPolicy = CleanupPolicy.DELETE
    max_message_bytes: int = 1048588
    index_interval_bytes: int = 4096
    segment_index_bytes: int = 10 * 1024 * 1024
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    delete_retention_ms: int = 24 * 3600 * 1000
    message_timestamp_type: MessageTimestampType = MessageTimestampType.CREATE_TIME
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = LONG_MAX
    min_compaction_lag_ms: int = 0
    min_cleanable_dirty_ratio: float = 0.5
    producer_id_expiration_ms: int = 86_400_000  # the broker's producer.id.expiration.ms
    compression_type: BrokerCompressionType = BrokerCompressionType.PRODUCER
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_zstd_level: int = 3
    # Accepted, stored and described; no effect on one broker without tiered storage.
    file_delete_delay_ms: int = 60_000
    max_compaction_lag_ms: int = LONG_MAX
    min_insync_replicas: int = 1
    preallocate: bool = False
    segment_jitter_ms: int = 0
    unclean_leader_election_enable: bool = False
    local_retention_bytes: int = -2
    local_retention_ms: int = -2
    remote_storage_enable: bool = False
    remote_log_copy_disable: bool = False
    remote_log_delete_on_disable: bool = False
    leader_replication_throttled_replicas: tuple[str, ...] = ()
    follower_replication_throttled_replicas: tuple[str, ...] = ()
    # cleanup.policy as it was given (Kafka keeps a list's order); empty when built from the enum only
    cleanup_policy_items: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name, value in (
            ("segment.bytes", self.segment_bytes),
            ("segment.index.bytes", self.segment_index_bytes),
            ("segment.ms", self.segment_ms),
            ("flush.messages", self.flush_messages),
            ("flush.ms", self.flush_ms),
            ("max.message.bytes", self.max_message_bytes),
            ("index.interval.bytes", self.index_interval_bytes),
        ):
            definition = TOPIC_CONFIGS[name]
            if isinstance(definition.validator, Range):
                problem = definition.validator.check(value)
                if problem is not None:
                    raise definition.invalid(str(value), problem)

    @property
    def ack_waits_for_fsync(self) -> bool:
        """True while neither flush knob is set: `acks=all` appends are fsynced before they are acked."""
        return self.flush_messages == LONG_MAX and self.flush_ms == LONG_MAX

    @classmethod
    def from_properties(cls, props: Mapping[str, str], base: LogConfig | None = None) -> LogConfig:
        """Build from Kafka topic-config names (unknown names or bad values raise INVALID_CONFIG)."""
        base = base or cls()
        changes: dict[str, Any] = {}
        for name, raw in props.items():
            definition = _INTERNAL.get(name) or topic_config(name)
            field = name.replace(".", "_")
            value: Any = definition.parse(raw)
            if field == "cleanup_policy":
                changes["cleanup_policy_items"] = value
                value = CleanupPolicy.of(value)
            elif field == "message_timestamp_type":
                value = MessageTimestampType(value)
            elif field == "compression_type":
                value = BrokerCompressionType(value.lower())
            changes[field] = value
        return dataclasses.replace(base, **changes)

    def to_properties(self) -> dict[str, str]:
        """Every topic config, as Kafka describes its value (list order kept)."""
        out: dict[str, str] = {}
        for name in TOPIC_CONFIGS:
            value = getattr(self, name.replace(".", "_"))
            if name == "cleanup.policy":
                items = self.cleanup_policy_items
                out[name] = ",".join(items) if CleanupPolicy.of(items) is value else value.value
            elif isinstance(value, Enum):
                out[name] = value.value
            elif isinstance(value, bool):
                out[name] = "true" if value else "false"
            elif isinstance(value, tuple):
                out[name] = ",".join(value)
            else:
                out[name] = str(value)
        return out


# Topic-level settings that are broker configs in Kafka, not topic configs (never a topic override).
_INTERNAL: dict[str, ConfigDef] = {
    "producer.id.expiration.ms": ConfigDef(
        "producer.id.expiration.ms", ConfigType.INT, "86400000", "", Range(1)
    ),
}
