"""DescribeConfigs (key 32): every config of a topic or of the broker, as Kafka's `ConfigHelper` does.

A topic lists every topic config (`exactly.configs.topic`) with its effective value; its source is that
of the first synonym in this order: the topic's override (DYNAMIC_TOPIC_CONFIG), the broker's own
run-time config (DYNAMIC_BROKER_CONFIG), the cluster-wide run-time default (DYNAMIC_DEFAULT_BROKER_CONFIG),
server.properties / --set (STATIC_BROKER_CONFIG), Kafka's default of a broker synonym (DEFAULT_CONFIG).
The broker (resource name = its id) lists every broker config exactly knows (`exactly.configs.broker`),
read-only unless Kafka changes it at run time; resource name "" lists the cluster-wide run-time defaults.
A BROKER_LOGGER resource (the broker's id) lists the broker's loggers and their levels
(exactly.broker.loggers), source DYNAMIC_BROKER_LOGGER_CONFIG, as Kafka does.
Synonyms and documentation are sent only when asked (v1+, v3+); the type is KIP-569's (v3+).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from exactly.broker import guard as authz
from exactly.broker import loggers
from exactly.broker.config_changes import broker_resource, logger_resource
from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.cluster.metadata import TopicInfo
from exactly.configs import BROKER_CONFIGS, TOPIC_CONFIGS, ConfigDef, ConfigSource, synonym_group
from exactly.configs.broker import broker_config_def
from exactly.errors import ErrorCode, KafkaError
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.describe_configs import (
    DescribeConfigsRequest,
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
    DescribeConfigsResult,
    DescribeConfigsSynonym,
)
from exactly.security.listeners import Endpoint

if TYPE_CHECKING:
    from exactly.broker.server import Broker

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_BROKER_LOGGER = 8


@handler(ApiKey.DESCRIBE_CONFIGS)
async def handle(ctx: RequestContext, request: DescribeConfigsRequest) -> DescribeConfigsResponse:
    results = []
    for resource in request.resources:
        wanted = set(resource.configuration_keys) if resource.configuration_keys else None
        try:
            authz.check_config_resource(
                ctx, ApiKey.DESCRIBE_CONFIGS, resource.resource_type, resource.resource_name
            )
            if resource.resource_type == RESOURCE_TOPIC:
                info = ctx.broker.metadata.topics.get(resource.resource_name)
                if info is None:
                    raise KafkaError(
                        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {resource.resource_name!r}"
                    )
                entries = topic_entries(
                    ctx.broker, info, wanted, request.include_synonyms, request.include_documentation
                )
            elif resource.resource_type == RESOURCE_BROKER:
                entries = broker_entries(
                    ctx.broker,
                    broker_resource(ctx.broker, resource.resource_name),
                    wanted,
                    request.include_synonyms,
                    request.include_documentation,
                )
            elif resource.resource_type == RESOURCE_BROKER_LOGGER:
                logger_resource(ctx.broker, resource.resource_name)
                entries = logger_entries(wanted)
            else:
                raise KafkaError(
                    ErrorCode.INVALID_REQUEST, f"resource type {resource.resource_type} is not supported"
                )
        except KafkaError as e:
            results.append(
                DescribeConfigsResult(e.code, e.message, resource.resource_type, resource.resource_name)
            )
            continue
        results.append(
            DescribeConfigsResult(
                ErrorCode.NONE, None, resource.resource_type, resource.resource_name, entries
            )
        )
    return DescribeConfigsResponse(results=results)


def topic_entries(
    broker: Broker,
    info: TopicInfo,
    wanted: set[str] | None,
    include_synonyms: bool,
    include_documentation: bool,
) -> list[DescribeConfigsResourceResult]:
    effective = broker.topics.validate_topic_configs(
        {k: v for k, v in info.configs.items() if k in TOPIC_CONFIGS}
    ).to_properties()
    layers = _broker_layers(broker)
    entries = []
    for name, definition in TOPIC_CONFIGS.items():
        if wanted is not None and name not in wanted:
            continue
        synonyms = _synonyms(tuple(s.name for s in definition.synonyms), layers)
        if name in info.configs:
            synonyms.insert(
                0, DescribeConfigsSynonym(name, info.configs[name], ConfigSource.DYNAMIC_TOPIC_CONFIG)
            )
        entries.append(
            _entry(definition, effective[name], synonyms, False, include_synonyms, include_documentation)
        )
    return entries


def broker_entries(
    broker: Broker,
    resource: str,
    wanted: set[str] | None,
    include_synonyms: bool,
    include_documentation: bool,
) -> list[DescribeConfigsResourceResult]:
    layers = _broker_layers(broker)
    if resource == "":  # the cluster-wide run-time defaults only, as Kafka
        layers = [(ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, layers[1][1]), *layers[2:]]
        names = sorted(broker.configs.dynamic(""))
    else:  # with the listener.name.<listener>.<config> names set at run time
        names = sorted({*BROKER_CONFIGS, *broker.configs.dynamic()})
    special = _effective_specials(broker)
    entries = []
    for name in names:
        if wanted is not None and name not in wanted:
            continue
        definition = broker_config_def(name)
        if definition is None:  # stored by an earlier version that knew it
            continue
        synonyms = _synonyms(synonym_group(name), layers)
        value = next((layer[name] for _, layer in layers if name in layer), None)
        if name in special and resource != "":
            value = special[name]
        read_only = not definition.dynamic
        entries.append(
            _entry(definition, value, synonyms, read_only, include_synonyms, include_documentation)
        )
    return entries


def logger_entries(wanted: set[str] | None) -> list[DescribeConfigsResourceResult]:
    """The broker's loggers and their levels, as Kafka describes a BROKER_LOGGER (no type, no synonyms)."""
    return [
        DescribeConfigsResourceResult(
            name=name,
            value=level,
            read_only=False,
            config_source=ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG,
            is_default=False,
            is_sensitive=False,
            synonyms=[],
            config_type=0,
            documentation=None,
        )
        for name, level in loggers.loggers().items()
        if wanted is None or name in wanted
    ]


def _broker_layers(broker: Broker) -> list[tuple[ConfigSource, Mapping[str, str]]]:
    node = str(broker.configs.static.node_id)
    defaults = {n: d.default for n, d in BROKER_CONFIGS.items() if d.default is not None}
    return [
        (ConfigSource.DYNAMIC_BROKER_CONFIG, broker.configs.dynamic(node)),
        (ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, broker.configs.dynamic("")),
        (ConfigSource.STATIC_BROKER_CONFIG, broker.configs.static.properties),
        (ConfigSource.DEFAULT_CONFIG, defaults),
    ]


def _effective_specials(broker: Broker) -> dict[str, str]:
    """Broker configs whose value is what the broker runs with, whichever way it was given."""
    config = broker.configs.static
    listeners = [Endpoint(x.name, x.host, broker.bound_port(x)) for x in config.listeners]
    advertised = [Endpoint(x.name, *broker.advertised_for(x)) for x in config.listeners]
    return {
        "node.id": str(config.node_id),
        "broker.id": str(config.node_id),
        "listeners": ",".join(map(str, listeners)),
        "advertised.listeners": ",".join(map(str, advertised)),
        "log.dirs": ",".join(map(str, config.all_log_dirs)),
    }


def _synonyms(
    names: tuple[str, ...], layers: list[tuple[ConfigSource, Mapping[str, str]]]
) -> list[DescribeConfigsSynonym]:
    """Kafka's `configSynonyms`: each layer in priority order, within it each name in priority order."""
    return [
        DescribeConfigsSynonym(name, None if _sensitive(name) else layer[name], source)
        for source, layer in layers
        for name in names
        if name in layer
    ]


def _sensitive(name: str) -> bool:
    """A PASSWORD config: Kafka never sends its value, in an entry or in a synonym."""
    definition = BROKER_CONFIGS.get(name) or TOPIC_CONFIGS.get(name)
    return definition is not None and definition.sensitive


def _entry(
    definition: ConfigDef,
    value: str | None,
    synonyms: list[DescribeConfigsSynonym],
    read_only: bool,
    include_synonyms: bool,
    include_documentation: bool,
) -> DescribeConfigsResourceResult:
    source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
    return DescribeConfigsResourceResult(
        name=definition.name,
        value=None if definition.sensitive else value,
        read_only=read_only,
        config_source=source,
        is_default=source == ConfigSource.DEFAULT_CONFIG,
        is_sensitive=definition.sensitive,
        synonyms=synonyms if include_synonyms else [],
        config_type=definition.type,
        documentation=definition.doc if include_documentation else None,
    )
