"""AlterClientQuotas (key 49): set or remove client quotas, stored in the cluster metadata log (in a
cluster: in ZooKeeper, `ClusterMember.alter_client_quotas`, which every broker applies; ZooKeeper out of
reach past the write's deadline is that entry's REQUEST_TIMED_OUT).

Each entry is validated as Kafka's ClientQuotaControlManager does (quotas/entities.py) and gets its own
error code and message; a valid entry's changes are appended as one record (nothing when validate_only
or when no value actually changes). A second entry for an entity already in the request is refused
(INVALID_REQUEST "Ignoring duplicate entity ...", as Kafka's controller).

Enforced (docs/quotas.md): producer_byte_rate and consumer_byte_rate (handlers/produce.py, fetch.py),
request_percentage (KIP-124: every request's handling time, broker/throttling.py) and
controller_mutation_rate (KIP-599: partitions created, added or deleted per second; CreateTopics,
CreatePartitions, DeleteTopics). connection_creation_rate (an `ip` entity, KIP-612) is stored and
described but not enforced; the connection limits that are enforced are broker configs
(max.connections, listener.name.<l>.max.connections, max.connections.per.ip and its overrides).
"""

from __future__ import annotations

from exactly.broker import guard as authz
from exactly.broker.config_changes import CLUSTER_WRITE_TIMEOUT_S
from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.errors import ErrorCode, KafkaError
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.alter_client_quotas import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    EntityData,
    ResponseEntryData,
)
from exactly.quotas.entities import QuotaEntity, entity_text, make_entity, validate_alteration


@handler(ApiKey.ALTER_CLIENT_QUOTAS)
async def handle(ctx: RequestContext, request: AlterClientQuotasRequest) -> AlterClientQuotasResponse:
    metadata = ctx.broker.metadata
    results = []
    seen: set[QuotaEntity] = set()
    permitted = authz.allowed(ctx, ApiKey.ALTER_CLIENT_QUOTAS, "cluster")
    for entry in request.entries:
        if not permitted:
            data = [EntityData(e.entity_type, e.entity_name) for e in entry.entity]
            results.append(ResponseEntryData(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None, data))
            continue
        pairs = [(e.entity_type, e.entity_name) for e in entry.entity]
        entity_data = [EntityData(e.entity_type, e.entity_name) for e in entry.entity]
        entity = make_entity(pairs)
        try:
            if entity in seen:
                raise KafkaError(
                    ErrorCode.INVALID_REQUEST, f"Ignoring duplicate entity {entity_text(entity)}"
                )
            seen.add(entity)
            changes = validate_alteration(
                pairs, [(op.key, None if op.remove else op.value) for op in entry.ops]
            )
            if request.validate_only:
                pass
            elif ctx.broker.cluster is not None:
                await ctx.broker.cluster.alter_client_quotas(entity, changes, CLUSTER_WRITE_TIMEOUT_S)
            else:
                metadata.alter_client_quotas(entity, changes)
        except KafkaError as e:
            results.append(ResponseEntryData(e.code, e.message, entity_data))
            continue
        results.append(ResponseEntryData(ErrorCode.NONE, None, entity_data))
    return AlterClientQuotasResponse(entries=results)
