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
from exactly.broker.guard import allowed, operations_field, quietly
from exactly.broker.metadata_encoding import SPLICED_FROM_VERSION, MetadataEncodings
from exactly.cluster.metadata import TopicInfo
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
                    info = await broker.topics.create_topic(name, broker.config.num_partitions, {})
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
    response = MetadataResponse(
        brokers=[MetadataResponseBroker(node, host, port, None)],
        cluster_id=broker.config.cluster_id,
        controller_id=node,
        topics=[],
        cluster_authorized_operations=cluster_operations,
    )

    def operations(name: str | None) -> int:  # every topic, errors included, as Kafka does
        return operations_field(ctx, ResourceType.TOPIC, name or "") if with_operations else OMITTED

    if ctx.version >= SPLICED_FROM_VERSION:
        return _ENCODINGS.encode(ctx.version, response, [_entry(t, node, operations) for t in topics])
    response.topics = [_build(t, node, operations) for t in topics]
    return response


def _entry(
    topic: TopicInfo | MetadataResponseTopic, node: int, operations: Callable[[str | None], int]
) -> tuple[Hashable | None, Callable[[], MetadataResponseTopic]]:
    """(cache key, builder) of a topic: a found topic's encoding depends only on the key's fields."""
    ops = operations(topic.name)
    if isinstance(topic, MetadataResponseTopic):
        return None, lambda: _with_operations(topic, ops)
    key = (node, topic.name, topic.topic_id, topic.internal, topic.partitions, ops)
    return key, lambda: _with_operations(_topic(topic, node), ops)


def _build(
    topic: TopicInfo | MetadataResponseTopic, node: int, operations: Callable[[str | None], int]
) -> MetadataResponseTopic:
    found = topic if isinstance(topic, MetadataResponseTopic) else _topic(topic, node)
    return _with_operations(found, operations(topic.name))


def _with_operations(topic: MetadataResponseTopic, operations: int) -> MetadataResponseTopic:
    topic.topic_authorized_operations = operations
    return topic


def _topic(info: TopicInfo, node: int) -> MetadataResponseTopic:
    partitions = [
        MetadataResponsePartition(ErrorCode.NONE, i, node, 0, [node], [node], [])
        for i in range(info.partitions)
    ]
    return MetadataResponseTopic(ErrorCode.NONE, info.name, info.topic_id, info.internal, partitions)
