"""Changing configs: the part IncrementalAlterConfigs (44) and the legacy AlterConfigs (33) share.

A resource is a topic (its overrides, DYNAMIC_TOPIC_CONFIG) or a broker: resource name "" for the
cluster-wide default (DYNAMIC_DEFAULT_BROKER_CONFIG) or this broker's id (DYNAMIC_BROKER_CONFIG). Each
change computes the resource's complete new set, validates all of it, and only then persists it, so a
request with one bad value changes nothing. Kafka's errors: INVALID_CONFIG for an unknown name, a bad
value, or a broker config Kafka cannot change at run time ("Cannot update these configs dynamically") or
changes on a broker id only (a `per-broker` config on the cluster default);
INVALID_REQUEST for a duplicate key or a broker id that is not this broker. In a cluster a broker
resource's set goes to ZooKeeper (`ClusterMember.set_broker_configs`), which every broker applies: its own
id's and the default's.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from enum import IntEnum
from typing import TYPE_CHECKING, Protocol, TypeVar

from exactly.configs import BROKER_CONFIGS, TOPIC_CONFIGS, ConfigType, topic_config
from exactly.configs.broker import broker_config_def
from exactly.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from exactly.broker.server import Broker

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_BROKER_LOGGER = 8
CLUSTER_WRITE_TIMEOUT_S = 30.0  # how long a cluster's broker config write waits for ZooKeeper


class AlterOp(IntEnum):
    """IncrementalAlterConfigs `ConfigOperation`."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


class _Resource(Protocol):
    resource_type: int
    resource_name: str


R = TypeVar("R", bound=_Resource)
T = TypeVar("T")


async def per_resource(
    resources: Iterable[R],
    alter: Callable[[R], Awaitable[None]],
    answer: Callable[[int, str | None, int, str], T],
) -> list[T]:
    """Alter each resource on its own, as Kafka does: one resource's error is that resource's answer only.
    `answer(error_code, error_message, resource_type, resource_name)` builds the API's response entry."""
    out = []
    for resource in resources:
        try:
            await alter(resource)
        except KafkaError as e:
            out.append(answer(e.code, e.message, resource.resource_type, resource.resource_name))
        else:
            out.append(answer(ErrorCode.NONE, None, resource.resource_type, resource.resource_name))
    return out


def current_configs(broker: Broker, resource_type: int, name: str) -> dict[str, str]:
    """The resource's present overrides (topic) or run-time configs (broker)."""
    if resource_type == RESOURCE_TOPIC:
        info = broker.metadata.topics.get(name)
        if info is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {name!r}")
        return dict(info.configs)
    if resource_type == RESOURCE_BROKER:
        return broker.configs.dynamic(broker_resource(broker, name))
    raise KafkaError(ErrorCode.INVALID_REQUEST, f"resource type {resource_type} cannot be altered")


def broker_resource(broker: Broker, name: str) -> str:
    """ "" (the cluster default) or this broker's id, as Kafka checks a BROKER resource name."""
    if name == "":
        return name
    node = broker.configs.static.node_id
    if not name.strip().lstrip("-").isdigit():
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}")
    if int(name) != node:
        raise KafkaError(
            ErrorCode.INVALID_REQUEST,
            f"Unexpected broker id, expected {node} or empty string, but received {name}",
        )
    return str(node)


def logger_resource(broker: Broker, name: str) -> None:
    """A BROKER_LOGGER resource names this broker (never the cluster default), as Kafka checks it."""
    if name == "":
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Broker id must not be empty")
    broker_resource(broker, name)


def check_unique(names: Iterable[str]) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Error due to duplicate config keys: {name}")
        seen.add(name)


def apply_incremental(
    resource_type: int, configs: dict[str, str], name: str, op: int, value: str | None
) -> None:
    """One IncrementalAlterConfigs operation on `configs` (changed in place)."""
    definition = (TOPIC_CONFIGS if resource_type == RESOURCE_TOPIC else BROKER_CONFIGS).get(name)
    if op == AlterOp.DELETE:
        configs.pop(name, None)
        return
    if op not in (AlterOp.SET, AlterOp.APPEND, AlterOp.SUBTRACT):
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unknown config operation {op} for {name}")
    if value is None:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {name}")
    if op == AlterOp.SET:
        configs[name] = value
        return
    if definition is None or definition.type is not ConfigType.LIST:
        verb = "append" if op == AlterOp.APPEND else "subtract"
        raise KafkaError(
            ErrorCode.INVALID_CONFIG, f"Config value {verb} is not allowed for config key: {name}"
        )
    # Kafka starts from the override, else the config's own default (not the broker's).
    old = configs.get(name, definition.default or "")
    current = [item.strip() for item in old.split(",") if item.strip()]
    items = [item.strip() for item in value.split(",") if item.strip()]
    if op == AlterOp.APPEND:
        current += [item for item in items if item not in current]
    else:
        current = [item for item in current if item not in items]
    configs[name] = ",".join(current)


async def commit(
    broker: Broker, resource_type: int, name: str, configs: dict[str, str], validate_only: bool
) -> None:
    """Validate the resource's complete new set and (unless validate_only) persist and apply it."""
    if resource_type == RESOURCE_TOPIC:
        for key in configs:
            topic_config(key)
        broker.topics.validate_topic_configs(configs)
        if not validate_only:
            await broker.topics.alter_topic_configs(name, configs)
        return
    resource = broker_resource(broker, name)
    definitions = {key: broker_config_def(key) for key in configs}
    unknown = sorted(key for key, definition in definitions.items() if definition is None)
    if unknown:
        raise KafkaError(ErrorCode.INVALID_CONFIG, f"Unknown broker configs: {', '.join(unknown)}")
    known = {key: definition for key, definition in definitions.items() if definition is not None}
    current = broker.configs.dynamic(resource)
    static = sorted(
        key for key, value in configs.items() if not known[key].dynamic and current.get(key) != value
    )
    if static:
        raise KafkaError(
            ErrorCode.INVALID_CONFIG, f"Cannot update these configs dynamically: Set({', '.join(static)})"
        )
    canonical = {key: known[key].canonical(value) for key, value in configs.items()}
    per_broker = sorted(key for key in configs if resource == "" and known[key].per_broker)
    if per_broker:
        raise KafkaError(
            ErrorCode.INVALID_CONFIG,
            "Cannot update these configs at default cluster level, broker id must be specified: "
            f"Set({', '.join(per_broker)})",
        )
    if broker.cluster is None:
        broker.configs.alter(resource, canonical, validate_only=validate_only)
        return
    broker.configs.alter(resource, canonical, validate_only=True)  # the cluster's are ZooKeeper's
    if not validate_only:
        await broker.cluster.set_broker_configs(resource, canonical, CLUSTER_WRITE_TIMEOUT_S)
