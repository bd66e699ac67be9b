"""Metadata (key 3): this broker, and the requested topics (auto-created when allowed, as in Kafka).

v8+ can ask for each topic's authorized operations and (v8-10) the cluster's; with no authorizer they are
every operation the resource supports (`exactly.security.operations`), else INT32_MIN ("not asked").

With an authorizer (Kafka's rules): "all topics" leaves out the ones the principal may not DESCRIBE; a
topic asked for by name or id without DESCRIBE is TOPIC_AUTHORIZATION_FAILED, whether it exists or not;
auto-creation needs CREATE on the cluster or on the topic, else TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.broker.groups import OFFSETS_TOPIC
from exactly.broker.guard import allowed, operations_field, quietly
from exactly.broker.metadata_encoding import SPLICED_FROM_VERSION, MetadataEncodings
from exactly.broker.transactions import TRANSACTION_TOPIC
from exactly.cluster.metadata import TopicInfo
from exactly.cluster.metadata_cache import MetadataCache
from exactly.errors import ErrorCode, KafkaError
from exactly.protocol.api import EncodedBody
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.metadata import (
    MetadataRequest,
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from exactly.security.operations import OMITTED, ResourceType

_ENCODINGS = MetadataEncodings()


@handler(ApiKey.METADATA)
async def handle(ctx: RequestContext, request: MetadataRequest) -> MetadataResponse | EncodedBody:
    broker = ctx.broker
    node = broker.config.node_id
    host, port = ctx.advertised
    topics: list[TopicInfo | MetadataResponseTopic]  # a TopicInfo: that topic, found
    if request.topics is None or (ctx.version == 0 and not request.topics):
        topics = [
            t for t in broker.metadata.topics.values() if quietly(ctx, ApiKey.METADATA, "topic", t.name)
        ]
    else:
        topics = []
        for wanted in request.topics:
            name = wanted.name
            if name is None:
                info = broker.metadata.by_id(wanted.topic_id)
                if info is not None and not allowed(ctx, ApiKey.METADATA, "topic", info.name):
                    code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                    topics.append(MetadataResponseTopic(code, None, wanted.topic_id))
                    continue
                topics.append(
                    info or MetadataResponseTopic(ErrorCode.UNKNOWN_TOPIC_ID, None, wanted.topic_id)
                )
                continue
            if not allowed(ctx, ApiKey.METADATA, "topic", name):
                topics.append(MetadataResponseTopic(ErrorCode.TOPIC_AUTHORIZATION_FAILED, name))
                continue
            info = broker.metadata.topics.get(name)
            if info is None and request.allow_auto_topic_creation and broker.config.auto_create_topics:
                if not quietly(ctx, ApiKey.METADATA, "create_cluster") and not allowed(
                    ctx, ApiKey.METADATA, "create_topic", name
                ):
                    topics.append(MetadataResponseTopic(ErrorCode.TOPIC_AUTHORIZATION_FAILED, name))
                    continue
                try:
                    info = await _auto_create(ctx, name)
                except KafkaError as e:
                    topics.append(MetadataResponseTopic(e.code, name))
                    continue
            if info is None:
                topics.append(MetadataResponseTopic(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name))
            else:
                topics.append(info)
    cluster_operations = OMITTED
    with_operations = ctx.version >= 8 and request.include_topic_authorized_operations
    if ctx.version >= 8 and ctx.version <= 10 and request.include_cluster_authorized_operations:
        cluster_operations = operations_field(ctx, ResourceType.CLUSTER, "kafka-cluster")
    brokers = [MetadataResponseBroker(node, host, port, None)]
    controller = node

    def view(info: TopicInfo) -> list[MetadataResponsePartition]:
        return _single(info, node)

    token: Hashable = node
    if broker.cluster is not None:  # every live broker, and each partition as ZooKeeper has it
        cache = broker.cluster.cache
        listener = (ctx.listener or broker.config.listeners[0]).name
        brokers = [MetadataResponseBroker(*b) for b in cache.live_brokers(listener)]
        controller = cache.controller_id
        view = lambda info: _replicated(info, cache)  # noqa: E731
        token = ("cluster", cache.version)
    response = MetadataResponse(
        brokers=brokers,
        cluster_id=broker.config.cluster_id,
        controller_id=controller,
        topics=[],
        cluster_authorized_operations=cluster_operations,
    )

    def operations(name: str | None) -> int:  # every topic, errors included, as Kafka does
        return operations_field(ctx, ResourceType.TOPIC, name or "") if with_operations else OMITTED

    if ctx.version >= SPLICED_FROM_VERSION:
        return _ENCODINGS.encode(ctx.version, response, [_entry(t, token, view, operations) for t in topics])
    response.topics = [_build(t, view, operations) for t in topics]
    return response


PartitionsView = Callable[[TopicInfo], list[MetadataResponsePartition]]


def _entry(
    topic: TopicInfo | MetadataResponseTopic,
    token: Hashable,
    view: PartitionsView,
    operations: Callable[[str | None], int],
) -> tuple[Hashable | None, Callable[[], MetadataResponseTopic]]:
    """(cache key, builder) of a topic: a found topic's encoding depends only on the key's fields (the
    token: this broker alone, or the cluster view's version)."""
    ops = operations(topic.name)
    if isinstance(topic, MetadataResponseTopic):
        return None, lambda: _with_operations(topic, ops)
    key = (token, topic.name, topic.topic_id, topic.internal, topic.partitions, ops)
    return key, lambda: _with_operations(_topic(topic, view), ops)


def _build(
    topic: TopicInfo | MetadataResponseTopic, view: PartitionsView, operations: Callable[[str | None], int]
) -> MetadataResponseTopic:
    found = topic if isinstance(topic, MetadataResponseTopic) else _topic(topic, view)
    return _with_operations(found, operations(topic.name))


def _with_operations(topic: MetadataResponseTopic, operations: int) -> MetadataResponseTopic:
    topic.topic_authorized_operations = operations
    return topic


def _topic(info: TopicInfo, view: PartitionsView) -> MetadataResponseTopic:
    return MetadataResponseTopic(ErrorCode.NONE, info.name, info.topic_id, info.internal, view(info))


def _single(info: TopicInfo, node: int) -> list[MetadataResponsePartition]:
    return [
        MetadataResponsePartition(ErrorCode.NONE, i, node, 0, [node], [node], [])
        for i in range(info.partitions)
    ]


def _replicated(info: TopicInfo, cache: MetadataCache) -> list[MetadataResponsePartition]:
    """Each partition's leader, leader epoch, replicas, ISR and offline replicas (LEADER_NOT_AVAILABLE
    while it has no leader, as Kafka answers)."""
    out = []
    for i in range(info.partitions):
        p = cache.partition(info.name, i)
        if p is None:
            out.append(MetadataResponsePartition(ErrorCode.LEADER_NOT_AVAILABLE, i, -1, -1, [], [], []))
            continue
        code = (
            ErrorCode.NONE if p.leader >= 0 and p.leader in cache.brokers else ErrorCode.LEADER_NOT_AVAILABLE
        )
        leader = p.leader if code == ErrorCode.NONE else -1
        out.append(
            MetadataResponsePartition(
                code, i, leader, p.leader_epoch, list(p.replicas), list(p.isr), list(p.offline)
            )
        )
    return out


async def _auto_create(ctx: RequestContext, name: str) -> TopicInfo | None:
    """A topic auto-created by Metadata; the internal topics as their coordinators create them (their
    partition counts and configs: offsets.topic.num.partitions, transaction.state.log.*), as Kafka's
    auto topic creation does, never as a plain topic of num.partitions."""
    broker = ctx.broker
    if name == OFFSETS_TOPIC:
        await broker.groups.ensure_topic()
    elif name == TRANSACTION_TOPIC:
        await broker.transactions.ensure_topic()
    else:
        return await broker.topics.create_topic(name, broker.config.num_partitions, {})
    return broker.metadata.topics.get(name)
