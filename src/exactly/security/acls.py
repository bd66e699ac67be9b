"""ACL values as Kafka has them: bindings (a resource pattern + an access control entry) and the filters
DescribeAcls and DeleteAcls select them with (Kafka's `AclBinding`, `ResourcePattern`,
`AccessControlEntry`, `AclBindingFilter` and their `matches`).

A pattern is (resource type, name, LITERAL | PREFIXED); a LITERAL name `*` matches every resource of its
type. An entry is (principal `Type:name`, host, operation, ALLOW | DENY); principal `User:*` and host `*`
match any. Filters use ANY for "every value" and null names for "any name"; a filter's pattern type MATCH
selects every pattern that would apply to the named resource (literal, `*` and prefixes), ANY selects
patterns of any type whose name is exactly the one given.

On the wire (CreateAcls, DescribeAcls, DeleteAcls) every enum is its INT8 code below; in the cluster
metadata log a binding is written as `{"type": 2, "name": "t", "pattern": 3, "principal": "User:a",
"host": "*", "operation": 3, "permission": 3}` (see exactly.cluster.metadata).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Any, TypeVar

from exactly.errors import ErrorCode, KafkaError
from exactly.security.operations import AclOperation, ResourceType

WILDCARD_RESOURCE = "*"
WILDCARD_PRINCIPAL = "User:*"
WILDCARD_HOST = "*"
CLUSTER_NAME = "kafka-cluster"  # the only name of the CLUSTER resource
_E = TypeVar("_E", bound=IntEnum)


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class PermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL

    def __str__(self) -> str:
        return f"{self.resource_type.name}:{self.pattern_type.name}:{self.name}"


@dataclass(frozen=True, slots=True)
class AccessControlEntry:
    principal: str
    host: str
    operation: AclOperation
    permission: PermissionType


@dataclass(frozen=True, slots=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry

    def __str__(self) -> str:
        e = self.entry
        return f"{e.permission.name} {e.principal} from {e.host} {e.operation.name} on {self.pattern}"

    def to_json(self) -> dict[str, Any]:
        return {
            "type": int(self.pattern.resource_type),
            "name": self.pattern.name,
            "pattern": int(self.pattern.pattern_type),
            "principal": self.entry.principal,
            "host": self.entry.host,
            "operation": int(self.entry.operation),
            "permission": int(self.entry.permission),
        }

    @classmethod
    def from_json(cls, record: dict[str, Any]) -> AclBinding:
        return cls(
            ResourcePattern(
                ResourceType(int(record["type"])), str(record["name"]), PatternType(int(record["pattern"]))
            ),
            AccessControlEntry(
                str(record["principal"]),
                str(record["host"]),
                AclOperation(int(record["operation"])),
                PermissionType(int(record["permission"])),
            ),
        )


def _enum(kind: type[_E], code: int) -> _E:
    try:
        return kind(code)
    except ValueError:
        return kind(0)  # UNKNOWN


def binding(
    resource_type: int,
    name: str,
    pattern_type: int,
    principal: str,
    host: str,
    operation: int,
    permission: int,
) -> AclBinding:
    """A binding from wire codes (unknown codes become UNKNOWN, refused by `validate_new`)."""
    return AclBinding(
        ResourcePattern(_enum(ResourceType, resource_type), name, _enum(PatternType, pattern_type)),
        AccessControlEntry(
            principal, host, _enum(AclOperation, operation), _enum(PermissionType, permission)
        ),
    )


def validate_new(acl: AclBinding) -> None:
    """Kafka's checks of a binding to create (AclControlManager.validateNewAcl, AclApis): KafkaError
    INVALID_REQUEST with Kafka's message."""
    p, e = acl.pattern, acl.entry

    def bad(message: str) -> KafkaError:
        return KafkaError(ErrorCode.INVALID_REQUEST, message)

    if p.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
        raise bad(f"Invalid resourceType {p.resource_type.name}")
    if p.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise bad(f"Invalid patternType {p.pattern_type.name}")
    if e.operation in (AclOperation.ANY, AclOperation.UNKNOWN):
        raise bad(f"Invalid operation {e.operation.name}")
    if e.permission not in (PermissionType.ALLOW, PermissionType.DENY):
        raise bad(f"Invalid permissionType {e.permission.name}")
    if not p.name:
        raise bad("Resource name should not be empty")
    if p.resource_type is ResourceType.CLUSTER and p.name != CLUSTER_NAME:
        raise bad(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    kind, sep, who = e.principal.partition(":")
    if not sep or not kind or not who:
        raise bad(
            f"Could not parse principal from `{e.principal}` (no colon is present separating the "
            "principal type from the principal name)"
        )


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """What DescribeAcls/DeleteAcls select: None (null on the wire) and ANY match every value."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: PermissionType = PermissionType.ANY

    @classmethod
    def from_wire(
        cls,
        resource_type: int,
        name: str | None,
        pattern_type: int,
        principal: str | None,
        host: str | None,
        operation: int,
        permission: int,
    ) -> AclBindingFilter:
        return cls(
            _enum(ResourceType, resource_type),
            name,
            _enum(PatternType, pattern_type),
            principal,
            host,
            _enum(AclOperation, operation),
            _enum(PermissionType, permission),
        )

    def find_indefinite(self) -> str | None:
        """Why this filter cannot be used (Kafka: a field is UNKNOWN), or None."""
        for field_name, value in (
            ("resourceType", self.resource_type),
            ("patternType", self.pattern_type),
            ("operation", self.operation),
            ("permissionType", self.permission),
        ):
            if value == 0:
                return f"Filter contained an UNKNOWN {field_name}"
        return None

    def matches_pattern(self, pattern: ResourcePattern) -> bool:
        if self.resource_type is not ResourceType.ANY and self.resource_type is not pattern.resource_type:
            return False
        if (
            self.pattern_type not in (PatternType.ANY, PatternType.MATCH)
            and self.pattern_type is not pattern.pattern_type
        ):
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, pattern.pattern_type):
            return self.name == pattern.name
        if pattern.pattern_type is PatternType.LITERAL:
            return self.name == pattern.name or pattern.name == WILDCARD_RESOURCE
        return self.name.startswith(pattern.name)

    def matches_entry(self, entry: AccessControlEntry) -> bool:
        return (
            (self.principal is None or self.principal == entry.principal)
            and (self.host is None or self.host == entry.host)
            and (self.operation is AclOperation.ANY or self.operation is entry.operation)
            and (self.permission is PermissionType.ANY or self.permission is entry.permission)
        )

    def matches(self, acl: AclBinding) -> bool:
        return self.matches_pattern(acl.pattern) and self.matches_entry(acl.entry)


__all__ = [
    "CLUSTER_NAME",
    "WILDCARD_HOST",
    "WILDCARD_PRINCIPAL",
    "WILDCARD_RESOURCE",
    "AccessControlEntry",
    "AclBinding",
    "AclBindingFilter",
    "PatternType",
    "PermissionType",
    "ResourcePattern",
    "binding",
    "validate_new",
]
