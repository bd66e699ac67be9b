"""ListPartitionReassignments (key 46): on one broker no reassignment is ever in progress.

Kafka's controller lists only partitions with an ongoing reassignment and silently skips unknown
topics and partitions, so the answer is always an empty list with no error.
"""

from __future__ import annotations

from exactly.broker import guard as authz
from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.errors import ErrorCode
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)


@handler(ApiKey.LIST_PARTITION_REASSIGNMENTS)
async def handle(
    ctx: RequestContext, request: ListPartitionReassignmentsRequest
) -> ListPartitionReassignmentsResponse:
    if not authz.allowed(ctx, ApiKey.LIST_PARTITION_REASSIGNMENTS, "cluster"):
        code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return ListPartitionReassignmentsResponse(error_code=code, error_message=None, topics=[])
    return ListPartitionReassignmentsResponse(error_code=ErrorCode.NONE, error_message=None, topics=[])
