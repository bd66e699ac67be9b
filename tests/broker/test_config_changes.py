"""IncrementalAlterConfigs operations on a resource's config set (Kafka's `ConfigAdminManager` rules)."""

from __future__ import annotations

import pytest

from exactly.broker.config_changes import (
    RESOURCE_BROKER,
    RESOURCE_TOPIC,
    AlterOp,
    apply_incremental,
    check_unique,
)
from exactly.errors import ErrorCode, KafkaError


def test_set_delete_and_list_operations() -> None:
    configs = {"retention.ms": "1"}
    apply_incremental(RESOURCE_TOPIC, configs, "segment.ms", AlterOp.SET, "100")
    apply_incremental(RESOURCE_TOPIC, configs, "retention.ms", AlterOp.DELETE, None)
    apply_incremental(RESOURCE_TOPIC, configs, "no.such", AlterOp.DELETE, None)  # nothing to delete
    assert configs == {"segment.ms": "100"}
    # APPEND starts from the config's own default ("delete"), keeps order, adds no duplicate
    apply_incremental(RESOURCE_TOPIC, configs, "cleanup.policy", AlterOp.APPEND, "compact, delete")
    assert configs["cleanup.policy"] == "delete,compact"
    apply_incremental(RESOURCE_TOPIC, configs, "cleanup.policy", AlterOp.SUBTRACT, "delete")
    assert configs["cleanup.policy"] == "compact"
    apply_incremental(RESOURCE_TOPIC, configs, "cleanup.policy", AlterOp.SUBTRACT, "compact")
    assert configs["cleanup.policy"] == ""  # the empty list
    apply_incremental(RESOURCE_BROKER, configs, "log.cleanup.policy", AlterOp.APPEND, "compact")
    assert configs["log.cleanup.policy"] == "delete,compact"


@pytest.mark.parametrize(
    ("name", "op", "value", "code", "message"),
    [
        (
            "retention.ms",
            AlterOp.APPEND,
            "5",
            ErrorCode.INVALID_CONFIG,
            "append is not allowed for config key",
        ),
        ("retention.ms", AlterOp.SUBTRACT, "5", ErrorCode.INVALID_CONFIG, "subtract is not allowed"),
        ("no.such", AlterOp.APPEND, "5", ErrorCode.INVALID_CONFIG, "append is not allowed"),
        ("retention.ms", AlterOp.SET, None, ErrorCode.INVALID_REQUEST, "Null value not supported"),
        ("retention.ms", 7, "5", ErrorCode.INVALID_REQUEST, "Unknown config operation 7"),
    ],
)
def test_refused_operations(name: str, op: int, value: str | None, code: ErrorCode, message: str) -> None:
    configs = {"retention.ms": "1"}
    with pytest.raises(KafkaError) as info:
        apply_incremental(RESOURCE_TOPIC, configs, name, op, value)
    assert info.value.code == code
    assert message in info.value.message
    assert configs == {"retention.ms": "1"}


def test_duplicate_keys_are_an_invalid_request() -> None:
    check_unique(["a", "b"])
    with pytest.raises(KafkaError) as info:
        check_unique(["a", "b", "a"])
    assert info.value.code == ErrorCode.INVALID_REQUEST
