"""DescribeClientQuotas (key 48): the configured client quotas whose entity matches a filter.

The filter semantics and errors are Kafka's (ClientQuotasImage.describe, see quotas/entities.py): a
refused filter is a top-level error with a message and null entries.
"""

from __future__ import annotations

from exactly.broker import guard as authz
from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.errors import ErrorCode, KafkaError
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.describe_client_quotas import (
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
    EntityData,
    EntryData,
    ValueData,
)
from exactly.quotas.entities import FilterComponent, describe


@handler(ApiKey.DESCRIBE_CLIENT_QUOTAS)
async def handle(ctx: RequestContext, request: DescribeClientQuotasRequest) -> DescribeClientQuotasResponse:
    if not authz.allowed(ctx, ApiKey.DESCRIBE_CLIENT_QUOTAS, "cluster"):
        code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return DescribeClientQuotasResponse(error_code=code, error_message=None, entries=None)
    components = [FilterComponent(c.entity_type, c.match_type, c.match) for c in request.components]
    try:
        found = describe(ctx.broker.metadata.client_quotas, components, request.strict)
    except KafkaError as e:
        return DescribeClientQuotasResponse(error_code=e.code, error_message=e.message, entries=None)
    entries = [
        EntryData(
            [EntityData(entity_type, name) for entity_type, name in entity],
            [ValueData(key, value) for key, value in sorted(values.items())],
        )
        for entity, values in found
    ]
    return DescribeClientQuotasResponse(error_code=ErrorCode.NONE, error_message=None, entries=entries)
