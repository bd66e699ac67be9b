"""The transaction coordinator's broker settings (Kafka's names and defaults) and the test-only pause."""

from __future__ import annotations

import pytest

from exactly.broker.config import BrokerConfig, ConfigError


def test_defaults_are_kafkas() -> None:
    config = BrokerConfig()
    assert config.transaction_state_log_num_partitions == 50
    assert config.transaction_state_log_segment_bytes == 104_857_600
    assert config.transaction_max_timeout_ms == 900_000
    assert config.transaction_abort_timed_out_transaction_cleanup_interval_ms == 10_000
    assert config.transactional_id_expiration_ms == 604_800_000
    assert config.transaction_remove_expired_transaction_cleanup_interval_ms == 3_600_000
    assert config.debug_end_txn_pause == ""
    assert config.debug_marker_delay_ms == 0


def test_overrides() -> None:
    config = BrokerConfig.from_properties(
        {
            "transaction.state.log.num.partitions": "5",
            "transaction.max.timeout.ms": "60000",
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
            "transactional.id.expiration.ms": "1000",
            "transaction.remove.expired.transaction.cleanup.interval.ms": "200",
            "exactly.debug.end.txn.pause": "markers-written",
            "exactly.debug.marker.delay.ms": "250",
        }
    )
    assert config.transaction_state_log_num_partitions == 5
    assert config.transaction_max_timeout_ms == 60_000
    assert config.transaction_abort_timed_out_transaction_cleanup_interval_ms == 500
    assert config.transactional_id_expiration_ms == 1000
    assert config.transaction_remove_expired_transaction_cleanup_interval_ms == 200
    assert config.debug_end_txn_pause == "markers-written"
    assert config.debug_marker_delay_ms == 250


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("transaction.state.log.num.partitions", "0", "outside"),
        ("transaction.max.timeout.ms", "soon", "expected an integer"),
        ("exactly.debug.end.txn.pause", "after-lunch", "must be one of"),
        ("exactly.debug.marker.delay.ms", "-1", "outside"),
    ],
)
def test_invalid_values_are_one_line_errors(key: str, value: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        BrokerConfig.from_properties({key: value})
    message = str(info.value)
    assert key in message
    assert expected in message
    assert "\n" not in message
