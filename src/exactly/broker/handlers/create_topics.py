"""CreateTopics (key 19). One broker: replication factor must be 1 (or -1 = default); explicit replica
assignments are accepted when they name only this broker. Topic configs are validated against the
catalogue (`exactly.configs.topic`, INVALID_CONFIG naming the config) and stored in Kafka's canonical
form; from v5 the answer lists every config of the new topic with its value and source.

A client with a `controller_mutation_rate` quota (KIP-599) has each new topic's partitions counted just
before it is created (not for validate_only); from v6 a topic that does not fit is THROTTLING_QUOTA_EXCEEDED
and the others are created, and the response's throttle_time_ms says when to try again (broker/throttling.py).
"""

from __future__ import annotations

from collections import Counter

from exactly.broker import guard as authz
from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.broker.handlers.describe_configs import topic_entries
from exactly.broker.throttling import mutation_quota, throttle_mutations
from exactly.cluster.metadata import validate_topic_name
from exactly.errors import ErrorCode, KafkaError
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.create_topics import (
    CreatableTopic,
    CreatableTopicConfigs,
    CreatableTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
)
from exactly.quotas.manager import ControllerMutationQuota


@handler(ApiKey.CREATE_TOPICS)
async def handle(ctx: RequestContext, request: CreateTopicsRequest) -> CreateTopicsResponse:
    results = []
    quota = mutation_quota(ctx)
    counts = Counter(t.name for t in request.topics)
    for topic in request.topics:
        if counts[topic.name] > 1:  # Kafka creates none of the copies
            results.append(_error(topic, ErrorCode.INVALID_REQUEST, "Duplicate topic name."))
            continue
        if not authz.quietly(ctx, ApiKey.CREATE_TOPICS, "cluster") and not authz.allowed(
            ctx, ApiKey.CREATE_TOPICS, "topic", topic.name
        ):
            results.append(_error(topic, ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed."))
            continue
        try:
            results.append(await _create(ctx, topic, request.validate_only, quota))
        except KafkaError as e:
            results.append(_error(topic, e.code, e.message))
    return CreateTopicsResponse(throttle_time_ms=throttle_mutations(ctx, quota), topics=results)


async def _create(
    ctx: RequestContext, topic: CreatableTopic, validate_only: bool, quota: ControllerMutationQuota
) -> CreatableTopicResult:
    broker = ctx.broker
    node = broker.config.node_id
    validate_topic_name(topic.name)
    if topic.name in broker.metadata.topics:
        raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {topic.name!r} already exists")
    cluster = broker.cluster
    assignment: dict[int, tuple[int, ...]] | None = None
    replication_factor = topic.replication_factor
    if topic.assignments:
        if topic.num_partitions != -1 or topic.replication_factor != -1:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "give either assignments or partitions/replication")
        if cluster is None and any(a.broker_ids != [node] for a in topic.assignments):
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"this cluster has one broker, {node}")
        assignment = _checked_assignment(ctx, topic)
        partitions = len(assignment)
        replication_factor = len(assignment[0])
    else:
        partitions = broker.config.num_partitions if topic.num_partitions == -1 else topic.num_partitions
        if partitions < 1:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, "number of partitions must be at least 1")
        if replication_factor == -1:
            replication_factor = broker.config.default_replication_factor if cluster is not None else 1
        available = len(cluster.broker_metadata()) if cluster is not None else 1
        if replication_factor < 1 or replication_factor > available:
            raise KafkaError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"Replication factor: {replication_factor} larger than available brokers: {available}."
                if replication_factor > available
                else "Replication factor must be larger than 0.",
            )
    configs: dict[str, str] = {}
    for c in topic.configs:
        if c.value is not None:
            configs[c.name] = c.value
    broker.topics.validate_topic_configs(configs)
    if validate_only:
        return CreatableTopicResult(
            topic.name,
            error_code=ErrorCode.NONE,
            error_message=None,
            num_partitions=partitions,
            replication_factor=replication_factor,
        )
    quota.record(partitions)  # THROTTLING_QUOTA_EXCEEDED when strict and over
    info = await broker.topics.create_topic(
        topic.name, partitions, configs, replication_factor=replication_factor, assignment=assignment
    )
    described = [  # v5+: the created topic's configs, as Kafka answers
        CreatableTopicConfigs(e.name, e.value, e.read_only, e.config_source, e.is_sensitive)
        for e in topic_entries(broker, info, None, include_synonyms=False, include_documentation=False)
    ]
    return CreatableTopicResult(
        topic.name,
        info.topic_id,
        ErrorCode.NONE,
        None,
        num_partitions=partitions,
        replication_factor=replication_factor,
        configs=described,
    )


def _checked_assignment(ctx: RequestContext, topic: CreatableTopic) -> dict[int, tuple[int, ...]]:
    """An explicit assignment, as Kafka checks it: partitions numbered 0..n-1, one replication factor,
    no broker twice in a partition, only known brokers (INVALID_REPLICA_ASSIGNMENT)."""
    cluster = ctx.broker.cluster
    known = set(cluster.cache.brokers) if cluster is not None else {ctx.broker.config.node_id}
    out = {a.partition_index: tuple(a.broker_ids) for a in topic.assignments}
    if sorted(out) != list(range(len(out))):
        raise KafkaError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT, "partitions must be numbered from 0 without gaps"
        )
    sizes = {len(r) for r in out.values()}
    if len(sizes) != 1 or 0 in sizes:
        raise KafkaError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT, "every partition needs the same replication factor"
        )
    for index, replicas in out.items():
        if len(set(replicas)) != len(replicas):
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"partition {index} names a broker twice")
        unknown = sorted(set(replicas) - known)
        if unknown:
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"unknown brokers {unknown}")
    return out


def _error(topic: CreatableTopic, code: ErrorCode, message: str) -> CreatableTopicResult:
    # Kafka resets a failed topic's result to no configs (an empty array, never null) and -1 partitions and
    # replication factor (KafkaApis.handleCreateTopicsRequest).
    return CreatableTopicResult(
        topic.name, error_code=code, error_message=message or None, num_partitions=-1, replication_factor=-1
    )
