"""The share coordinator RPCs (KIP-932, inter-broker, v0): InitializeShareGroupState (83),
ReadShareGroupState (84), WriteShareGroupState (85), DeleteShareGroupState (86) and
ReadShareGroupStateSummary (87).

A share partition's data leader sends them to the share coordinator of its key — the leader of the key's
`__share_group_state` partition (exactly.broker.share_persister). Each partition entry runs on
exactly.broker.share_coordinator and gets its own code: NOT_COORDINATOR when this broker does not lead
the key's state partition, COORDINATOR_LOAD_IN_PROGRESS while it loads it, FENCED_LEADER_EPOCH /
FENCED_STATE_EPOCH from the shard's checks, INVALID_REQUEST for a write of a state never initialised.
A share partition with no state reads as StateEpoch -1, StartOffset -1. Only brokers may call them:
CLUSTER_ACTION on the cluster, else CLUSTER_AUTHORIZATION_FAILED for every entry.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import TypeVar

from exactly.broker import guard as authz
from exactly.broker.context import RequestContext
from exactly.broker.dispatch import SHARE_DISABLED_MESSAGE, handler
from exactly.errors import ErrorCode
from exactly.group.share.coordinator import Outcome, StateWrite
from exactly.group.share.partition import RecordState, StateBatch
from exactly.group.share.records import SharePartitionKey
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages import delete_share_group_state as delete_msg
from exactly.protocol.messages import initialize_share_group_state as init_msg
from exactly.protocol.messages import read_share_group_state as read_msg
from exactly.protocol.messages import read_share_group_state_summary as summary_msg
from exactly.protocol.messages import write_share_group_state as write_msg

P = TypeVar("P")  # a request's partition entry
R = TypeVar("R")  # a response's partition result


async def _each(
    ctx: RequestContext,
    api: ApiKey,
    group_id: str,
    topics: list[tuple[uuid.UUID, list[P]]],
    index: Callable[[P], int],
    run: Callable[[SharePartitionKey, P], Awaitable[Outcome]],
) -> list[tuple[uuid.UUID, list[tuple[int, Outcome]]]]:
    """Every partition entry's outcome, run concurrently; CLUSTER_AUTHORIZATION_FAILED for all of them
    unless the caller may act as a broker, UNSUPPORTED_VERSION while share groups are off."""
    refused: Outcome | None = None
    if not ctx.broker.config.group_share_enable:
        refused = Outcome(ErrorCode.UNSUPPORTED_VERSION, message=SHARE_DISABLED_MESSAGE)
    elif not authz.allowed(ctx, api, "cluster"):
        refused = Outcome(
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED, message="share coordinator RPCs are for brokers"
        )
    if refused is not None:
        return [(topic_id, [(index(p), refused) for p in parts]) for topic_id, parts in topics]
    keyed = [
        (topic_id, index(p), run(SharePartitionKey(group_id, topic_id, index(p)), p))
        for topic_id, parts in topics
        for p in parts
    ]
    outcomes = await asyncio.gather(*(c for _, _, c in keyed))
    out: dict[uuid.UUID, list[tuple[int, Outcome]]] = {}
    for (topic_id, partition, _), outcome in zip(keyed, outcomes, strict=True):
        out.setdefault(topic_id, []).append((partition, outcome))
    return list(out.items())


@handler(ApiKey.INITIALIZE_SHARE_GROUP_STATE)
async def initialize(
    ctx: RequestContext, request: init_msg.InitializeShareGroupStateRequest
) -> init_msg.InitializeShareGroupStateResponse:
    coordinator = ctx.broker.share_coordinator
    done = await _each(
        ctx,
        ApiKey.INITIALIZE_SHARE_GROUP_STATE,
        request.group_id,
        [(t.topic_id, t.partitions) for t in request.topics],
        lambda p: p.partition,
        lambda key, p: coordinator.initialize(key, p.state_epoch, p.start_offset),
    )
    return init_msg.InitializeShareGroupStateResponse(
        [
            init_msg.InitializeStateResult(
                topic_id,
                [init_msg.PartitionResult(i, o.code, o.message if o.code else None) for i, o in parts],
            )
            for topic_id, parts in done
        ]
    )


@handler(ApiKey.READ_SHARE_GROUP_STATE)
async def read(
    ctx: RequestContext, request: read_msg.ReadShareGroupStateRequest
) -> read_msg.ReadShareGroupStateResponse:
    coordinator = ctx.broker.share_coordinator
    done = await _each(
        ctx,
        ApiKey.READ_SHARE_GROUP_STATE,
        request.group_id,
        [(t.topic_id, t.partitions) for t in request.topics],
        lambda p: p.partition,
        lambda key, p: coordinator.read(key, p.leader_epoch),
    )

    def result(index: int, outcome: Outcome) -> read_msg.PartitionResult:
        if outcome.code != ErrorCode.NONE or outcome.state is None:
            return read_msg.PartitionResult(index, outcome.code, outcome.message, -1, -1, [])
        stored = outcome.state
        batches = [
            read_msg.StateBatch(b.first_offset, b.last_offset, int(b.state), b.delivery_count)
            for b in stored.state.batches
        ]
        return read_msg.PartitionResult(
            index, 0, None, stored.state_epoch, stored.state.start_offset, batches
        )

    return read_msg.ReadShareGroupStateResponse(
        [read_msg.ReadStateResult(topic_id, [result(i, o) for i, o in parts]) for topic_id, parts in done]
    )


@handler(ApiKey.WRITE_SHARE_GROUP_STATE)
async def write(
    ctx: RequestContext, request: write_msg.WriteShareGroupStateRequest
) -> write_msg.WriteShareGroupStateResponse:
    coordinator = ctx.broker.share_coordinator

    def run(key: SharePartitionKey, p: write_msg.PartitionData) -> Awaitable[Outcome]:
        try:
            batches = tuple(
                StateBatch(b.first_offset, b.last_offset, RecordState(b.delivery_state), b.delivery_count)
                for b in p.state_batches
            )
        except ValueError:
            return _done(
                Outcome(ErrorCode.INVALID_REQUEST, message="a state batch has an unknown delivery state")
            )
        return coordinator.write(key, StateWrite(p.state_epoch, p.leader_epoch, p.start_offset, batches))

    done = await _each(
        ctx,
        ApiKey.WRITE_SHARE_GROUP_STATE,
        request.group_id,
        [(t.topic_id, t.partitions) for t in request.topics],
        lambda p: p.partition,
        run,
    )
    return write_msg.WriteShareGroupStateResponse(
        [
            write_msg.WriteStateResult(
                topic_id,
                [write_msg.PartitionResult(i, o.code, o.message if o.code else None) for i, o in parts],
            )
            for topic_id, parts in done
        ]
    )


@handler(ApiKey.DELETE_SHARE_GROUP_STATE)
async def delete(
    ctx: RequestContext, request: delete_msg.DeleteShareGroupStateRequest
) -> delete_msg.DeleteShareGroupStateResponse:
    coordinator = ctx.broker.share_coordinator
    done = await _each(
        ctx,
        ApiKey.DELETE_SHARE_GROUP_STATE,
        request.group_id,
        [(t.topic_id, t.partitions) for t in request.topics],
        lambda p: p.partition,
        lambda key, p: coordinator.delete(key),
    )
    return delete_msg.DeleteShareGroupStateResponse(
        [
            delete_msg.DeleteStateResult(
                topic_id,
                [delete_msg.PartitionResult(i, o.code, o.message if o.code else None) for i, o in parts],
            )
            for topic_id, parts in done
        ]
    )


@handler(ApiKey.READ_SHARE_GROUP_STATE_SUMMARY)
async def summary(
    ctx: RequestContext, request: summary_msg.ReadShareGroupStateSummaryRequest
) -> summary_msg.ReadShareGroupStateSummaryResponse:
    coordinator = ctx.broker.share_coordinator
    done = await _each(
        ctx,
        ApiKey.READ_SHARE_GROUP_STATE_SUMMARY,
        request.group_id,
        [(t.topic_id, t.partitions) for t in request.topics],
        lambda p: p.partition,
        lambda key, p: coordinator.summary(key, p.leader_epoch),
    )

    def result(index: int, outcome: Outcome) -> summary_msg.PartitionResult:
        stored = outcome.state
        if outcome.code != ErrorCode.NONE or stored is None:
            return summary_msg.PartitionResult(index, outcome.code, outcome.message, -1, -1, -1)
        return summary_msg.PartitionResult(
            index, 0, None, stored.state_epoch, stored.leader_epoch, stored.state.start_offset
        )

    return summary_msg.ReadShareGroupStateSummaryResponse(
        [
            summary_msg.ReadStateSummaryResult(topic_id, [result(i, o) for i, o in parts])
            for topic_id, parts in done
        ]
    )


async def _done(outcome: Outcome) -> Outcome:
    return outcome
