"""Client quota entities and their configured values, as Kafka's ClientQuotaControlManager and
ClientQuotasImage handle them: validation of an alteration, the DescribeClientQuotas filter, and which
entity's quota applies to a (user, client-id) pair.

An entity is a set of (type, name) pairs over the types `user`, `client-id` and `ip`; a name of None is
that type's default (`<default>` in Kafka's tools). Valid combinations: user, client-id, user+client-id,
ip alone. Values are doubles; the byte rates are integral (Kafka declares them LONG).
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import IntEnum, StrEnum

from exactly.errors import ErrorCode, KafkaError

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"
ENTITY_TYPES = (USER, CLIENT_ID, IP)

# The entity as stored: its (type, name) pairs sorted by type.
QuotaEntity = tuple[tuple[str, str | None], ...]


class QuotaKey(StrEnum):
    PRODUCER_BYTE_RATE = "producer_byte_rate"
    CONSUMER_BYTE_RATE = "consumer_byte_rate"
    REQUEST_PERCENTAGE = "request_percentage"
    CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
    IP_CONNECTION_RATE = "connection_creation_rate"


# Kafka's QuotaConfig key types: integral (LONG/INT) or DOUBLE.
_INTEGRAL = {QuotaKey.PRODUCER_BYTE_RATE, QuotaKey.CONSUMER_BYTE_RATE, QuotaKey.IP_CONNECTION_RATE}
_CLIENT_KEYS = frozenset(
    {
        QuotaKey.PRODUCER_BYTE_RATE,
        QuotaKey.CONSUMER_BYTE_RATE,
        QuotaKey.REQUEST_PERCENTAGE,
        QuotaKey.CONTROLLER_MUTATION_RATE,
    }
)
_IP_KEYS = frozenset({QuotaKey.IP_CONNECTION_RATE})
_INT_MAX = 2**31 - 1
_LONG_MAX = 2**63 - 1


class MatchType(IntEnum):
    """DescribeClientQuotas filter component match types."""

    EXACT = 0
    DEFAULT = 1
    SPECIFIED = 2


@dataclass(frozen=True, slots=True)
class FilterComponent:
    entity_type: str
    match_type: int
    match: str | None


def make_entity(pairs: Iterable[tuple[str, str | None]]) -> QuotaEntity:
    """The stored form of a request's entity (a type named twice keeps its last name, as Kafka's map)."""
    return tuple(sorted(dict(pairs).items()))


def entity_text(entity: QuotaEntity) -> str:
    """Java's rendering of a ClientQuotaEntity (a default name prints as null)."""
    names = ", ".join(f"{t}={'null' if n is None else n}" for t, n in entity)
    return "ClientQuotaEntity(entries={" + names + "})"


def validate_alteration(
    pairs: list[tuple[str, str | None]], ops: list[tuple[str, float | None]]
) -> dict[str, float | None]:
    """The key -> new value (None = remove) map of one AlterClientQuotas entry, or KafkaError
    INVALID_REQUEST with Kafka's message. A type named twice keeps its last name (Kafka builds a map)."""
    changes: dict[str, float | None] = {}
    for key, value in ops:
        if key in changes:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST,
                f"Duplicate quota key {key} not updating quota for this entity "
                f"{entity_text(make_entity(pairs))}",
            )
        changes[key] = value
    seen = dict(pairs)
    if not seen:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Invalid empty client quota entity")
    for entity_type, name in seen.items():
        if entity_type not in ENTITY_TYPES:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unhandled client quota entity type: {entity_type}")
        if name is not None and not name:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Empty {entity_type} not supported")
    if IP in seen:
        if USER in seen or CLIENT_ID in seen:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST,
                "Invalid quota entity combination, IP quota entities cannot be combined with User or "
                "ClientId",
            )
        ip = seen[IP]
        if ip is not None and not _is_ip(ip):
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"{ip} is not a valid IP or resolvable host.")
        valid_keys = _IP_KEYS
    else:
        valid_keys = _CLIENT_KEYS
    for key, value in changes.items():
        if value is not None:
            _check_value(valid_keys, key, value)
    return changes


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _check_value(valid_keys: frozenset[QuotaKey], key: str, value: float) -> None:
    if key not in {k.value for k in valid_keys}:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Invalid configuration key {key}")
    if not math.isfinite(value) or value <= 0.0:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Quota {key} must be greater than 0")
    if QuotaKey(key) in _INTEGRAL:
        limit, kind = (_INT_MAX, "an INT") if key == QuotaKey.IP_CONNECTION_RATE else (_LONG_MAX, "a LONG")
        if value > limit:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Proposed value for {key} is too large for {kind}.")
        if abs(value % 1.0) > 1e-16:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Quota {key} had a non-integer value {value}")


def describe(
    quotas: Mapping[QuotaEntity, Mapping[str, float]], components: list[FilterComponent], strict: bool
) -> list[tuple[QuotaEntity, dict[str, float]]]:
    """The entities matching a DescribeClientQuotas filter (KafkaError INVALID_REQUEST or
    UNSUPPORTED_VERSION for a filter Kafka refuses), in entity order."""
    exact: dict[str, str | None] = {}
    specified: set[str] = set()
    for c in components:
        if not c.entity_type:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Invalid empty entity type.")
        if c.entity_type in exact or c.entity_type in specified:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST,
                f"Entity type {c.entity_type} cannot appear more than once in the filter.",
            )
        if c.entity_type not in ENTITY_TYPES:
            raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, f"Unsupported entity type {c.entity_type}")
        if c.match_type == MatchType.EXACT:
            if c.match is None:
                raise KafkaError(
                    ErrorCode.INVALID_REQUEST,
                    "Request specified MATCH_TYPE_EXACT, but set match string to null.",
                )
            exact[c.entity_type] = c.match
        elif c.match_type == MatchType.DEFAULT:
            if c.match is not None:
                raise KafkaError(
                    ErrorCode.INVALID_REQUEST,
                    "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.",
                )
            exact[c.entity_type] = None
        elif c.match_type == MatchType.SPECIFIED:
            if c.match is not None:
                raise KafkaError(
                    ErrorCode.INVALID_REQUEST,
                    "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.",
                )
            specified.add(c.entity_type)
        else:
            raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, f"Unknown match type {c.match_type}")
    used = set(exact) | specified
    if IP in used and (USER in used or CLIENT_ID in used):
        raise KafkaError(
            ErrorCode.INVALID_REQUEST,
            "Invalid entity filter component combination. IP filter component should not be used with "
            "user or clientId filter component.",
        )
    out = []
    for entity, values in sorted(quotas.items(), key=lambda item: _sort_key(item[0])):
        names = dict(entity)
        if strict and len(names) != len(used):
            continue
        if any(t not in names or names[t] != name for t, name in exact.items()):
            continue
        if any(names.get(t) is None for t in specified):
            continue
        out.append((entity, dict(values)))
    return out


def _sort_key(entity: QuotaEntity) -> tuple[tuple[str, bool, str], ...]:
    return tuple((t, n is not None, n or "") for t, n in entity)


@dataclass(frozen=True, slots=True)
class ResolvedQuota:
    """The quota that applies to a client, and the (user, client-id) its usage is counted under:
    a default quota still counts each user / client-id separately, as Kafka's metric tags do."""

    bound: float
    user_tag: str
    client_tag: str


def resolve(
    quotas: Mapping[QuotaEntity, Mapping[str, float]], key: str, user: str, client_id: str
) -> ResolvedQuota | None:
    """Kafka's precedence (DefaultQuotaCallback): /users/u/clients/c, /users/u/clients/<default>,
    /users/u, /users/<default>/clients/c, /users/<default>/clients/<default>, /users/<default>,
    /clients/c, /clients/<default>. None when no level sets `key`."""
    levels: list[tuple[QuotaEntity, str, str]] = [
        (((CLIENT_ID, client_id), (USER, user)), user, client_id),
        (((CLIENT_ID, None), (USER, user)), user, client_id),
        (((USER, user),), user, ""),
        (((CLIENT_ID, client_id), (USER, None)), user, client_id),
        (((CLIENT_ID, None), (USER, None)), user, client_id),
        (((USER, None),), user, ""),
        (((CLIENT_ID, client_id),), "", client_id),
        (((CLIENT_ID, None),), "", client_id),
    ]
    for entity, user_tag, client_tag in levels:
        values = quotas.get(entity)
        if values is not None and key in values:
            return ResolvedQuota(values[key], user_tag, client_tag)
    return None
