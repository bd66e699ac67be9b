"""Client quotas and dynamic broker configs in ZooKeeper, in Kafka's layout (ZooKeeper mode: Kafka's
`ZkData.ConfigEntityZNode`, `ConfigEntityName`, `ZkAdminManager.alterClientQuotas` and
`AdminZkClient.changeConfigs`), so that every broker of a cluster applies the same ones. Pure: paths, the
entity of a change notification and the config values; the I/O is exactly.broker.config_store.

Client quotas, one entity config znode per entity (user and client-id names sanitized with Kafka's
`Sanitizer`, exactly.cluster.security_znodes.sanitize; a default name is `<default>`; ips as they are):

    /config/users/<user>                        user (shares its znode with the user's SCRAM credentials)
    /config/users/<user>/clients/<client-id>    user + client-id
    /config/clients/<client-id>                 client-id
    /config/ips/<ip>                            ip

    {"version":1,"config":{"producer_byte_rate":"1024","request_percentage":"50.0"}}

Values are strings: the integral keys (producer_byte_rate, consumer_byte_rate: Java longs;
connection_creation_rate: an int) as decimal integers, the double keys (request_percentage,
controller_mutation_rate) as Java's `Double.toString` writes them (`50.0`, `1.0E7`). Keys that are not
quota keys (the SCRAM credentials) are kept when quotas are written and ignored when they are read.

Dynamic broker configs, the complete run-time set of one broker or of the cluster-wide default:

    /config/brokers/<id>          {"version":1,"config":{"log.cleaner.backoff.ms":"1000"}}
    /config/brokers/<default>

A change is announced by `/config/changes/config_change_<10 digits>` = {"version":2,"entity_path":E}
(exactly.cluster.znodes.ConfigChangeNotification) where E is the znode's path below /config:
`users/alice`, `users/alice/clients/c`, `users/<default>/clients/<default>`, `clients/c`, `ips/1.2.3.4`,
`brokers/1`, `brokers/<default>`.
"""

from __future__ import annotations

import decimal
import math
from collections.abc import Mapping

from exactly.cluster.security_znodes import desanitize, sanitize
from exactly.cluster.znodes import ZnodeFormatError, config_path
from exactly.quotas.entities import CLIENT_ID, IP, USER, QuotaEntity, QuotaKey, make_entity

__all__ = [
    "DEFAULT",
    "QUOTA_KEYS",
    "broker_config_path",
    "broker_entity_path",
    "broker_resource_of",
    "decode_quota_values",
    "encode_quota_value",
    "java_double",
    "quota_config_path",
    "quota_entity_of",
    "quota_entity_path",
    "with_quotas",
]

DEFAULT = "<default>"
"""Kafka's ConfigEntityName.Default: the default user, client id, ip or broker."""

QUOTA_KEYS = frozenset(k.value for k in QuotaKey)
_INTEGRAL = frozenset(
    {QuotaKey.PRODUCER_BYTE_RATE.value, QuotaKey.CONSUMER_BYTE_RATE.value, QuotaKey.IP_CONNECTION_RATE.value}
)


# ----------------------------------------------------------------------------------------- quota paths


def _name(name: str | None) -> str:
    return DEFAULT if name is None else sanitize(name)


def _unname(name: str) -> str | None:
    if not name:
        raise ZnodeFormatError("config entity path: an empty entity name")
    try:
        return None if name == DEFAULT else desanitize(name)
    except UnicodeDecodeError:
        raise ZnodeFormatError(f"config entity path: {name!r} is not a sanitized name") from None


def quota_entity_path(entity: QuotaEntity) -> str:
    """The entity's path below /config, which is also its change notification's `entity_path`
    (ValueError for a combination Kafka does not store: ip with user or client-id, or no entity)."""
    names = dict(entity)
    if set(names) - {USER, CLIENT_ID, IP} or not names:
        raise ValueError(f"no quota znode for {entity!r}")
    if IP in names:
        if len(names) != 1:
            raise ValueError(f"no quota znode for {entity!r}")
        ip = names[IP]
        return f"ips/{DEFAULT if ip is None else ip}"
    if USER in names and CLIENT_ID in names:
        return f"users/{_name(names[USER])}/clients/{_name(names[CLIENT_ID])}"
    if USER in names:
        return f"users/{_name(names[USER])}"
    return f"clients/{_name(names[CLIENT_ID])}"


def quota_config_path(entity: QuotaEntity) -> str:
    """The entity's config znode."""
    kind, _, rest = quota_entity_path(entity).partition("/")
    return config_path(kind, rest)


def quota_entity_of(entity_path: str) -> QuotaEntity | None:
    """The quota entity a notification's `entity_path` names; None for other entity types (topics,
    brokers). ZnodeFormatError for a malformed user, client or ip path."""
    parts = entity_path.split("/")
    kind = parts[0]
    if kind not in ("users", "clients", "ips"):
        return None
    if kind == "users" and len(parts) == 4 and parts[2] == "clients":
        return make_entity([(USER, _unname(parts[1])), (CLIENT_ID, _unname(parts[3]))])
    if len(parts) != 2:
        raise ZnodeFormatError(f"config entity path: cannot read {entity_path[:80]!r}")
    if kind == "ips":
        if not parts[1]:
            raise ZnodeFormatError("config entity path: an empty ip")
        return make_entity([(IP, None if parts[1] == DEFAULT else parts[1])])
    return make_entity([(USER if kind == "users" else CLIENT_ID, _unname(parts[1]))])


# ---------------------------------------------------------------------------------------- quota values


def java_double(value: float) -> str:
    """Java's `Double.toString` of a finite double: plain between 10^-3 and 10^7, else computerized
    scientific notation (`1.0E7`, `1.5E-4`); always a digit after the point."""
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    if 1e-3 <= abs(value) < 1e7:
        text = repr(value)
        return text if "e" not in text else format(decimal.Decimal(text), "f")
    sign, digits, exponent = decimal.Decimal(repr(value)).normalize().as_tuple()
    assert isinstance(exponent, int)
    text = "".join(map(str, digits))
    power = exponent + len(text) - 1
    return f"{'-' if sign else ''}{text[0]}.{text[1:] or '0'}E{power}"


def encode_quota_value(key: str, value: float) -> str:
    """A quota value as Kafka's ZkAdminManager stores it (integral keys as integers)."""
    if not math.isfinite(value):
        raise ValueError(f"quota {key}: {value} is not finite")
    if key in _INTEGRAL:
        return str(round(value))
    return java_double(value)


def decode_quota_values(config: Mapping[str, str]) -> dict[str, float]:
    """The quota values of an entity config (other keys, such as SCRAM credentials, ignored);
    ZnodeFormatError for a value that is not a finite number."""
    out: dict[str, float] = {}
    for key, text in config.items():
        if key not in QUOTA_KEYS:
            continue
        try:
            value = float(text.strip())
        except ValueError:
            raise ZnodeFormatError(f"quota {key}: {text[:40]!r} is not a number") from None
        if not math.isfinite(value):
            raise ZnodeFormatError(f"quota {key}: {text[:40]!r} is not a finite number")
        out[key] = value
    return out


def with_quotas(config: Mapping[str, str], changes: Mapping[str, float | None]) -> dict[str, str]:
    """`config` with each changed quota set (None: removed); its other keys (SCRAM credentials) kept."""
    out = dict(config)
    for key, value in changes.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = encode_quota_value(key, value)
    return out


# ------------------------------------------------------------------------------------- broker configs


def broker_entity_path(resource: str) -> str:
    """`brokers/<id>`, or `brokers/<default>` for the cluster-wide default (resource "")."""
    if resource != "" and not (resource.isascii() and resource.isdigit()):
        raise ValueError(f"not a broker resource: {resource!r}")
    return f"brokers/{resource or DEFAULT}"


def broker_config_path(resource: str) -> str:
    """The znode of a broker's run-time configs (resource "": the cluster-wide default)."""
    return config_path("brokers", broker_entity_path(resource).partition("/")[2])


def broker_resource_of(entity_path: str) -> str | None:
    """The broker resource ("" for the default, else the id) a notification names; None for other
    entity types. ZnodeFormatError for a malformed broker path."""
    kind, sep, rest = entity_path.partition("/")
    if kind != "brokers":
        return None
    if rest == DEFAULT:
        return ""
    if not sep or not rest.isdigit() or not rest.isascii():
        raise ZnodeFormatError(f"config entity path: {entity_path[:80]!r} is not a broker")
    return str(int(rest))
