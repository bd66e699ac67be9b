"""ACLs and SCRAM credentials in ZooKeeper, in Kafka's layout (ZooKeeper mode: Kafka's `ZkData`,
`AclAuthorizer`, `ScramCredentialUtils`), so that every broker of a cluster applies the same ones. Pure:
paths and the bytes of each znode; the I/O is exactly.broker.security_store.

ACLs, one znode per resource pattern holding every entry of that pattern:

    /kafka-acl/<Type>/<name>                      LITERAL patterns (name `*`: the wildcard)
    /kafka-acl-extended/prefixed/<Type>/<name>    PREFIXED patterns

    {"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"}]}

<Type> is Kafka's resource type name (Topic, Group, Cluster, TransactionalId, DelegationToken, User);
operations are Kafka's names (Read, Write, Create, Delete, Alter, Describe, ClusterAction,
DescribeConfigs, AlterConfigs, IdempotentWrite, CreateTokens, DescribeTokens, All); permission types
Allow and Deny. Reading accepts any case and the upper-case enum spelling (CLUSTER_ACTION) too.

A change of a pattern's znode is announced by a persistent sequential notification, which every broker
watches and answers by reading that pattern's znode again:

    /kafka-acl-changes/acl_changes_<10 digits>             LITERAL: plain text `Topic:orders`
    /kafka-acl-extended-changes/acl_changes_<10 digits>    PREFIXED: {"version":1,"resourceType":"TOPIC",
                                                           "name":"orders-","patternType":"PREFIXED"}

SCRAM credentials live in the user's entity config (next to its quotas, which are kept as they are):

    /config/users/<sanitized user>   {"version":1,"config":{"SCRAM-SHA-256":
                                      "salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=4096"}}

announced by `/config/changes/config_change_<10 digits>` = {"version":2,"entity_path":"users/<sanitized>"}
(exactly.cluster.znodes.ConfigChangeNotification). A sanitized name is Kafka's `Sanitizer`: URL-encoded
(UTF-8), `*` as %2A, a space as %20; only letters, digits, `.`, `-` and `_` stay as they are.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import urllib.parse
from collections.abc import Iterable, Mapping
from typing import Any

from exactly.cluster.metadata import ScramCredential
from exactly.cluster.znodes import CONFIG_CHANGES, ZnodeFormatError, config_path
from exactly.security.acls import AccessControlEntry, PatternType, PermissionType, ResourcePattern
from exactly.security.operations import AclOperation, ResourceType

__all__ = [
    "ACL_CHANGES",
    "ACL_ROOT",
    "CHANGE_PREFIX",
    "EXTENDED_ACL_CHANGES",
    "PREFIXED_ACL_ROOT",
    "RESOURCE_TYPES",
    "SCRAM_MECHANISMS",
    "SECURITY_PATHS",
    "acl_changes_path",
    "acl_path",
    "acl_type_path",
    "change_sequence",
    "decode_acl_change",
    "decode_acls",
    "decode_scram",
    "desanitize",
    "encode_acl_change",
    "encode_acls",
    "encode_scram",
    "operation_name",
    "resource_type_name",
    "sanitize",
    "scram_credentials",
    "user_config_path",
    "user_entity_path",
    "user_of_entity_path",
    "with_scram",
]

ACL_ROOT = "/kafka-acl"
PREFIXED_ACL_ROOT = "/kafka-acl-extended/prefixed"
ACL_CHANGES = "/kafka-acl-changes"
EXTENDED_ACL_CHANGES = "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"
CONFIG_CHANGE_PREFIX = "config_change_"
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
RESOURCE_TYPES = (
    ResourceType.TOPIC,
    ResourceType.GROUP,
    ResourceType.CLUSTER,
    ResourceType.TRANSACTIONAL_ID,
    ResourceType.DELEGATION_TOKEN,
    ResourceType.USER,
)
_PERMISSIONS = (PermissionType.ALLOW, PermissionType.DENY)
_OPERATIONS = tuple(op for op in AclOperation if op not in (AclOperation.UNKNOWN, AclOperation.ANY))


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def _key(text: str) -> str:
    return text.replace("_", "").lower()


def resource_type_name(resource_type: ResourceType) -> str:
    """Kafka's `SecurityUtils.resourceTypeName`: TRANSACTIONAL_ID -> TransactionalId."""
    return _camel(resource_type.name)


def operation_name(operation: AclOperation) -> str:
    """Kafka's `SecurityUtils.operationName`: CLUSTER_ACTION -> ClusterAction."""
    return _camel(operation.name)


_TYPES_BY_KEY = {_key(t.name): t for t in RESOURCE_TYPES}
_OPERATIONS_BY_KEY = {_key(op.name): op for op in _OPERATIONS}
_PERMISSIONS_BY_KEY = {_key(p.name): p for p in _PERMISSIONS}
_PATTERNS_BY_KEY = {_key(p.name): p for p in (PatternType.LITERAL, PatternType.PREFIXED)}


def _lookup(table: Mapping[str, Any], text: object, what: str) -> Any:
    found = table.get(_key(text)) if isinstance(text, str) else None
    if found is None:
        raise ZnodeFormatError(f"{what}: unknown value {text!r}")
    return found


SECURITY_PATHS: tuple[str, ...] = (
    *(f"{ACL_ROOT}/{resource_type_name(t)}" for t in RESOURCE_TYPES),
    *(f"{PREFIXED_ACL_ROOT}/{resource_type_name(t)}" for t in RESOURCE_TYPES),
    ACL_CHANGES,
    EXTENDED_ACL_CHANGES,
    config_path("users", "").rstrip("/"),
    CONFIG_CHANGES,
)
"""What every broker creates at startup if missing (Kafka's AclAuthorizer creates the ACL paths)."""


# ------------------------------------------------------------------------------------------- ACLs


def acl_type_path(pattern_type: PatternType, resource_type: ResourceType) -> str:
    """The parent of every znode of one pattern type and resource type."""
    root = PREFIXED_ACL_ROOT if pattern_type is PatternType.PREFIXED else ACL_ROOT
    if pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED) or resource_type not in RESOURCE_TYPES:
        raise ValueError(f"no ACL znode for {pattern_type.name} {resource_type.name}")
    return f"{root}/{resource_type_name(resource_type)}"


def acl_path(pattern: ResourcePattern) -> str:
    """The znode of one resource pattern (the name as it is: Kafka does not escape it)."""
    return f"{acl_type_path(pattern.pattern_type, pattern.resource_type)}/{pattern.name}"


def acl_changes_path(pattern_type: PatternType) -> str:
    """Where a change of a pattern of this type is announced."""
    return EXTENDED_ACL_CHANGES if pattern_type is PatternType.PREFIXED else ACL_CHANGES


def encode_acls(entries: Iterable[AccessControlEntry]) -> bytes:
    """A pattern's znode (entries sorted, so equal sets give equal bytes)."""
    acls = [
        {
            "principal": e.principal,
            "permissionType": _camel(e.permission.name),
            "operation": operation_name(e.operation),
            "host": e.host,
        }
        for e in sorted(set(entries), key=lambda e: (e.principal, e.host, e.operation, e.permission))
    ]
    return json.dumps({"version": 1, "acls": acls}, separators=(",", ":"), ensure_ascii=False).encode()


def _json(what: str, data: bytes) -> dict[str, Any]:
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise ZnodeFormatError(f"{what}: not UTF-8 JSON ({e})") from None
    if not isinstance(value, dict):
        raise ZnodeFormatError(f"{what}: expected a JSON object")
    return value


def decode_acls(data: bytes) -> frozenset[AccessControlEntry]:
    """A pattern's entries; an empty znode (Kafka may leave one) has none."""
    what = "ACL znode"
    if not data.strip():
        return frozenset()
    value = _json(what, data)
    if value.get("version") != 1:
        raise ZnodeFormatError(f"{what}: only version 1 is supported")
    acls = value.get("acls")
    if not isinstance(acls, list):
        raise ZnodeFormatError(f"{what}: field 'acls' should be a list")
    out = set()
    for i, item in enumerate(acls):
        entry = f"{what} acls[{i}]"
        if not isinstance(item, dict):
            raise ZnodeFormatError(f"{entry}: expected a JSON object")
        principal, host = item.get("principal"), item.get("host")
        if not isinstance(principal, str) or not isinstance(host, str):
            raise ZnodeFormatError(f"{entry}: principal and host should be strings")
        out.add(
            AccessControlEntry(
                principal,
                host,
                _lookup(_OPERATIONS_BY_KEY, item.get("operation"), entry),
                _lookup(_PERMISSIONS_BY_KEY, item.get("permissionType"), entry),
            )
        )
    return frozenset(out)


def encode_acl_change(pattern: ResourcePattern) -> bytes:
    """A change notification's body: `Topic:name` for LITERAL, JSON for PREFIXED."""
    if pattern.pattern_type is PatternType.PREFIXED:
        event = {
            "version": 1,
            "resourceType": pattern.resource_type.name,
            "name": pattern.name,
            "patternType": pattern.pattern_type.name,
        }
        return json.dumps(event, separators=(",", ":"), ensure_ascii=False).encode()
    if pattern.pattern_type is not PatternType.LITERAL:
        raise ValueError(f"no ACL change notification for {pattern.pattern_type.name}")
    return f"{resource_type_name(pattern.resource_type)}:{pattern.name}".encode()


def decode_acl_change(data: bytes, extended: bool) -> ResourcePattern:
    """The pattern a notification names (`extended`: from /kafka-acl-extended-changes)."""
    what = "ACL change notification"
    if not extended:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise ZnodeFormatError(f"{what}: not UTF-8") from None
        kind, sep, name = text.partition(":")
        if not sep:
            raise ZnodeFormatError(f"{what}: expected Type:name, got {text[:60]!r}")
        return ResourcePattern(_lookup(_TYPES_BY_KEY, kind, what), name, PatternType.LITERAL)
    value = _json(what, data)
    if value.get("version") != 1:
        raise ZnodeFormatError(f"{what}: only version 1 is supported")
    named = value.get("name")
    if not isinstance(named, str):
        raise ZnodeFormatError(f"{what}: field 'name' should be a string")
    return ResourcePattern(
        _lookup(_TYPES_BY_KEY, value.get("resourceType"), what),
        named,
        _lookup(_PATTERNS_BY_KEY, value.get("patternType"), what),
    )


_SEQUENCE = re.compile(r"[0-9]{1,19}")


def change_sequence(child: str, prefix: str = CHANGE_PREFIX) -> int | None:
    """The sequence number of a notification znode's name (`acl_changes_0000000007` -> 7), else None."""
    if not child.startswith(prefix):
        return None
    digits = child[len(prefix) :]
    return int(digits) if _SEQUENCE.fullmatch(digits) else None


# ------------------------------------------------------------------------------------------- SCRAM

_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_")


def sanitize(name: str) -> str:
    """Kafka's `Sanitizer.sanitize` (a user or client id as a znode name)."""
    return "".join(c if c in _SAFE else "".join(f"%{b:02X}" for b in c.encode()) for c in name)


def desanitize(name: str) -> str:
    """Kafka's `Sanitizer.desanitize`."""
    return urllib.parse.unquote(name, errors="strict")


def user_config_path(user: str) -> str:
    return config_path("users", sanitize(user))


def user_entity_path(user: str) -> str:
    """The `entity_path` of a user's config change notification."""
    return f"users/{sanitize(user)}"


def user_of_entity_path(entity_path: str) -> str | None:
    """The user whose own config a notification announces (None for other entities, user+client ones,
    and the <default> user)."""
    kind, sep, rest = entity_path.partition("/")
    if kind != "users" or not sep or not rest or "/" in rest or rest == "<default>":
        return None
    return desanitize(rest)


def encode_scram(credential: ScramCredential) -> str:
    """Kafka's `ScramCredentialUtils.credentialToString`."""
    b64 = base64.b64encode
    return (
        f"salt={b64(credential.salt).decode()},stored_key={b64(credential.stored_key).decode()},"
        f"server_key={b64(credential.server_key).decode()},iterations={credential.iterations}"
    )


def decode_scram(text: str) -> ScramCredential:
    """Kafka's `ScramCredentialUtils.credentialFromString` (ZnodeFormatError when malformed)."""
    fields: dict[str, str] = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if not sep:
            raise ZnodeFormatError(f"SCRAM credential: expected key=value, got {part[:40]!r}")
        fields[key.strip()] = value.strip()
    try:
        return ScramCredential(
            base64.b64decode(fields["salt"], validate=True),
            int(fields["iterations"]),
            base64.b64decode(fields["stored_key"], validate=True),
            base64.b64decode(fields["server_key"], validate=True),
        )
    except KeyError as e:
        raise ZnodeFormatError(f"SCRAM credential: missing {e.args[0]}") from None
    except (ValueError, binascii.Error) as e:
        raise ZnodeFormatError(f"SCRAM credential: {e}") from None


def scram_credentials(config: Mapping[str, str]) -> dict[str, ScramCredential]:
    """The SCRAM credentials of a user's entity config, by mechanism (other keys ignored)."""
    return {m: decode_scram(config[m]) for m in SCRAM_MECHANISMS if m in config}


def with_scram(
    config: Mapping[str, str], mechanism: str, credential: ScramCredential | None
) -> dict[str, str]:
    """`config` with `mechanism`'s credential set (None: removed); its other keys (quotas) kept."""
    out = dict(config)
    if credential is None:
        out.pop(mechanism, None)
    else:
        out[mechanism] = encode_scram(credential)
    return out
