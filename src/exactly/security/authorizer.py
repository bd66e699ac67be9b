"""The authorizer (sans-IO): Kafka's StandardAuthorizer rules over an in-memory index of ACL bindings.

`authorize(principal, host, operation, resource_type, name)`:
1. a principal in `super.users` (semicolon-separated `User:alice;User:bob`) is allowed everything;
2. the ACLs that apply to the resource are the LITERAL ones with its name or `*` and the PREFIXED ones whose
   name is a prefix of it; of those, the ones whose principal is the principal or `User:*` and whose host
   is the host or `*` count;
3. a counting DENY for the operation (or ALL) wins; else a counting ALLOW for the operation, ALL, or an
   operation that implies it (READ, WRITE, DELETE, ALTER imply DESCRIBE; ALTER_CONFIGS implies
   DESCRIBE_CONFIGS) allows;
4. if no ACL at all applies to the resource (whatever its principal), `allow.everyone.if.no.acl.found`
   decides (Kafka's default false); otherwise denied.

The index keeps LITERAL bindings by (type, name) and PREFIXED ones by (type, prefix), each by principal,
so one check costs about 2 x (len(name) + 2) dictionary lookups plus the bindings of this principal and
`User:*` on the resource, whatever the number of ACLs. Denials are logged by the caller
(`exactly.security.audit`, see `audit`).

Enabling: `authorizer.class.name` = `org.apache.kafka.metadata.authorizer.StandardAuthorizer` (or the
short names in `AUTHORIZER_CLASS_NAMES`); empty (the default) means no authorizer: everything is allowed.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from exactly.security.acls import (
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AclBinding,
    AclBindingFilter,
    PatternType,
    PermissionType,
)
from exactly.security.operations import SUPPORTED_OPERATIONS, AclOperation, ResourceType, to_bit_field
from exactly.security.principal import KafkaPrincipal

audit = logging.getLogger("exactly.security.audit")

AUTHORIZER_CLASS_NAMES = frozenset(
    {
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "kafka.security.authorizer.AclAuthorizer",
        "exactly",
    }
)

_O = AclOperation
# operation asked -> ALLOW operations that also grant it (Kafka's implied operations)
_GRANTING: dict[AclOperation, frozenset[AclOperation]] = {op: frozenset({op, _O.ALL}) for op in AclOperation}
_GRANTING[_O.DESCRIBE] = frozenset({_O.DESCRIBE, _O.ALL, _O.READ, _O.WRITE, _O.DELETE, _O.ALTER})
_GRANTING[_O.DESCRIBE_CONFIGS] = frozenset({_O.DESCRIBE_CONFIGS, _O.ALL, _O.ALTER_CONFIGS})

_Key = tuple[ResourceType, str]
_ByPrincipal = dict[str, set[AclBinding]]  # ACL principal -> the bindings of one resource pattern


def parse_super_users(text: str) -> frozenset[str]:
    """`super.users`: `User:a;User:b` -> {"User:a", "User:b"} (ValueError on an entry without a type)."""
    out: set[str] = set()
    for item in (part.strip() for part in text.split(";")):
        if item:
            out.add(str(KafkaPrincipal.parse(item)))
    return frozenset(out)


class Authorizer:
    def __init__(
        self,
        super_users: Iterable[str] = (),
        allow_everyone_if_no_acl_found: bool = False,
        acls: Iterable[AclBinding] = (),
    ) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._literal: dict[_Key, _ByPrincipal] = {}
        self._prefixed: dict[_Key, _ByPrincipal] = {}
        self._count_by_type: dict[ResourceType, int] = {}
        self._all: set[AclBinding] = set()
        for acl in acls:
            self.add(acl)

    # --- the ACL set ------------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._all)

    def __contains__(self, acl: AclBinding) -> bool:
        return acl in self._all

    @property
    def acls(self) -> frozenset[AclBinding]:
        return frozenset(self._all)

    def _index(self, acl: AclBinding) -> dict[_Key, _ByPrincipal]:
        return self._prefixed if acl.pattern.pattern_type is PatternType.PREFIXED else self._literal

    def add(self, acl: AclBinding) -> bool:
        if acl in self._all:
            return False
        self._all.add(acl)
        by_principal = self._index(acl).setdefault((acl.pattern.resource_type, acl.pattern.name), {})
        by_principal.setdefault(acl.entry.principal, set()).add(acl)
        t = acl.pattern.resource_type
        self._count_by_type[t] = self._count_by_type.get(t, 0) + 1
        return True

    def remove(self, acl: AclBinding) -> bool:
        if acl not in self._all:
            return False
        self._all.discard(acl)
        index = self._index(acl)
        key = (acl.pattern.resource_type, acl.pattern.name)
        by_principal = index[key]
        by_principal[acl.entry.principal].discard(acl)
        if not by_principal[acl.entry.principal]:
            del by_principal[acl.entry.principal]
        if not by_principal:
            del index[key]
        self._count_by_type[acl.pattern.resource_type] -= 1
        return True

    def matching(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        """The bindings a DescribeAcls/DeleteAcls filter selects, in a stable order."""
        found = [acl for acl in self._all if acl_filter.matches(acl)]
        found.sort(key=_sort_key)
        return found

    # --- decisions ----------------------------------------------------------------------------------------

    def _applying(self, resource_type: ResourceType, name: str) -> list[_ByPrincipal]:
        out: list[_ByPrincipal] = []
        literal = self._literal
        for key in ((resource_type, name), (resource_type, WILDCARD_RESOURCE)):
            found = literal.get(key)
            if found:
                out.append(found)
        prefixed = self._prefixed
        if prefixed:
            for end in range(1, len(name) + 1):
                found = prefixed.get((resource_type, name[:end]))
                if found:
                    out.append(found)
        return out

    def authorize(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        who = str(principal)
        if who in self.super_users:
            return True
        applying = self._applying(resource_type, name)
        if not applying:
            return self.allow_everyone_if_no_acl_found
        granting = _GRANTING[operation]
        allowed = False
        for by_principal in applying:
            for key in (who, WILDCARD_PRINCIPAL):
                for acl in by_principal.get(key, ()):
                    e = acl.entry
                    if e.host != host and e.host != WILDCARD_HOST:
                        continue
                    if e.permission is PermissionType.DENY:
                        if e.operation is operation or e.operation is AclOperation.ALL:
                            return False
                    elif e.operation in granting:
                        allowed = True
        return allowed

    def authorize_by_resource_type(
        self, principal: KafkaPrincipal, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """Whether some resource of `resource_type` may be operated on (Kafka's `authorizeByResourceType`,
        used for "IDEMPOTENT_WRITE on the cluster or WRITE on any topic"): an ALLOW binding that no DENY
        binding covers."""
        who = str(principal)
        if who in self.super_users:
            return True
        if not self._count_by_type.get(resource_type):
            return self.allow_everyone_if_no_acl_found
        granting = _GRANTING[operation]
        allows: list[AclBinding] = []
        denies: list[AclBinding] = []
        for acl in self._all:
            e = acl.entry
            if acl.pattern.resource_type is not resource_type:
                continue
            if e.principal not in (who, WILDCARD_PRINCIPAL) or e.host not in (host, WILDCARD_HOST):
                continue
            if e.permission is PermissionType.DENY:
                if e.operation in (operation, AclOperation.ALL):
                    denies.append(acl)
            elif e.operation in granting:
                allows.append(acl)
        return any(not any(_covers(deny, allow) for deny in denies) for allow in allows)

    def authorized_operations(
        self, principal: KafkaPrincipal, host: str, resource_type: ResourceType, name: str
    ) -> int:
        """The "authorized operations" bit field of a resource for this principal."""
        return to_bit_field(
            op
            for op in SUPPORTED_OPERATIONS[resource_type]
            if self.authorize(principal, host, op, resource_type, name)
        )


def _covers(deny: AclBinding, allow: AclBinding) -> bool:
    """Whether DENY binding `deny` denies every resource ALLOW binding `allow` grants."""
    d, a = deny.pattern, allow.pattern
    if d.pattern_type is PatternType.LITERAL:
        return d.name == WILDCARD_RESOURCE or (a.pattern_type is PatternType.LITERAL and a.name == d.name)
    return a.name.startswith(d.name) and a.name != WILDCARD_RESOURCE


def _sort_key(acl: AclBinding) -> tuple[int, str, int, str, str, int, int]:
    p, e = acl.pattern, acl.entry
    return (
        p.resource_type,
        p.name,
        p.pattern_type,
        e.principal,
        e.host,
        e.operation,
        e.permission,
    )


__all__ = ["AUTHORIZER_CLASS_NAMES", "Authorizer", "audit", "parse_super_users"]
