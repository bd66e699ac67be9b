"""Group coordinator settings, with Kafka's broker config names and defaults."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["GroupConfig"]


@dataclass(frozen=True, slots=True)
class GroupConfig:
    num_partitions: int = 50  # offsets.topic.num.partitions
    offsets_retention_ms: int = 10080 * 60_000  # offsets.retention.minutes (7 days)
    min_session_timeout_ms: int = 6000  # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1_800_000  # group.max.session.timeout.ms
    initial_rebalance_delay_ms: int = 3000  # group.initial.rebalance.delay.ms
    new_member_join_timeout_ms: int = 300_000  # Kafka's classic new-member join timeout (5 minutes)
    max_metadata_bytes: int = 4096  # offset.metadata.max.bytes
