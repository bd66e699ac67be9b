"""Group coordinator settings, with Kafka's broker config names and defaults."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

__all__ = ["GroupConfig", "MigrationPolicy"]


class MigrationPolicy(Enum):
    """group.consumer.migration.policy: which conversions between classic and consumer groups happen."""

    DISABLED = "disabled"
    UPGRADE = "upgrade"
    DOWNGRADE = "downgrade"
    BIDIRECTIONAL = "bidirectional"

    @property
    def upgrades(self) -> bool:
        return self in (MigrationPolicy.UPGRADE, MigrationPolicy.BIDIRECTIONAL)

    @property
    def downgrades(self) -> bool:
        return self in (MigrationPolicy.DOWNGRADE, MigrationPolicy.BIDIRECTIONAL)


@dataclass(frozen=True, slots=True)
class GroupConfig:
    num_partitions: int = 50  # offsets.topic.num.partitions
    offsets_retention_ms: int = 10080 * 60_000  # offsets.retention.minutes (7 days)
    min_session_timeout_ms: int = 6000  # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1_800_000  # group.max.session.timeout.ms
    initial_rebalance_delay_ms: int = 3000  # group.initial.rebalance.delay.ms
    new_member_join_timeout_ms: int = 300_000  # Kafka's classic new-member join timeout (5 minutes)
    max_metadata_bytes: int = 4096  # offset.metadata.max.bytes
    # KIP-848 consumer groups (group.consumer.*)
    consumer_session_timeout_ms: int = 45_000  # group.consumer.session.timeout.ms
    consumer_heartbeat_interval_ms: int = 5_000  # group.consumer.heartbeat.interval.ms
    consumer_max_size: int = 2**31 - 1  # group.consumer.max.size
    consumer_assignors: tuple[str, ...] = ("uniform", "range")  # group.consumer.assignors (first: default)
    consumer_migration_policy: MigrationPolicy = MigrationPolicy.BIDIRECTIONAL
