"""Per-topic log configuration, with Kafka's topic-config names and defaults.

`LogConfig` is a frozen value. `LogConfig.from_properties({"segment.bytes": "1048576", ...})` reads the
Kafka names; `with_overrides(...)` layers per-topic overrides on a broker default.

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

from exactly.errors import ErrorCode, KafkaError

LONG_MAX = (1 << 63) - 1


class CleanupPolicy(Enum):
    DELETE = "delete"
    COMPACT = "compact"
    COMPACT_DELETE = "compact,delete"

    @property
    def compacts(self) -> bool:
        return self is not CleanupPolicy.DELETE

    @property
    def deletes(self) -> bool:
        return self is not CleanupPolicy.COMPACT


class MessageTimestampType(Enum):
    CREATE_TIME = "CreateTime"
    LOG_APPEND_TIME = "LogAppendTime"


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
    producer_id_expiration_ms: int = 86_400_000

    def __post_init__(self) -> None:
        if self.segment_bytes < 14:
            raise KafkaError(ErrorCode.INVALID_CONFIG, "segment.bytes must be at least 14")
        if self.segment_index_bytes < 8:
            raise KafkaError(ErrorCode.INVALID_CONFIG, "segment.index.bytes must be at least 8")
        if self.segment_ms < 1 or self.flush_messages < 1 or self.flush_ms < 0:
            raise KafkaError(ErrorCode.INVALID_CONFIG, "segment.ms, flush.messages, flush.ms out of range")
        if self.max_message_bytes < 0 or self.index_interval_bytes < 0:
            raise KafkaError(ErrorCode.INVALID_CONFIG, "max.message.bytes, index.interval.bytes < 0")

    @property
    def ack_waits_for_fsync(self) -> bool:
        """True while neither flush knob is set: `acks=all` appends are fsynced before they are acked."""
        return self.flush_messages == LONG_MAX and self.flush_ms == LONG_MAX

    @classmethod
    def from_properties(cls, props: Mapping[str, str], base: LogConfig | None = None) -> LogConfig:
        """Build from Kafka topic-config names (unknown names raise INVALID_CONFIG)."""
        base = base or cls()
        changes: dict[str, Any] = {}
        for name, raw in props.items():
            field = _KAFKA_NAMES.get(name)
            if field is None:
                raise KafkaError(ErrorCode.INVALID_CONFIG, f"unknown log config {name!r}")
            try:
                if field == "cleanup_policy":
                    value: Any = CleanupPolicy(",".join(sorted(p.strip() for p in raw.split(","))))
                elif field == "message_timestamp_type":
                    value = MessageTimestampType(raw)
                elif field == "min_cleanable_dirty_ratio":
                    value = float(raw)
                else:
                    value = int(raw)
            except ValueError as e:
                raise KafkaError(ErrorCode.INVALID_CONFIG, f"bad value {raw!r} for {name}") from e
            changes[field] = value
        return dataclasses.replace(base, **changes)

    def to_properties(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for name, field in _KAFKA_NAMES.items():
            value = getattr(self, field)
            out[name] = value.value if isinstance(value, Enum) else str(value)
        return out


_KAFKA_NAMES: dict[str, str] = {
    "segment.bytes": "segment_bytes",
    "segment.ms": "segment_ms",
    "retention.bytes": "retention_bytes",
    "retention.ms": "retention_ms",
    "cleanup.policy": "cleanup_policy",
    "max.message.bytes": "max_message_bytes",
    "index.interval.bytes": "index_interval_bytes",
    "segment.index.bytes": "segment_index_bytes",
    "flush.messages": "flush_messages",
    "flush.ms": "flush_ms",
    "delete.retention.ms": "delete_retention_ms",
    "message.timestamp.type": "message_timestamp_type",
    "message.timestamp.before.max.ms": "message_timestamp_before_max_ms",
    "message.timestamp.after.max.ms": "message_timestamp_after_max_ms",
    "min.compaction.lag.ms": "min_compaction_lag_ms",
    "min.cleanable.dirty.ratio": "min_cleanable_dirty_ratio",
    "producer.id.expiration.ms": "producer_id_expiration_ms",
}
