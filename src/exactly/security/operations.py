"""ACL operations, resource types, and which operations each resource type has (Kafka's `AclOperation`,
`ResourceType` and `AclEntry.supportedOperations`).

Describe APIs report "authorized operations" as a 32-bit field, bit n set for operation code n (Kafka's
`Utils.to32BitField`): Metadata v8+ per topic (`include_topic_authorized_operations`) and, v8-10, for the
cluster; DescribeCluster for the cluster; DescribeGroups v3+ per group. A response whose request did not
ask carries `OMITTED` (INT32_MIN, the schema default). With no authorizer configured every operation the
resource supports is authorized, as in Kafka's `AuthHelper.authorizedOperations`; with one, the fields
come from `Authorizer.authorized_operations` (exactly.broker.guard.operations_field).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import IntEnum
from types import MappingProxyType

OMITTED = -(1 << 31)  # "not asked": the schema default of every *AuthorizedOperations field


class AclOperation(IntEnum):
    """Kafka's AclOperation codes (wire values in ACL and Describe APIs)."""

    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class ResourceType(IntEnum):
    """Kafka's ResourceType codes (ACL resources; not DescribeConfigs' ConfigResource.Type)."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


_O = AclOperation
SUPPORTED_OPERATIONS: Mapping[ResourceType, frozenset[AclOperation]] = MappingProxyType(
    {
        ResourceType.TOPIC: frozenset(
            {
                _O.READ,
                _O.WRITE,
                _O.CREATE,
                _O.DESCRIBE,
                _O.DELETE,
                _O.ALTER,
                _O.DESCRIBE_CONFIGS,
                _O.ALTER_CONFIGS,
            }
        ),
        # DESCRIBE_CONFIGS / ALTER_CONFIGS: group configs (KIP-848), in Kafka's set since 4.0
        ResourceType.GROUP: frozenset(
            {_O.READ, _O.DESCRIBE, _O.DELETE, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS}
        ),
        ResourceType.CLUSTER: frozenset(
            {
                _O.CREATE,
                _O.CLUSTER_ACTION,
                _O.DESCRIBE_CONFIGS,
                _O.ALTER_CONFIGS,
                _O.IDEMPOTENT_WRITE,
                _O.ALTER,
                _O.DESCRIBE,
            }
        ),
        ResourceType.TRANSACTIONAL_ID: frozenset({_O.DESCRIBE, _O.WRITE}),
        ResourceType.DELEGATION_TOKEN: frozenset({_O.DESCRIBE}),
        ResourceType.USER: frozenset({_O.CREATE_TOKENS, _O.DESCRIBE_TOKENS}),
    }
)


def to_bit_field(operations: Iterable[AclOperation]) -> int:
    """Bit n set for operation code n (every code is below 31, so the result is a positive int32)."""
    field = 0
    for operation in operations:
        field |= 1 << operation
    return field


def from_bit_field(field: int) -> frozenset[AclOperation]:
    """The operations of a bit field; OMITTED (or any negative field) means none were reported."""
    if field < 0:
        return frozenset()
    return frozenset(op for op in AclOperation if field & (1 << op))


def authorized_operations(resource_type: ResourceType) -> int:
    """The authorized-operations field for a resource of `resource_type`, with no authorizer configured:
    every operation the type supports."""
    return to_bit_field(SUPPORTED_OPERATIONS[resource_type])


__all__ = [
    "OMITTED",
    "SUPPORTED_OPERATIONS",
    "AclOperation",
    "ResourceType",
    "authorized_operations",
    "from_bit_field",
    "to_bit_field",
]
