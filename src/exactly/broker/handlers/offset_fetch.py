"""OffsetFetch (key 9): committed offsets of a group (v8+: of several groups), -1 where none is stored.

`require_stable` (v7+, KIP-447): partitions with a pending transactional offset answer
UNSTABLE_OFFSET_COMMIT (retriable) until the transaction's marker decides it.

v9 (KIP-848) adds member id/epoch, which only consumer-protocol groups check (UNKNOWN_MEMBER_ID,
STALE_MEMBER_EPOCH): for classic groups it is v8. v10 names topics by id: an unknown id answers
UNKNOWN_TOPIC_ID for each partition asked; "every committed offset" (topics null) leaves out topics that
no longer exist, which have no id to name them by.
"""

from __future__ import annotations

import dataclasses
from typing import TypeVar

from exactly.broker import guard as authz
from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.errors import ErrorCode, KafkaError
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartition,
    OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
)

_TOPIC_IDS_VERSION = 10


@handler(ApiKey.OFFSET_FETCH)
async def handle(ctx: RequestContext, request: OffsetFetchRequest) -> OffsetFetchResponse:
    """Authorization as Kafka: GROUP DESCRIBE (else GROUP_AUTHORIZATION_FAILED for the group), then
    TOPIC DESCRIBE per topic (asked by name: TOPIC_AUTHORIZATION_FAILED; "all topics": left out)."""
    if not authz.enabled(ctx):
        return await _answer(ctx, request)
    refused = ErrorCode.GROUP_AUTHORIZATION_FAILED
    if ctx.version >= 8:
        denied = {
            g.group_id
            for g in request.groups
            if not authz.allowed(ctx, ApiKey.OFFSET_FETCH, "group", g.group_id)
        }
        kept = [g for g in request.groups if g.group_id not in denied]
        response = (
            await _answer(ctx, dataclasses.replace(request, groups=kept)) if kept else OffsetFetchResponse()
        )
        asked = {g.group_id: g.topics is not None for g in request.groups}
        for group in response.groups:
            group.topics = _visible(ctx, group.topics, asked.get(group.group_id, False))
        response.groups += [OffsetFetchResponseGroup(g, [], refused) for g in sorted(denied)]
        return response
    if not authz.allowed(ctx, ApiKey.OFFSET_FETCH, "group", request.group_id):
        return OffsetFetchResponse(topics=[], error_code=refused)
    response = await _answer(ctx, request)
    response.topics = _visible(ctx, response.topics, request.topics is not None)
    return response


_TopicT = TypeVar("_TopicT", OffsetFetchResponseTopic, OffsetFetchResponseTopics)


def _visible(ctx: RequestContext, topics: list[_TopicT], asked: bool) -> list[_TopicT]:
    out: list[_TopicT] = []
    for topic in topics:
        if (
            authz.allowed(ctx, ApiKey.OFFSET_FETCH, "topic", topic.name)
            if asked
            else authz.quietly(ctx, ApiKey.OFFSET_FETCH, "topic", topic.name)
        ):
            out.append(topic)
        elif asked:
            for p in topic.partitions:
                p.committed_offset, p.committed_leader_epoch, p.metadata = -1, -1, ""
                p.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            out.append(topic)
    return out


async def _answer(ctx: RequestContext, request: OffsetFetchRequest) -> OffsetFetchResponse:
    groups = ctx.broker.groups
    stable = request.require_stable
    if ctx.version >= 8:
        results: list[OffsetFetchResponseGroup] = []
        for group in request.groups:
            try:
                if ctx.version >= _TOPIC_IDS_VERSION:
                    results.append(await _fetch_by_topic_id(ctx, group, stable))
                    continue
                wanted = (
                    None
                    if group.topics is None
                    else [(t.name, list(t.partition_indexes)) for t in group.topics]
                )
                results.append(
                    await groups.read(
                        group.group_id,
                        lambda c, g=group, w=wanted: c.fetch_offsets(  # type: ignore[misc]
                            g.group_id, w, stable, g.member_id, g.member_epoch
                        ),
                    )
                )
            except KafkaError as e:  # NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS: this group's error
                results.append(OffsetFetchResponseGroup(group.group_id, [], e.code))
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


async def _fetch_by_topic_id(
    ctx: RequestContext, group: OffsetFetchRequestGroup, stable: bool
) -> OffsetFetchResponseGroup:
    metadata = ctx.broker.metadata
    wanted: list[tuple[str, list[int]]] | None = None
    unknown: list[OffsetFetchResponseTopics] = []
    if group.topics is not None:
        wanted = []
        for topic in group.topics:
            info = metadata.by_id(topic.topic_id)
            if info is None:
                partitions = [
                    OffsetFetchResponsePartitions(p, -1, -1, "", ErrorCode.UNKNOWN_TOPIC_ID)
                    for p in topic.partition_indexes
                ]
                unknown.append(OffsetFetchResponseTopics("", topic.topic_id, partitions))
            else:
                wanted.append((info.name, list(topic.partition_indexes)))
    result = await ctx.broker.groups.read(
        group.group_id,
        lambda c: c.fetch_offsets(group.group_id, wanted, stable, group.member_id, group.member_epoch),
    )
    if result.error_code:
        return result
    topics = []
    for found in result.topics:
        existing = metadata.topics.get(found.name)
        if existing is not None:
            topics.append(OffsetFetchResponseTopics(found.name, existing.topic_id, found.partitions))
    result.topics = topics + unknown
    return result
