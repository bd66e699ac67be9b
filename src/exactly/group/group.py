"""What every group type offers the coordinator and the offset manager (Kafka's `Group` interface).

The classic group (`classic.group.ClassicGroup`) and the KIP-848 consumer group
(`consumer.group.ConsumerGroup`) implement it, so that offsets (`offset_manager.py`), listing,
describing and deleting groups (`coordinator.py`) work for both unchanged; a KIP-932 share group would
too.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from typing import Protocol

from exactly.errors import ErrorCode
from exactly.group.offsets import OffsetAndMetadata
from exactly.group.records import CoordinatorRecord
from exactly.protocol.messages.describe_groups import DescribedGroup
from exactly.protocol.messages.list_groups import ListedGroup

__all__ = ["Group", "GroupType", "OffsetExpirationBase"]

# For one committed offset: the wall-clock ms from which offsets.retention.minutes counts.
OffsetExpirationBase = Callable[[OffsetAndMetadata], int]


class GroupType(Enum):
    """ListGroups' group type (KIP-848); the names are Kafka's."""

    CLASSIC = "classic"
    CONSUMER = "consumer"


class Group(Protocol):
    @property
    def group_id(self) -> str: ...

    @property
    def group_type(self) -> GroupType: ...

    @property
    def is_empty(self) -> bool:
        """No members: the group only holds offsets (and may be deleted or expire)."""
        ...

    def validate_offset_commit(
        self, member_id: str, group_instance_id: str | None, generation: int, *, transactional: bool
    ) -> ErrorCode:
        """OffsetCommit / TxnOffsetCommit fencing (KIP-447 for the transactional one)."""
        ...

    def validate_offset_delete(self) -> ErrorCode:
        """Whether OffsetDelete may delete offsets of this group at all (per topic: subscriptions)."""
        ...

    def validate_delete_group(self) -> ErrorCode: ...

    def is_subscribed_to_topic(self, topic: str) -> bool:
        """Offsets of a topic the group consumes are neither deleted (OffsetDelete) nor expired."""
        ...

    def offset_expiration_base(self) -> OffsetExpirationBase | None:
        """From when retention counts for each offset; None: no offset of the group expires now."""
        ...

    def as_listed_group(self) -> ListedGroup: ...

    def describe(self) -> DescribedGroup: ...

    def tombstones(self) -> list[CoordinatorRecord]:
        """The records that delete the group itself (its offsets have their own)."""
        ...
