"""Kafka's ACL operation codes, the operations per resource type, and the 32-bit field Describe APIs use."""

from __future__ import annotations

from exactly.security.operations import (
    OMITTED,
    SUPPORTED_OPERATIONS,
    AclOperation,
    ResourceType,
    authorized_operations,
    from_bit_field,
    to_bit_field,
)


def test_codes_are_kafkas() -> None:
    assert [(op.name, op.value) for op in AclOperation] == [
        ("UNKNOWN", 0),
        ("ANY", 1),
        ("ALL", 2),
        ("READ", 3),
        ("WRITE", 4),
        ("CREATE", 5),
        ("DELETE", 6),
        ("ALTER", 7),
        ("DESCRIBE", 8),
        ("CLUSTER_ACTION", 9),
        ("DESCRIBE_CONFIGS", 10),
        ("ALTER_CONFIGS", 11),
        ("IDEMPOTENT_WRITE", 12),
        ("CREATE_TOKENS", 13),
        ("DESCRIBE_TOKENS", 14),
    ]
    assert (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER) == (2, 3, 4)
    assert OMITTED == -2147483648


def test_every_concrete_resource_type_has_its_operations() -> None:
    concrete = set(ResourceType) - {ResourceType.UNKNOWN, ResourceType.ANY}
    assert set(SUPPORTED_OPERATIONS) == concrete
    for operations in SUPPORTED_OPERATIONS.values():
        assert not operations & {AclOperation.UNKNOWN, AclOperation.ANY, AclOperation.ALL}


def test_bit_fields() -> None:
    # Kafka's Utils.to32BitField: bit n for code n
    assert to_bit_field([AclOperation.READ]) == 0b1000
    assert authorized_operations(ResourceType.TOPIC) == 3576  # READ..DESCRIBE, DESCRIBE_/ALTER_CONFIGS
    assert authorized_operations(ResourceType.CLUSTER) == 8096
    assert authorized_operations(ResourceType.GROUP) == 0b1101_0100_1000
    for resource_type, operations in SUPPORTED_OPERATIONS.items():
        field = authorized_operations(resource_type)
        assert 0 < field < 1 << 31
        assert from_bit_field(field) == operations
    assert from_bit_field(OMITTED) == frozenset()
