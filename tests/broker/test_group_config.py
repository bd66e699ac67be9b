"""The group coordinator's broker settings (Kafka's names and defaults)."""

from __future__ import annotations

import pytest

from exactly.broker.config import BrokerConfig, ConfigError


def test_defaults_are_kafkas() -> None:
    config = BrokerConfig()
    assert config.offsets_topic_num_partitions == 50
    assert config.offsets_topic_segment_bytes == 104_857_600
    assert config.offsets_retention_ms == 10080 * 60_000
    assert config.offsets_retention_check_interval_ms == 600_000
    assert (config.group_min_session_timeout_ms, config.group_max_session_timeout_ms) == (6000, 1_800_000)
    assert config.group_initial_rebalance_delay_ms == 3000


def test_overrides() -> None:
    config = BrokerConfig.from_properties(
        {
            "offsets.topic.num.partitions": "3",
            "offsets.retention.minutes": "2",
            "offsets.retention.check.interval.ms": "1000",
            "group.initial.rebalance.delay.ms": "0",
            "group.min.session.timeout.ms": "100",
            "group.max.session.timeout.ms": "60000",
            "offsets.topic.segment.bytes": "1048576",
        }
    )
    assert config.offsets_topic_num_partitions == 3
    assert config.offsets_retention_ms == 120_000
    assert config.offsets_retention_check_interval_ms == 1000
    assert config.group_initial_rebalance_delay_ms == 0
    assert (config.group_min_session_timeout_ms, config.group_max_session_timeout_ms) == (100, 60_000)
    assert config.offsets_topic_segment_bytes == 1_048_576


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("offsets.topic.num.partitions", "0"),
        ("offsets.retention.minutes", "-1"),
        ("group.initial.rebalance.delay.ms", "soon"),
    ],
)
def test_bad_values_are_one_line_errors(key: str, value: str) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        BrokerConfig.from_properties({key: value})
