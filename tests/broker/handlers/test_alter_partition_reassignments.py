"""The one-node checks of AlterPartitionReassignments, with Kafka's codes and messages."""

from __future__ import annotations

import pytest

from exactly.broker.handlers.alter_partition_reassignments import check_reassignment
from exactly.errors import ErrorCode, KafkaError

NODE = 3


def error(partitions: int | None, partition: int, replicas: list[int] | None) -> tuple[ErrorCode, str]:
    with pytest.raises(KafkaError) as e:
        check_reassignment(partitions, "t", partition, replicas, NODE)
    return e.value.code, e.value.message


def test_this_node_alone_is_accepted() -> None:
    check_reassignment(4, "t", 3, [NODE], NODE)


def test_errors() -> None:
    assert error(None, 0, [NODE]) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "Unable to find a topic named t.")
    assert error(4, 4, [NODE]) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "Unable to find partition t:4.")
    assert error(4, -1, [NODE])[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert error(4, 0, None) == (
        ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
        "No partition reassignment is in progress.",
    )
    assert error(4, 0, []) == (
        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        "The manual partition assignment includes an empty replica list.",
    )
    assert error(4, 0, [NODE, 1]) == (
        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        "The manual partition assignment includes broker 1, but no such broker is registered.",
    )
    assert error(4, 0, [NODE, NODE]) == (
        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        f"The manual partition assignment includes the broker {NODE} more than once.",
    )
