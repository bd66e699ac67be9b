"""OffsetFetch (key 9): committed offsets of a group (v8+: of several groups), -1 where none is stored.

`require_stable` (v7+, KIP-447): partitions with a pending transactional offset answer
UNSTABLE_OFFSET_COMMIT (retriable) until the transaction's marker decides it.
"""

from __future__ import annotations

from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.errors import ErrorCode
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartition,
    OffsetFetchResponseTopic,
)


@handler(ApiKey.OFFSET_FETCH)
async def handle(ctx: RequestContext, request: OffsetFetchRequest) -> OffsetFetchResponse:
    groups = ctx.broker.groups
    stable = request.require_stable
    if ctx.version >= 8:
        results: list[OffsetFetchResponseGroup] = []
        for group in request.groups:
            wanted = (
                None if group.topics is None else [(t.name, list(t.partition_indexes)) for t in group.topics]
            )
            results.append(
                await groups.read(
                    group.group_id,
                    lambda c, g=group.group_id, w=wanted: c.fetch_offsets(g, w, stable),  # type: ignore[misc]
                )
            )
        return OffsetFetchResponse(groups=results)
    wanted = None if request.topics is None else [(t.name, list(t.partition_indexes)) for t in request.topics]
    result = await groups.read(request.group_id, lambda c: c.fetch_offsets(request.group_id, wanted, stable))
    topics = [
        OffsetFetchResponseTopic(
            t.name,
            [
                OffsetFetchResponsePartition(
                    p.partition_index,
                    p.committed_offset,
                    p.committed_leader_epoch,
                    p.metadata,
                    # v0-1 have no top-level error code: a group error goes in every partition
                    p.error_code or (result.error_code if ctx.version < 2 else ErrorCode.NONE),
                )
                for p in t.partitions
            ],
        )
        for t in result.topics
    ]
    return OffsetFetchResponse(topics=topics, error_code=result.error_code)
